"""Archived environments as Harbor tasks, and Harbor task folders back into an archive.

``spadework archive export --format harbor DIR`` writes one Harbor task per chosen environment and
seed (``<class>-<id8>-l<level>-s<seed>/``), each a folder Harbor's own loader reads
(``harbor.models.task.task.Task``):

==========================  =====================================================================
``task.toml``               schema 1.4; ``[metadata]`` carries the environment's id, class,
                            setting, skill, level and seed, its turn limit and its archived
                            statistics; no network, one CPU, 2 GiB
``instruction.md``          how to play (``python3 /app/play.py 'REPLY'``, one reply a turn) and
                            the episode's first observation
``environment/Dockerfile``  python:3.11-slim with only the packages the code imports (numpy,
                            math-verify); copies ``app/``
``environment/app/``        the archived code as ``env.py``, the base-class kit it imports
                            (``gameenv``, ``toolenv``), ``episode.json`` (seed, level, turns),
                            ``runner.py`` and ``play.py``, which logs every reply to
                            ``episode.jsonl``
``tests/``                  ``test.sh`` runs ``verify.py``, which replays the logged replies
                            against the verifier's own copy of the code (the agent cannot change
                            what scores it), in a child process with CPU, memory and time limits,
                            and writes the total reward to ``/logs/verifier/reward.txt``
``solution/``               ``solve.sh`` plays ``replies.json``, the environment's ``solution()``
                            for that seed and level, computed at export in spadework's sandbox
==========================  =====================================================================

Each task is made in spadework's sandbox first (the first observation, the solution, and a replay
that must win), so an environment that fails there is skipped with its reason, never written. In
the task's container the code runs as Harbor runs any task's: inside the container, never in
Harbor's process.

``spadework archive import --format harbor DIR`` reads task folders (a ``task.toml`` each, searched
recursively), finds the environment's Python module in ``environment/`` (this exporter's
``app/env.py``, or any module there that defines an environment class with ``reset`` and
``step``), checks it in the sandbox as designs are checked, and archives it as ``imported``,
accepted or rejected with its reason; its task name and ``[metadata]`` go to ``imports``.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import spadework.env as env_pkg
from spadework.archive.records import EnvRecord, ImportRecord
from spadework.archive.spade_import import GameOutcome
from spadework.env.checker import check
from spadework.env.novelty import NoveltyIndex
from spadework.env.probe import solution_actions
from spadework.env.static import check_static
from spadework.errors import ConfigError, ContractError, EnvError
from spadework.integrations.hosted import HostedEnv
from spadework.integrations.source import imports_of, play_settings
from spadework.types import env_id_of

FILES = Path(__file__).resolve().parent / "harbor_files"
_KITS = frozenset({"gameenv", "toolenv"})  # the base-class kits, copied where code imports them
#: Packages a task's image installs when the code imports them (the versions spadework pins).
_PIP = {"numpy": "numpy==2.4.6", "math_verify": "math-verify==0.9.0"}
_OWN = {"runner.py", "play.py", "verify.py"}


@dataclass(frozen=True)
class HarborExport:
    """What an export wrote: the task folders, and the environments (or seeds) skipped, each
    with its reason."""

    path: Path
    tasks: tuple[str, ...]
    skipped: tuple[str, ...]


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "env"


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return json.dumps(str(v))  # a TOML basic string: JSON's escapes are TOML's


def _task_toml(meta: dict[str, Any]) -> str:
    lines = ['schema_version = "1.4"', 'source = "spadework"', "", "[metadata]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in meta.items() if v is not None]
    lines += ["", "[verifier]", "timeout_sec = 300.0", "", "[agent]", "timeout_sec = 1800.0", "",
              "[environment]", "build_timeout_sec = 600.0", "cpus = 1", "memory_mb = 2048",
              "network_mode = \"no-network\"", ""]
    return "\n".join(lines)


def _instruction(meta: dict[str, Any], first: str) -> str:
    tool = meta["setting"] == "tool-use"
    how = ("Each reply calls tools with <tool_call>{...}</tool_call> blocks or gives the final "
           "answer as <answer>...</answer>, as the observation explains." if tool else
           "Each reply is one move, written as the observation asks (for example \\boxed{...}).")
    return (f"# {meta['class_name']} (level {meta['level']}, instance {meta['seed']})\n\n"
            "You are playing a multi-turn text environment. Send each reply with\n\n"
            "    python3 /app/play.py 'YOUR REPLY'\n\n"
            "(or pipe the reply on stdin). The command prints the environment's answer and how "
            f"many of your {meta['max_turns']} replies are used; `python3 /app/play.py --show` "
            f"prints where the episode stands. {how} The episode is scored by replaying your "
            "replies, in order, so only what you send through play.py counts.\n\n"
            f"## The first observation\n\n```text\n{first}\n```\n")


def _dockerfile(imports: frozenset[str]) -> str:
    pip = sorted(_PIP[m] for m in imports if m in _PIP)
    lines = ["FROM python:3.11-slim", ""]
    if pip:
        lines += [f"RUN pip install --no-cache-dir {' '.join(pip)}", ""]
    lines += ["WORKDIR /app", "COPY app/ /app/", ""]
    return "\n".join(lines)


def _write_code(folder: Path, code: str, imports: frozenset[str], spec: dict[str, Any]) -> None:
    """The environment's own files: env.py, its kit, episode.json and the runner."""
    folder.mkdir(parents=True)
    (folder / "env.py").write_text(code, encoding="utf-8")
    for kit in sorted(_KITS & imports):
        src = Path(env_pkg.__file__).resolve().parent / kit
        shutil.copytree(src, folder / kit, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "episode.json").write_text(json.dumps(spec, indent=1) + "\n", encoding="utf-8")
    shutil.copy(FILES / "runner.py", folder / "runner.py")


