"""Import a pool written by the SPADE reference implementation: ``game_*.py`` and ``env_memory.json``.

Every game goes through spadework's checker (in the caller's sandbox) after it is adapted to the
contract (:mod:`spadework.env.reference`); accepted or not, it is archived as an ``imported``
environment with its report, as designs are, so a rejection is data with its stage and reason.
Nothing already stored is changed: an environment whose adapted code is already in the archive
(same sha256) is reported and left as it is, and every write is an insert that skips existing
keys, one transaction per game.

Where the reference's fields go (``env_memory.json`` is a JSON list of its memory records):

============================  ==========================================================
reference                     archive
============================  ==========================================================
game file's text              ``envs.code`` after adaptation; ``imports.source_sha256``
                              is the sha256 of the text as found
file name (stem)              ``envs.name``; ``imports.source_file``
``game_file``                 matched to a file in the folder by its name (the path is
                              the reference machine's)
``skill``                     ``envs.skill``, lower case as spadework's skills are (else
                              the skill slug of the file name)
``rollout_id``                ``imports.rollout_id`` (else the file name's rollout)
``actor_win_rate``            ``imports.win_rate``
``regret``                    ``imports.regret`` (the reference's offset-0, unfloored value)
``metadata``                  ``imports.metadata`` (JSON)
``code_snippet``              not stored (the file's whole code is); used as the code
                              only when the file is missing and the snippet is whole
                              (shorter than the reference's 2,000-character cut)
============================  ==========================================================

``envs.iteration`` is -1 (not an iteration of this run), ``envs.origin`` is ``imported`` and
``envs.setting`` ``games``. The reference agent's win rate and regret stay in ``imports``:
``env_plays`` holds plays of this archive's runs only.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spadework.archive.records import EnvRecord, ImportRecord
from spadework.env.checker import check
from spadework.env.novelty import NoveltyIndex
from spadework.env.reference import adapt
from spadework.errors import ArchiveError, ConfigError, ContractError
from spadework.types import CheckReport, CheckResult, env_id_of

#: How the reference names its game files: rollout, index within the rollout, skill slug.
GAME_FILE = re.compile(r"^game_(\d+)_(\d+)_(.+)\.py$")
MEMORY_FILE = "env_memory.json"
#: The reference keeps the first 2,000 characters of a game as its memory snippet.
SNIPPET_CHARS = 2000
_REQUIRED = ("game_file", "skill", "code_snippet", "actor_win_rate")


@dataclass(frozen=True)
class MemoryRecord:
    """One record of the reference's ``env_memory.json``."""

    file_name: str
    skill: str
    code_snippet: str
    win_rate: float
    regret: float | None
    rollout_id: int | None
    metadata: dict


@dataclass(frozen=True)
class GameOutcome:
    """What became of one game: ``accepted``, ``rejected`` (``stage`` and ``reason`` say
    where and why), or ``present`` (its code was already archived, left as it was)."""

    source: str
    status: str
    env_id: str | None
    class_name: str | None
    skill: str | None
    stage: str | None = None
    reason: str = ""
    adaptations: tuple[str, ...] = ()


@dataclass(frozen=True)
class ImportSummary:
    """Every game's outcome, and what the memory file held that matched no game."""

    outcomes: tuple[GameOutcome, ...]
    memory_records: int
    unmatched: tuple[str, ...]  # one line per memory record that could not be imported

    def count(self, status: str) -> int:
        return sum(o.status == status for o in self.outcomes)


def read_memory(path: Path) -> list[MemoryRecord]:
    """The records of an ``env_memory.json``; ArchiveError naming the first malformed one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ArchiveError(f"cannot read {path} as the reference's env_memory.json: {e}") from e
    if not isinstance(data, list):
        raise ArchiveError(f"{path} holds a JSON {type(data).__name__}, not the reference's list "
                           "of memory records")
    records = []
    for i, r in enumerate(data):
        missing = [k for k in _REQUIRED if not isinstance(r, dict) or k not in r]
        if missing:
            raise ArchiveError(f"{path}: record {i} lacks {', '.join(missing)}")
        win, regret = r["actor_win_rate"], r.get("regret")
        if not _finite(win) or (regret is not None and not _finite(regret)):
            raise ArchiveError(f"{path}: record {i} has a win rate or regret that is not a finite "
                               "number")
        rollout = r.get("rollout_id")
        records.append(MemoryRecord(
            Path(str(r["game_file"])).name, str(r["skill"]), str(r["code_snippet"]), float(win),
            None if regret is None else float(regret),
            rollout if isinstance(rollout, int) and not isinstance(rollout, bool) else None,
            r.get("metadata") if isinstance(r.get("metadata"), dict) else {}))
    return records


def _finite(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _skill_of(name: str, memory: MemoryRecord | None) -> str | None:
    if memory is not None:
        return memory.skill.strip().lower() or None
    m = GAME_FILE.match(name)
    return m.group(3).replace("_", " ") if m else None


def _rollout_of(name: str, memory: MemoryRecord | None) -> int | None:
    if memory is not None and memory.rollout_id is not None:
        return memory.rollout_id
    m = GAME_FILE.match(name)
    return int(m.group(1)) if m else None


def _explain(report: CheckReport) -> str:
    """The failing stage's reason, with what differs from the reference where that is why."""
    reason = report.reason
    if "reward is" in reason and "[-1, 1]" in reason:
        reason += " (the reference accepts rewards in [-10, 10]; spadework's contract is [-1, 1])"
    if "import of 'math_verify' is not allowed" in reason:
        reason = ("it imports math_verify, which is not installed here (pip install "
                  "'spadework[eval]'); " + reason)
    return reason


