"""Benchmark hygiene: does a generated environment name a benchmark task? (pure functions)

A run must not train on its own test: an environment whose class name or docstring names one
of the evaluated reasoning-gym tasks (or a benchmark) is flagged in the archive, so that a result
on that task can be read with the overlap in mind (the environment is kept: resembling a task
family is not copying its items, and the benchmark's items and seeds never enter training).

Matching is on words, case-insensitive: ``NumberSequenceEnv`` is the words "number sequence";
a task name matches when its words appear consecutively among the class name's words (a trailing
"env", "environment" or "game" dropped), or when the docstring contains the task name as written
(``number_sequence``) or, for names of two or more words, the phrase ("number sequence"). A
single-word task name matches a docstring only when it is distinctive: the names that are
ordinary English words in other senses (``products``, ``dice``...) match class names only.

It lives beside the checker, not in ``evaluate/``: the designer flags each design as it archives
it, and training must not import the evaluation package.
"""

from __future__ import annotations

import ast
import re

from spadework.env import pyparse
from spadework.env.contract import find_env_class
from spadework.errors import ContractError
from spadework.rg_tasks import hard_tasks

#: Whole benchmarks whose names a generated environment should not carry either.
BENCHMARK_NAMES = ("aime", "gpqa", "humaneval", "livecodebench", "bfcl", "math500", "tau2",
                   "acebench", "reasoning_gym")
#: Single-word task names too common in prose to flag a docstring on.
PROSE_WORDS = frozenset({"products", "dice", "ab", "bf", "acre", "aiw", "jugs", "codeio"})
_SUFFIXES = ("env", "environment", "game")


def name_words(name: str) -> tuple[str, ...]:
    """Lower-case words of an identifier (CamelCase, snake_case, digits split off).

    >>> name_words("NumberSequenceEnv"), name_words("number_sequence"), name_words("ARC1DEnv")
    (('number', 'sequence', 'env'), ('number', 'sequence'), ('arc', '1', 'd', 'env'))
    """
    parts = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", name)
    return tuple(p.lower() for p in parts)


def _contains(seq: tuple[str, ...], sub: tuple[str, ...]) -> bool:
    return any(seq[i:i + len(sub)] == sub for i in range(len(seq) - len(sub) + 1))


def _task_names() -> tuple[str, ...]:
    return tuple(t.name for t in hard_tasks()) + BENCHMARK_NAMES


def benchmark_matches(class_name: str | None, docstring: str | None = None) -> tuple[str, ...]:
    """The benchmark task names an environment's class name or docstring matches, sorted.

    >>> benchmark_matches("NumberSequenceEnv")
    ('number_sequence',)
    >>> benchmark_matches("MiniSudokuEnv")
    ('mini_sudoku', 'sudoku')
    >>> benchmark_matches("LanternEnv", "Find the shortest path through the rooms.")
    ('shortest_path',)
    >>> benchmark_matches("ShopEnv", "Track the products in stock.")
    ()
    >>> benchmark_matches("NimEnv", "A take-away game.")
    ()
    """
    words = name_words(class_name or "")
    while words and words[-1] in _SUFFIXES:
        words = words[:-1]
    doc = (docstring or "").lower()
    doc_words = tuple(re.findall(r"[a-z0-9]+", doc))
    found = set()
    for task in _task_names():
        tw = name_words(task)
        if words and _contains(words, tw):
            found.add(task)
        elif len(tw) == 1:
            if task not in PROSE_WORDS and tw[0] in doc_words:
                found.add(task)
        elif _contains(doc_words, tw) or re.search(
                rf"(?<![a-z0-9_]){re.escape(task)}(?![a-z0-9_])", doc):
            found.add(task)
    return tuple(sorted(found))


def env_benchmark_matches(code: str) -> tuple[str, ...]:
    """:func:`benchmark_matches` of an environment module's class name and its docstrings (the
    module's and the class's). Code that does not parse or has no environment class gives ()."""
    try:
        tree = pyparse.parse(code)
        class_name = find_env_class(tree)
    except (SyntaxError, ContractError, ValueError):
        return ()
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name), None)
    docs = [ast.get_docstring(tree) or "", ast.get_docstring(cls) if cls is not None else ""]
    return benchmark_matches(class_name, "\n".join(d or "" for d in docs))
