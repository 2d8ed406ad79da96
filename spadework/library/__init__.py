"""The starter library: hand-written environments that seed the archive and the designer's memory.

Every ``*.py`` file in this folder (other than this one and files starting with ``_``) is one
environment module, written exactly like generated code: standard library only, never importing
spadework, one class following :data:`spadework.env.contract.CONTRACT`, and three module-level
string constants::

    ENV_CLASS = "NimEnv"                 # the environment class (see find_env_class)
    SETTING = "games"                    # "games" or "tool-use"
    SKILL = "mathematical reasoning"     # games: one of GAME_SKILLS

The files are package data. They are read as text through :mod:`importlib.resources` and their
metadata is read from the syntax tree: nothing here imports or executes them, because on the host
environment code is only ever run inside the sandbox, starter or generated alike.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from importlib import resources
from typing import Any

from spadework.archive.records import EnvRecord
from spadework.env import pyparse
from spadework.env.checker import check
from spadework.env.contract import SETTINGS, find_env_class
from spadework.errors import ConfigError, ContractError
from spadework.settings.curriculum import HELD_OUT
from spadework.types import EnvSource


def is_held_out(name: str | None, held_out: Iterable[str] = HELD_OUT) -> bool:
    """Whether the starter environment ``name`` (a file stem) is held out of run pools.

    Generated environments have no starter name and are never held out.

    >>> is_held_out("mastermind"), is_held_out("nim"), is_held_out(None)
    (True, False, False)
    >>> is_held_out("nim", held_out=("nim",))
    True
    """
    return name is not None and name in tuple(held_out)


#: The six cognitive skills a game environment targets (the paper's skill list, lower case).
GAME_SKILLS = (
    "mathematical reasoning",
    "logical deduction",
    "spatial reasoning",
    "pattern recognition",
    "optimization",
    "causal inference",
)

_REQUIRED = ("SETTING", "SKILL")


def _string_constants(tree: ast.Module) -> dict[str, str]:
    """Module-level ``NAME = "literal"`` assignments (the last one wins, as at run time)."""
    found: dict[str, str] = {}
    for stmt in tree.body:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str)
        ):
            found[stmt.targets[0].id] = stmt.value.value
    return found


def parse_source(code: str, name: str) -> EnvSource:
    """Describe one environment module from its source, without running it.

    Raises :class:`ContractError` (naming the file) when the module does not parse, has no
    environment class, or lacks a string ``SETTING`` / ``SKILL``, or names an unknown one.
    """
    where = f"starter environment {name!r}"
    try:
        tree = pyparse.parse(code)
    except SyntaxError as e:
        raise ContractError(f"{where}: syntax error at line {e.lineno}: {e.msg}") from e
    try:
        class_name = find_env_class(tree)
    except ContractError as e:
        raise ContractError(f"{where}: {e.reason}") from e
    consts = _string_constants(tree)
    missing = [k for k in _REQUIRED if not consts.get(k)]
    if missing:
        raise ContractError(
            f"{where} lacks {' and '.join(missing)}: add module-level string constants, e.g. "
            'SETTING = "games" and SKILL = "logical deduction"'
        )
    setting, skill = consts["SETTING"], consts["SKILL"]
    levels = declared_levels(tree, class_name)
    if setting not in SETTINGS:
        raise ContractError(f"{where}: SETTING is {setting!r}; use one of {', '.join(SETTINGS)}")
    if setting == "games" and skill not in GAME_SKILLS:
        raise ContractError(f"{where}: SKILL is {skill!r}; games use one of {', '.join(GAME_SKILLS)}")
    return EnvSource(code=code, class_name=class_name, setting=setting, skill=skill, name=name,
                     levels=levels)


def declared_levels(tree: ast.Module, class_name: str) -> int:
    """The ``LEVELS = <int>`` the environment class (or a class of the module it derives from)
    sets in its body, else 1. Read from the syntax tree, for starters, which are ours; the
    checker asks the sandboxed class itself (a designed class may compute it).

    >>> declared_levels(ast.parse("class B:\\n LEVELS = 4\\nclass A(B):\\n pass"), "A")
    4
    """
    classes = {s.name: s for s in tree.body if isinstance(s, ast.ClassDef)}
    seen: set[str] = set()
    name: str | None = class_name
    while name in classes and name not in seen:
        seen.add(name)
        for stmt in classes[name].body:
            if (isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "LEVELS"
                                                     for t in stmt.targets)
                    and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, int)):
                return stmt.value.value
        bases = [b.id for b in classes[name].bases if isinstance(b, ast.Name)]
        name = bases[0] if bases else None
    return 1


def _env_files() -> list[tuple[str, str]]:
    """(name, source) of every environment file shipped in this package, sorted by name."""
    files = []
    for entry in resources.files(__name__).iterdir():
        fname = entry.name
        if entry.is_file() and fname.endswith(".py") and not fname.startswith("_"):
            files.append((fname[: -len(".py")], entry.read_text(encoding="utf-8")))
    return sorted(files)


def starter_envs(setting: str | None = None) -> list[EnvSource]:
    """All starter environments, or those of one setting ("games" or "tool-use"), sorted by name.

    Each comes back as an :class:`EnvSource` whose ``name`` is the file's stem. Raises
    :class:`ConfigError` for an unknown setting and :class:`ContractError` for a malformed file.
    """
    if setting is not None and setting not in SETTINGS:
        raise ConfigError(f"unknown setting {setting!r}; use one of {', '.join(SETTINGS)} or None")
    envs = [parse_source(code, name) for name, code in _env_files()]
    return [e for e in envs if setting is None or e.setting == setting]


def starter_env(name: str) -> EnvSource:
    """One starter environment by name (the file's stem, e.g. ``"nim"``).

    Raises :class:`ConfigError` listing the known names when there is none of that name.
    """
    files = dict(_env_files())
    if name not in files:
        known = ", ".join(sorted(files)) or "(none)"
        raise ConfigError(f"no starter environment named {name!r}; known: {known}")
    return parse_source(files[name], name)


def checked_starters(sandbox: Any, config: Any, setting: str | None = None) -> list[EnvRecord]:
    """Every starter environment (of ``setting``) as an archive record, checked in ``sandbox``
    under ``config`` (a :class:`spadework.env.checker.CheckConfig`): accepted when it passes,
    rejected with its failing stage when not. Runs check them under the turn limit they play
    with: the starters scale their instances and levels with ``max_turns``, but some cannot be
    won in very few turns (mastermind needs 3 guesses even at level 1), and those must not be
    played there. About 9 s for the whole library at 4 turns, every level of every game."""
    return check_sources(starter_envs(setting), sandbox, config)


def check_sources(sources: Iterable[EnvSource], sandbox: Any, config: Any) -> list[EnvRecord]:
    """Environment modules written like the starters' files (:func:`parse_source`), each as a
    starter record checked in ``sandbox`` under ``config``, as :func:`checked_starters` does."""
    return [
        EnvRecord.from_check(s.code, check(s.code, sandbox=sandbox, config=config, module=True),
                             iteration=-1, setting=s.setting, skill=s.skill, name=s.name,
                             origin="starter")
        for s in sources
    ]