def _rejected(code: str, name: str, skill: str | None, stage: str, reason: str) -> EnvRecord:
    report = CheckReport(None, None, (CheckResult(stage, False, reason, 0.0),))
    return EnvRecord.from_check(code, report, iteration=-1, setting="games", skill=skill,
                                name=name, origin="imported")


def _store(archive: Any, rec: EnvRecord, source: str, text: str, adaptations: tuple[str, ...],
           memory: MemoryRecord | None) -> bool:
    """Insert the environment and its provenance; False when the environment was there."""
    with archive.transaction():
        new = archive.add_env(rec)
        archive.add_import(ImportRecord(
            rec.env_id, "spade", source, hashlib.sha256(text.encode("utf-8")).hexdigest(),
            tuple(adaptations), _rollout_of(source, memory),
            None if memory is None else memory.win_rate, None if memory is None else memory.regret,
            None if memory is None else memory.metadata))
    return new


def _one(archive: Any, source: str, text: str, memory: MemoryRecord | None, check_fn,
         index: Any) -> GameOutcome:
    stem = source[:-3] if source.endswith(".py") else source
    skill = _skill_of(source, memory)
    try:
        adapted = adapt(text)
    except ContractError as e:
        rec = _rejected(text, stem, skill, "import", e.reason)
        new = _store(archive, rec, source, text, (), memory)
        return GameOutcome(source, "rejected" if new else "present", rec.env_id, None, skill,
                           "import", e.reason)
    existing = archive.get_env(env_id_of(adapted.code))
    if existing is not None:
        _store(archive, existing, source, text, adapted.adaptations, memory)
        return GameOutcome(source, "present", existing.env_id, existing.class_name, existing.skill,
                           existing.failed_stage, existing.reason, adapted.adaptations)
    report = check_fn(adapted.code, index)
    rec = EnvRecord.from_check(adapted.code, report, iteration=-1, setting="games", skill=skill,
                               name=stem, origin="imported")
    if rec.status == "accepted":
        index.add(adapted.code)
    _store(archive, rec, source, text, adapted.adaptations, memory)
    return GameOutcome(source, rec.status, rec.env_id, report.class_name, skill,
                       report.failed_stage, _explain(report) if not report.ok else "",
                       adapted.adaptations)


def import_spade(archive: Any, folder: str | Path, *, sandbox: Any, config: Any,
                 memory: str | Path | None = None,
                 progress: Callable[[GameOutcome], None] | None = None) -> ImportSummary:
    """Import every ``game_*.py`` under ``folder`` (recursively; the same text twice counts
    once) and the records of its ``env_memory.json`` (or ``memory``) into ``archive``, checking
    each game in ``sandbox`` under ``config`` (a CheckConfig); ``progress`` gets each game's
    outcome as it is decided. Raises ConfigError when ``folder`` holds nothing to import."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"{folder} is not a folder; give the reference's games folder")
    memory_path = Path(memory) if memory is not None else folder / MEMORY_FILE
    if memory is not None and not memory_path.is_file():
        raise ConfigError(f"--memory {memory_path}: no such file")
    records = read_memory(memory_path) if memory_path.is_file() else []
    by_name = {r.file_name: r for r in records}  # a file recorded twice: its latest record
    files: dict[str, tuple[str, str]] = {}  # sha256 -> (file name, text)
    unreadable: list[GameOutcome] = []
    for path in sorted(folder.rglob("game_*.py")):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            unreadable.append(GameOutcome(path.name, "rejected", None, None, None, "import",
                                          f"cannot read the file: {e}"))
            continue
        files.setdefault(hashlib.sha256(text.encode()).hexdigest(), (path.name, text))
    names = {name for name, _ in files.values()}
    unmatched = []
    for r in by_name.values():
        if r.file_name in names:
            continue
        if len(r.code_snippet) < SNIPPET_CHARS:
            files.setdefault(hashlib.sha256(r.code_snippet.encode()).hexdigest(),
                             (r.file_name, r.code_snippet))
        else:
            unmatched.append(f"{r.file_name}: not in {folder}, and its code_snippet is cut at "
                             f"{SNIPPET_CHARS} characters, so there is no whole game to import")
    if not files and not unreadable:
        raise ConfigError(f"no game_*.py files in {folder}"
                          + (f" and no whole game in {memory_path.name}" if records else ""))
    index = NoveltyIndex(archive.env_codes(), k=config.shingle_size)

    def check_fn(code: str, idx: Any) -> CheckReport:
        return check(code, sandbox=sandbox, config=config, existing=idx, module=True)

    outcomes = list(unreadable)
    for _, (name, text) in sorted(files.items(), key=lambda kv: kv[1][0]):
        outcome = _one(archive, name, text, by_name.get(name), check_fn, index)
        outcomes.append(outcome)
        if progress is not None:
            progress(outcome)
    return ImportSummary(tuple(outcomes), len(records), tuple(unmatched))


def format_outcome(o: GameOutcome) -> str:
    """One line per game for the command's report.

    >>> print(format_outcome(GameOutcome("game_1.py", "rejected", "ab" * 32, "XEnv", None,
    ...                                  "solvable", "solution() lost on seed 3")))
    ✗ game_1.py  rejected at solvable: solution() lost on seed 3
    """
    if o.status == "accepted":
        return f"✓ {o.source}  accepted as {o.env_id[:12]} ({o.class_name}, {o.skill or 'no skill'})"
    if o.status == "present":
        return f"= {o.source}  already in the archive as {(o.env_id or '')[:12]}; left as it was"
    return f"✗ {o.source}  rejected at {o.stage}: {o.reason}"