def _made(rec: EnvRecord, seed: int, level: int, max_turns: int, sandbox: Any) -> tuple[str, list[str]]:
    """The first observation and the winning replies of (``rec``, ``seed``, ``level``), from
    spadework's sandbox; ContractError when the solution does not win there."""
    with HostedEnv(rec.source, level=level, max_turns=max_turns, sandbox=sandbox) as h:
        first, _ = h.reset(seed)
        replies = [str(r) for r in solution_actions(h.solution())]
        turn = None
        for reply in replies:
            turn = h.step(reply)
            if turn.done:
                break
    if turn is None or not turn.terminated or turn.reward < 1.0:
        raise ContractError(f"its solution() does not win seed {seed} at level {level}")
    return first, replies


def export_harbor(archive: Any, out: str | Path, *, sandbox: Any, seeds: tuple[int, ...] = (0,),
                  status: str = "accepted", skill: str | None = None, level: int | None = None,
                  env_ids: tuple[str, ...] = (), force: bool = False) -> HarborExport:
    """Write a Harbor task per chosen environment and seed into the folder ``out`` (see the module
    docstring). Environments: those of ``status`` (and ``skill``), or the ``env_ids`` given (ids
    or 4+ hex prefixes). ``level``: the level played (default: the level each environment plays
    next in the archive, capped at its LEVELS). ``out`` must be new or empty, or ``force``."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not force)):
        raise ConfigError(f"{out} exists and is not an empty folder; choose a new one or pass "
                          "--force to write into it")
    if not seeds:
        raise ConfigError("give at least one seed")
    records = ([archive.find_env(e) for e in env_ids] if env_ids
               else archive.list_envs(status=status, skill=skill))
    if not records:
        raise ConfigError(f"no {status} environments{f' of skill {skill}' if skill else ''} "
                          "in the archive to export")
    levels_now = archive.current_levels()
    out.mkdir(parents=True, exist_ok=True)
    tasks, skipped = [], []
    for rec in records:
        turns, declared, lvl = play_settings(rec, levels_now, level)
        stats = archive.env_stats(rec.env_id)
        imports = imports_of(rec.code)
        for seed in seeds:
            name = f"{_slug(rec.class_name or 'env')}-{rec.env_id[:8]}-l{lvl}-s{seed}"
            try:
                first, replies = _made(rec, seed, lvl, turns, sandbox)
            except (EnvError, ContractError) as e:
                skipped.append(f"{name}: {e.reason}")
                continue
            meta = {"spadework_env_id": rec.env_id, "class_name": rec.class_name,
                    "setting": rec.setting, "skill": rec.skill, "level": lvl, "levels": declared,
                    "seed": seed, "max_turns": turns, "status": rec.status,
                    "iteration": rec.iteration,
                    "plays": stats.plays if stats else None,
                    "win_rate": stats.win_rate if stats else None}
            task = out / name
            if task.exists():
                shutil.rmtree(task)
            spec = {"class_name": rec.class_name, "seed": seed, "level": lvl, "max_turns": turns,
                    "env_id": rec.env_id}
            _write_code(task / "environment" / "app", rec.code, imports, spec)
            shutil.copy(FILES / "play.py", task / "environment" / "app" / "play.py")
            (task / "environment" / "Dockerfile").write_text(_dockerfile(imports))
            _write_code(task / "tests", rec.code, imports, spec)
            shutil.copy(FILES / "verify.py", task / "tests" / "verify.py")
            (task / "tests" / "test.sh").write_text(
                "#!/bin/bash\npython3 \"${SPADEWORK_TESTS:-/tests}/verify.py\"\n")
            (task / "solution").mkdir()
            (task / "solution" / "replies.json").write_text(json.dumps(replies, indent=1) + "\n")
            (task / "solution" / "solve.sh").write_text(
                "#!/bin/bash\n# Plays the environment's solution() for this seed and level.\n"
                "python3 - <<'PY'\nimport json, os, subprocess, sys\n"
                "here = os.environ.get('SPADEWORK_SOLUTION', '/solution')\n"
                "app = os.environ.get('SPADEWORK_APP', '/app')\n"
                "for reply in json.load(open(os.path.join(here, 'replies.json'))):\n"
                "    subprocess.run([sys.executable, os.path.join(app, 'play.py')], input=reply, "
                "text=True, check=True)\nPY\n")
            for script in (task / "tests" / "test.sh", task / "solution" / "solve.sh"):
                script.chmod(0o755)
            (task / "task.toml").write_text(_task_toml(meta), encoding="utf-8")
            (task / "instruction.md").write_text(_instruction(meta, first), encoding="utf-8")
            tasks.append(name)
    return HarborExport(out, tuple(tasks), tuple(skipped))


# ------------------------------------------------------------------------------------- import


def _module_of(task: Path) -> Path | None:
    """The environment's Python module in a task folder's ``environment/``."""
    ours = task / "environment" / "app" / "env.py"
    if ours.is_file():
        return ours
    for path in sorted((task / "environment").rglob("*.py")):
        if path.name in _OWN or any(p in _KITS for p in path.parts):
            continue
        try:
            check_static(path.read_text(encoding="utf-8"), allow_numpy=True,
                         allow_math_verify=True)
        except (ContractError, OSError, UnicodeDecodeError):
            continue
        return path
    return None


def import_harbor(archive: Any, folder: str | Path, *, sandbox: Any, config: Any,
                  progress: Any = None) -> list[GameOutcome]:
    """Import the environment of every Harbor task under ``folder`` (see the module docstring),
    checked in ``sandbox`` under ``config``; ``progress`` gets each outcome as it is decided.
    Raises ConfigError when ``folder`` holds no task."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"{folder} is not a folder; give a folder of Harbor tasks")
    tasks = sorted({p.parent for p in folder.rglob("task.toml")})
    if not tasks:
        raise ConfigError(f"no Harbor task (a folder with task.toml) under {folder}")
    index = NoveltyIndex(archive.env_codes(), k=config.shingle_size)
    outcomes = []
    for task in tasks:
        outcome = _import_one(archive, task, folder, sandbox, config, index)
        outcomes.append(outcome)
        if progress is not None:
            progress(outcome)
    return outcomes


