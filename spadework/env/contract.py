"""The environment contract, written once.

Everything that generated environment code must satisfy lives here as data: the designer prompt
is rendered from :data:`CONTRACT`, the checker enforces it, and the sandbox child calls exactly
the methods named here. The class is found by contract, never by the first name ending in "Env"
(the reference's rule, which picks helper classes defined earlier in the module).

Discovery, in order:

1. an explicit module-level ``ENV_CLASS = "Name"`` naming a class defined in the module;
2. else the one class that defines both ``reset`` and ``step`` (directly, or inherits them from
   the tool-use base class ``ToolEnv`` or the games base class ``GameEnv``);
3. else, if several qualify, the last one defined.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from spadework.env import pyparse
from spadework.errors import ContractError

#: Import name of the tool-use base class module inside the sandbox (``from toolenv import ToolEnv``).
TOOLENV_MODULE = "toolenv"
TOOLENV_CLASS = "ToolEnv"
#: Import name of the games base class module inside the sandbox (``from gameenv import GameEnv``).
GAMEENV_MODULE = "gameenv"
GAMEENV_CLASS = "GameEnv"
#: The base classes the sandbox provides, which supply ``reset`` and ``step``.
KIT_CLASSES = frozenset({TOOLENV_CLASS, GAMEENV_CLASS})
#: What a ``GameEnv`` subclass writes (the base class does the rest; see :mod:`spadework.env.gameenv`).
GAMEENV_HOOKS = (("setup", "setup(self, rng)"), ("task", "task(self)"), ("example", "example(self)"),
                 ("judge", "judge(self, move)"), ("solution", "solution(self)"))
#: The hooks ``GameEnv`` supplies itself for a game with one answer, stored as ``self.answer``.
GAMEENV_ANSWER_HOOKS = frozenset({"example", "judge", "solution"})

#: The most difficulty levels an environment may declare (``LEVELS``): the checker checks every
#: level, so each costs a check; a curriculum moves one level at a time.
MAX_LEVELS = 10

#: Settings an environment can belong to.
SETTINGS = ("games", "tool-use")


@dataclass(frozen=True)
class Method:
    """One method of the contract: its signature as written and what it must do."""

    name: str
    signature: str
    returns: str
    rule: str
    required: bool = True


CONTRACT: tuple[Method, ...] = (
    Method(
        "__init__",
        "def __init__(self, max_turns: int = 10, level: int = 1, **kwargs)",
        "None",
        "Store max_turns and level and accept unknown keyword arguments. Do no I/O. level runs "
        "from 1 (easiest) to the class attribute LEVELS (default 1; at most 10): it changes the "
        "instance (a narrower range, fewer digits, a smaller board), never the rules or the "
        "action format.",
    ),
    Method(
        "reset",
        "def reset(self, seed: int | None = None)",
        "tuple[str, dict]",
        "Start a new episode and return (observation, info). The same seed must give the same "
        "instance: draw every random choice from random.Random(seed), never the global random. "
        "The observation states the task, the valid actions and a concrete example of a "
        "well-formed reply (never a placeholder); it must not reveal the answer.",
    ),
    Method(
        "step",
        "def step(self, action: str)",
        "tuple[str, float, bool, bool, dict]",
        "Apply one agent reply and return (observation, reward, terminated, truncated, info). "
        "reward is a finite float in [-1, 1]; terminated is True only when the episode is won or "
        "lost for good; truncated is True when max_turns replies have been used. A malformed "
        "reply gets a format reminder with a concrete example move, not a crash. Every "
        "observation can be read alone: it restates the last move and what was wrong with it, "
        "the current state, the moves left and the action format.",
    ),
    Method(
        "solution",
        "def solution(self)",
        "str | list[str]",
        "Return an action, or a list of actions, that wins from the current reset() state when "
        "replayed in order. It is computed from the state, never hard-coded, and plays as an "
        "agent could: each move depends only on what the observations so far showed (bisecting "
        "with higher/lower feedback is fine; reading a hidden answer is not).",
    ),
    Method(
        "hint",
        "def hint(self)",
        "str",
        "Optional. A privileged hint that helps without giving the answer away.",
        required=False,
    ),
)

#: Rules that are not about one method.
RULES: tuple[str, ...] = (
    "Exactly one environment class per module; if there are helpers, set ENV_CLASS = \"Name\".",
    "Everything the agent sees is a string; every code path of step() returns the 5-tuple.",
    "Only the standard library modules the checker allows may be imported; no files, no network, "
    "no subprocesses, no input().",
    "Games: the agent answers with \\boxed{...}; list the valid actions in the observation and "
    "show a concrete example move such as \\boxed{7}, never a placeholder such as \\boxed{N}. "
    "Subclassing GameEnv (from gameenv import GameEnv) does the turns, parsing and readable "
    "feedback for you.",
    "Tool use: subclass ToolEnv (from toolenv import ToolEnv), declare tools as JSON schema; the "
    "agent calls them with <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call> and "
    "finishes with <answer>...</answer>.",
    "Random, empty and repeated actions must not win.",
)


def render_contract() -> str:
    """The contract as plain text for the designer prompt.

    >>> text = render_contract()
    >>> "def step(self, action: str)" in text and "ENV_CLASS" in text
    True
    """
    lines = ["class YourEnv:"]
    for m in CONTRACT:
        optional = "" if m.required else "  # optional"
        lines.append(f"    {m.signature} -> {m.returns}:{optional}")
        lines.append(f"        # {m.rule}")
    lines.append("")
    lines.append("Rules:")
    lines.extend(f"- {r}" for r in RULES)
    return "\n".join(lines)


def _defined_methods(node: ast.ClassDef) -> set[str]:
    return {
        item.name
        for item in node.body
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def _base_names(node: ast.ClassDef) -> set[str]:
    names = set()
    for base in node.bases:
        if isinstance(base, ast.Name):
            names.add(base.id)
        elif isinstance(base, ast.Attribute):
            names.add(base.attr)
    return names


def _explicit_env_class(tree: ast.Module) -> str | None:
    for stmt in tree.body:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and stmt.targets[0].id == "ENV_CLASS"
        ):
            if isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                return stmt.value.value
            raise ContractError("ENV_CLASS must be a string literal naming the environment class")
    return None


def find_env_class(code: str | ast.Module) -> str:
    """Name the environment class of a module, by contract (see the module docstring).

    A class qualifies when it defines both ``reset`` and ``step``, when it subclasses ``GameEnv``
    (which supplies both), or when it defines ``reset`` and inherits from another qualifying
    class of the module or from ``ToolEnv`` (whose ``step`` is the tool-use loop).

    >>> find_env_class("class A:\\n def reset(self): ...\\n def step(self, a): ...")
    'A'
    >>> find_env_class("ENV_CLASS = 'B'\\nclass A:\\n def reset(self): ...\\n def step(self, a): ...\\n"
    ...                "class B(A):\\n pass")
    'B'
    >>> find_env_class("from gameenv import GameEnv\\nclass Board: pass\\nclass SumEnv(GameEnv):\\n LEVELS = 3")
    'SumEnv'
    >>> find_env_class("class Helper: pass")
    Traceback (most recent call last):
    ...
    spadework.errors.ContractError: no environment class: no class defines both reset() and step() (set ENV_CLASS = "Name" to name one)
    """
    if isinstance(code, str):
        try:
            tree = pyparse.parse(code)
        except SyntaxError as e:
            raise ContractError(f"syntax error at line {e.lineno}: {e.msg}") from e
    else:
        tree = code
    classes = [s for s in tree.body if isinstance(s, ast.ClassDef)]
    explicit = _explicit_env_class(tree)
    if explicit is not None:
        if explicit not in {c.name for c in classes}:
            raise ContractError(f"ENV_CLASS names {explicit!r}, but no class of that name is defined")
        return explicit
    qualifying: list[str] = []
    for cls in classes:
        methods = _defined_methods(cls)
        bases = _base_names(cls)
        inherits = bool(bases & (set(qualifying) | {TOOLENV_CLASS}))
        if ({"reset", "step"} <= methods or GAMEENV_CLASS in bases
                or (inherits and ("reset" in methods or bases & set(qualifying)))):
            qualifying.append(cls.name)
    if not qualifying:
        raise ContractError(
            "no environment class: no class defines both reset() and step() "
            '(set ENV_CLASS = "Name" to name one)'
        )
    return qualifying[-1]
