"""The root command, its shared choices and its one error rule; every command module adds to
:data:`app`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import Enum

import typer

import spadework
from spadework.config import PRESETS
from spadework.errors import ConfigError, SpadeworkError
from spadework.policy import backends
from spadework.settings.run import BACKENDS, DEFAULT_BACKEND

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
_Format = Enum("_Format", {"jsonl": "jsonl", "parquet": "parquet", "hf": "hf", "harbor": "harbor"},
               type=str)
_Preset = Enum("_Preset", {p: p for p in PRESETS}, type=str)


def _backend_option(default: str | None = DEFAULT_BACKEND, extra: str = "") -> object:
    """The ``--backend`` option of every command that loads a model: a name in the backend
    table (:mod:`spadework.policy.backends`), checked when the model loads."""
    shown = "the preset's" if default is None else default
    choices = "; ".join(f"{name}: {backends.backend(name).about}" for name in BACKENDS)
    return typer.Option(default, "--backend", help=f"The sampler ({choices}; default: "
                        f"{shown}).{extra}")


@contextmanager
def _reported(*kinds: type[SpadeworkError]) -> Iterator[None]:
    """An expected error of ``kinds`` becomes one line on stderr and exit status 1."""
    try:
        yield
    except kinds as e:
        typer.echo(f"error: {e.reason}", err=True)
        raise typer.Exit(1) from e


def _factory(spec: str | None) -> Callable[..., object] | None:
    """The hidden ``--policy MODULE:FACTORY`` option (tests only): the named callable, which
    returns a Policy; a :class:`~spadework.errors.ConfigError` when it cannot be imported."""
    if not spec:
        return None
    import importlib

    mod, _, fn = spec.partition(":")
    try:
        return getattr(importlib.import_module(mod), fn)
    except (ImportError, AttributeError, ValueError) as e:
        raise ConfigError(f"--policy {spec}: {e}") from e


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
