"""Every suite by name, the ones we cannot run offline with why, and ``--data`` loaders.

Default suites: ``rg-hard`` (with its ``disjoint`` report), ``rg-hard-disjoint``, ``rg-default``,
``math``, ``library-heldout``. Opt-in: ``bfcl-ast``, ``humaneval`` and the ``--data PATH`` suites
``aime`` and ``gpqa`` for local files.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType
from typing import Any

from spadework.evaluate.bfcl import BfclSuite
from spadework.evaluate.heldout import LibrarySuite
from spadework.evaluate.humaneval import HumanEvalSuite
from spadework.evaluate.judge import EvalError
from spadework.evaluate.local import local_suite
from spadework.evaluate.mathsuite import MathSuite
from spadework.evaluate.rg import rg_suites
from spadework.settings.eval import DATA_SUITES

#: Suites of the reference that no offline machine can run, and why.
UNSUPPORTED = MappingProxyType({
    "tau2": "tau2-bench scores the agent against a user simulated by a hosted GPT model: no "
            "offline stand-in reproduces its numbers",
    "acebench": "ACEBench's agent tasks need a hosted GPT user simulator: not offline",
    "gpqa-diamond": "not in any package (gated on the hub): use --suite gpqa --data PATH",
    "livecodebench-v6": "not in any package, and its private tests ship pickled (unpickling a "
                        "downloaded file runs its code): no safe local loader yet",
    "aime-2025-ii": "not in any package (MMATH has AIME 2025 part I only): use --suite aime "
                    "--data PATH",
})


def _factories() -> dict[str, Callable[[Path | None], Any]]:
    table: dict[str, Callable[[Path | None], Any]] = {
        name: (lambda _p, s=suite: s) for name, suite in rg_suites().items()}
    table["math"] = lambda _p: MathSuite()
    table["library-heldout"] = lambda _p: LibrarySuite()
    table["bfcl-ast"] = lambda _p: BfclSuite()
    table["humaneval"] = lambda _p: HumanEvalSuite()
    for name in DATA_SUITES:
        table[name] = lambda p, n=name: local_suite(n, p)
    return table


def suite_names() -> list[str]:
    """Every runnable suite name."""
    return list(_factories())


def make_suite(name: str, data: Path | None = None) -> Any:
    """The suite called ``name`` (``data``: the local file of a ``--data`` suite)."""
    if name in UNSUPPORTED:
        raise EvalError(f"suite {name!r} is not supported offline: {UNSUPPORTED[name]}")
    table = _factories()
    if name not in table:
        raise EvalError(f"unknown suite {name!r}; choose one of {', '.join(table)}")
    if name in DATA_SUITES and data is None:
        raise EvalError(f"suite {name!r} reads a local file: pass --data PATH (JSONL, parquet or "
                        "a datasets folder)")
    if name not in DATA_SUITES and data is not None:
        raise EvalError(f"--data is only for the suites {', '.join(DATA_SUITES)}, not {name!r}")
    return table[name](data)