def _import_one(archive: Any, task: Path, folder: Path, sandbox: Any, config: Any,
                index: Any) -> GameOutcome:
    name = str(task.relative_to(folder)) if task != folder else task.name
    try:
        meta = tomllib.loads((task / "task.toml").read_text(encoding="utf-8")).get("metadata", {})
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as e:
        return GameOutcome(name, "rejected", None, None, None, "import",
                           f"task.toml cannot be read: {e}")
    module = _module_of(task)
    if module is None:
        return GameOutcome(name, "rejected", None, None, None, "import",
                           "no Python module in environment/ defines an environment class with "
                           "reset() and step()")
    code = module.read_text(encoding="utf-8")
    skill = meta.get("skill") if isinstance(meta.get("skill"), str) else None
    existing = archive.get_env(env_id_of(code))
    if existing is not None:
        return GameOutcome(name, "present", existing.env_id, existing.class_name, existing.skill,
                           existing.failed_stage, existing.reason)
    setting = check_static(code, allow_numpy=True, allow_math_verify=True).setting
    report = check(code, sandbox=sandbox, config=config, existing=index, module=True)
    rec = EnvRecord.from_check(code, report, iteration=-1, setting=setting, skill=skill,
                               name=module.stem if module.name != "env.py" else task.name,
                               origin="imported")
    if rec.status == "accepted":
        index.add(code)
    with archive.transaction():
        archive.add_env(rec)
        archive.add_import(ImportRecord(
            rec.env_id, "harbor", name, hashlib.sha256(code.encode("utf-8")).hexdigest(),
            metadata={k: v for k, v in meta.items() if isinstance(v, (str, int, float, bool))}))
    return GameOutcome(name, rec.status, rec.env_id, report.class_name, skill,
                       report.failed_stage, report.reason if not report.ok else "")
