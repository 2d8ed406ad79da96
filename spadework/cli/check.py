"""Commands for the safety of generated code: ``spadework check`` (one environment, stage by
stage) and ``spadework doctor`` (the sandbox's isolation layers)."""

from __future__ import annotations

from pathlib import Path

import typer

from spadework.cli._app import app
from spadework.errors import SpadeworkError


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

    # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
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


@app.command()
def doctor() -> None:
    """Print each sandbox isolation layer, active or not, and why; exit 1 if a required one is off."""
    # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
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
