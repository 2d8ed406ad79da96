"""The `spadework` command. Each command is a thin call into one library function.

Only this module and ``config.py`` read argv or the process environment. Heavy modules are
imported inside the commands, so ``spadework --help`` stays fast.
"""

from __future__ import annotations

import typer

import spadework

app = typer.Typer(
    name="spadework",
    help="SPADE self-play: design executable environments, play them, learn from both.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


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


def main() -> None:
    app()


if __name__ == "__main__":
    main()
