"""``spadework archive``: list, show, export and import the environments of a run's archive."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from pathlib import Path

import typer

from spadework.cli._app import _Format, _reported, _Status, app

archive_app = typer.Typer(help="The run archive: environments, plays, attempts.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(archive_app, name="archive")
_DB = typer.Option(None, "--db", help="The archive file (or give --run-dir).")
_RUN_DIR = typer.Option(None, "--run-dir", help="A run directory (its archive.sqlite).")


def _archive_call(db: str | None, run_dir: str | None, fn: Callable[..., None], *,
                  write: bool = False) -> None:
    """Open the named archive (read-only unless ``write``, which may create it), call
    ``fn(archive)``, and turn expected errors into one line and exit 1."""
    # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
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
    # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
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
    # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
    from spadework.archive.show import show_text

    _archive_call(db, run_dir, lambda a: typer.echo(show_text(a, env_id)))


@archive_app.command("export")
def archive_export(
    dest: str = typer.Argument(None, metavar="[OUT]", help="Where to write (or give --out)."),
    out: str = typer.Option(None, "--out", help="The file to write, or the folder for hf and "
                            "harbor (never the archive itself nor a file of its run; an existing "
                            "one only with --force)."),
    fmt: _Format = typer.Option("jsonl", "--format", help="jsonl or parquet: one file, a row per "
                                "environment; hf: a datasets folder (Parquet files of the "
                                "environments and of their plays per iteration, and a dataset "
                                "card), for datasets.load_dataset or a dataset hub; harbor: a "
                                "Harbor task folder per environment and seed (its code, a "
                                "play command, a verifier that replays the episode)."),
    force: bool = typer.Option(False, "--force", help="Replace OUT if it exists (for hf, only an "
                               "earlier hf export; for harbor, write into a folder not empty)."),
    seed: list[int] = typer.Option(  # noqa: B008 (typer reads it; not shared)
        None, "--seed", help="harbor: an instance to write a task for (repeat for more; "
        "default 0)."),
    level: int = typer.Option(None, "--level", min=1, help="harbor: the level played (default: "
                              "the level each environment plays next in the run)."),
    status: _Status = typer.Option("accepted", "--status", help="harbor: the environments of "
                                   "this status."),
    skill: str = typer.Option(None, "--skill", help="harbor: only environments of this skill."),
    env: list[str] = typer.Option(  # noqa: B008 (typer reads it; not shared)
        None, "--env", help="harbor: only this environment (an id or its first 4+ hex "
        "characters; repeat for more)."),
    db: str = _DB, run_dir: str = _RUN_DIR,
) -> None:
    """Write every environment with its statistics, one row each, as JSONL or Parquet, a
    datasets folder, or Harbor tasks (the archive is opened read-only)."""
    # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
    from spadework.archive import export_envs
    from spadework.archive.hf_export import export_hf

    if (dest is None) == (out is None):
        typer.echo("error: name where to write with exactly one of OUT or --out", err=True)
        raise typer.Exit(2)
    target = dest if dest is not None else out

    def export(a) -> None:
        if fmt.value == "harbor":
            return _export_harbor(a, target, force=force, seeds=tuple(seed or (0,)),
                                  level=level, status=status.value, skill=skill,
                                  env_ids=tuple(env or ()))
        if fmt.value == "hf":
            s = export_hf(a, target, force=force)
        else:
            s = export_envs(a, target, fmt.value, force=force)
        typer.echo(f"{s.written} environments written to {s.path.resolve()}")
        if s.skipped:
            typer.echo(f"note: {s.skipped} row(s) could not be read and were skipped", err=True)

    _archive_call(db, run_dir, export)


def _export_harbor(a, target: str, **kwargs) -> None:
    # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
    from spadework.archive.harbor import export_harbor
    from spadework.sandbox import Limits, Sandbox

    with Sandbox(Limits(math_verify=True)) as sb:
        s = export_harbor(a, target, sandbox=sb, **kwargs)
    for line in s.skipped:
        typer.echo(f"skipped {line}", err=True)
    typer.echo(f"{len(s.tasks)} Harbor task(s) written to {s.path.resolve()}"
               + (f"; {len(s.skipped)} skipped" if s.skipped else ""))


@archive_app.command("import-starter")
def archive_import_starter(
    db: str = _DB, run_dir: str = _RUN_DIR,
    max_turns: int = typer.Option(None, "--max-turns", min=1, help="The turn limit they will be "
                                  "played with, and so are checked with (default: the cpu "
                                  "preset's [play] max_turns)."),
) -> None:
    """Check the starter library in the sandbox and add it as seed environments (creates the
    archive; idempotent)."""
    # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
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


_ImportFormat = Enum("_ImportFormat", {"spade": "spade", "harbor": "harbor"}, type=str)


@archive_app.command("import")
def archive_import(
    folder: Path = typer.Argument(..., help="The reference's games folder (game_*.py, searched "
                                  "recursively, and its env_memory.json), or a folder of Harbor "
                                  "tasks."),
    fmt: _ImportFormat = typer.Option(..., "--format", help="spade: the SPADE reference "
                                      "implementation's game_*.py modules and env_memory.json; "
                                      "harbor: Harbor task folders (task.toml) whose "
                                      "environment/ holds the environment as a Python module."),
    memory: Path = typer.Option(None, "--memory", help="Its env_memory.json when it is not in "
                                "FOLDER."),
    max_turns: int = typer.Option(None, "--max-turns", min=1, help="The turn limit they will be "
                                  "played with, and so are checked with (default: the cpu "
                                  "preset's [play] max_turns)."),
    db: str = _DB, run_dir: str = _RUN_DIR,
) -> None:
    """Import a pool of generated environments: each one adapted to spadework's contract and checked
    in the sandbox, archived accepted or rejected with its reason (creates the archive; never
    changes what it already holds). Prints one line per game and a summary."""
    import importlib.util

    # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
    from spadework.archive.spade_import import format_outcome, import_spade
    from spadework.config import preset
    from spadework.env.checker import CheckConfig
    from spadework.sandbox import Limits, Sandbox

    if not folder.is_dir():  # before the archive is opened (and perhaps created)
        typer.echo(f"error: {folder} is not a folder; give the folder to import", err=True)
        raise typer.Exit(1)

    def run(a) -> None:
        turns = max_turns or preset("cpu").play.max_turns
        mv = importlib.util.find_spec("math_verify") is not None
        config = CheckConfig(max_turns=turns, allow_numpy=True, allow_math_verify=mv)
        typer.echo(f"importing {fmt.value} games from {folder} into {a.path}, checked at "
                   f"max_turns={turns}" + ("" if mv else " (math_verify is not installed: games "
                                           "that import it are rejected)"))
        with Sandbox(Limits(math_verify=mv)) as sb:
            if fmt.value == "harbor":
                # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
                from spadework.archive.harbor import import_harbor

                done = import_harbor(a, folder, sandbox=sb, config=config,
                                     progress=lambda o: typer.echo(format_outcome(o)))
                typer.echo(f"accepted {sum(o.status == 'accepted' for o in done)}, rejected "
                           f"{sum(o.status == 'rejected' for o in done)}, already in the archive "
                           f"{sum(o.status == 'present' for o in done)}")
                return
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
