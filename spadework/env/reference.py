"""Games written to the SPADE reference implementation's contract, adapted to spadework's.

The reference (spade-rl/spade) plays a generated ``game_*.py`` module under rules of its loader
and harness that are not in the module itself. spadework's contract puts every rule in the
module, so an imported game gets them written in: its code is kept as written, and a small
subclass appended at the end applies the reference's rules, each one named in the import's
``adaptations`` so a reader sees what changed:

- **class**: the reference plays the first module-level name ending in ``Env`` (not ``Env`` or
  ``ToolUseBaseEnv``); spadework plays ``ENV_CLASS``, so the subclass extends that class;
- **prelude**: the reference runs the module in a namespace pre-filled with modules and names
  (``deque``, ``Counter``, ``defaultdict``, ``List``, ...); names a game uses without importing
  them get their import statements added at the top;
- **construction**: the reference builds ``cls()`` (falling back to ``cls(max_turns=N)``) and
  then caps ``max_turns`` at ``min(designed, N)``, or sets N when the game has no positive int;
- **reset**: a bare string observation is accepted as ``(observation, {})``;
- **turn limit**: the reference's harness ends an episode after ``max_turns`` replies; the
  subclass marks that step truncated when the game did not end it itself;
- **solution**: the agent's action reaches a reference game as ``\\boxed{<answer>}`` (its action
  parser re-wraps what the agent boxed), and ``solution()`` returns the bare answer (or a list of
  bare actions); the subclass boxes each action that is not boxed yet, so replaying it wins.

Not adapted, so rejected by the checker with its reason: rewards outside [-1, 1] (the reference
allows [-10, 10]; rescaling would change what the game means), anything the contract stages
find, and tool-use games built on the reference's ``ToolUseBaseEnv`` (its tools are
``tool_<name>`` methods with a ``_tools`` dict and it parses calls itself; spadework's
``toolenv.ToolEnv`` declares tools and parses calls differently, and no faithful rewrite is
attempted).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from spadework.env import pyparse
from spadework.env.static import bound_names
from spadework.errors import ContractError

#: The reference loader's pre-filled namespace: name -> the import statement that binds it.
PRELUDE: dict[str, str] = {
    **{m: f"import {m}" for m in ("itertools", "math", "random", "re", "json", "collections",
                                  "functools", "string", "copy", "heapq", "operator", "statistics")},
    "numpy": "import numpy", "np": "import numpy as np",
    **{n: f"from collections import {n}" for n in ("deque", "defaultdict", "Counter",
                                                   "OrderedDict", "namedtuple")},
    **{n: f"from itertools import {n}" for n in ("combinations", "permutations", "product",
                                                 "chain", "accumulate")},
    "reduce": "from functools import reduce", "lru_cache": "from functools import lru_cache",
    "deepcopy": "from copy import deepcopy",
    "heappush": "from heapq import heappush", "heappop": "from heapq import heappop",
    **{n: f"from typing import {n}" for n in ("Tuple", "Dict", "List", "Optional", "Union", "Any",
                                              "Set", "FrozenSet", "Callable", "Iterable",
                                              "Sequence", "Mapping")},
}

#: The reference's tool-use base class (injected into the game's namespace).
TOOL_BASE = "ToolUseBaseEnv"

_SUFFIX = "Adapted"

_ADAPTER = '''

def _spadework_boxed(action):
    """An action as the reference's agent sends it: inside \\\\boxed{{}}."""
    if isinstance(action, (int, float)) and not isinstance(action, bool):
        action = str(action)
    if isinstance(action, str) and "\\\\boxed{{" not in action:
        return "\\\\boxed{{" + action + "}}"
    return action


class {name}{suffix}({name}):
    """The reference's loader and harness rules, applied by the game itself (added by
    spadework's importer; see spadework.env.reference)."""

    def __init__(self, max_turns=10, **kwargs):
        self._spadework_turns = 0
        try:
            super().__init__()
        except TypeError:
            super().__init__(max_turns=max_turns)
        designed = getattr(self, "max_turns", None)
        if isinstance(designed, int) and not isinstance(designed, bool) and designed > 0:
            self.max_turns = min(designed, max_turns)
        else:
            self.max_turns = max_turns

    def reset(self, seed=None):
        self._spadework_turns = 0
        out = super().reset(seed=seed)
        if isinstance(out, str):
            return out, {{}}
        return out

    def step(self, action):
        out = super().step(action)
        self._spadework_turns += 1
        if (isinstance(out, tuple) and len(out) == 5 and out[2] is not True and out[3] is not True
                and self._spadework_turns >= self.max_turns):
            return out[0], out[1], out[2], True, out[4]
        return out

    def solution(self):
        answer = super().solution()
        if isinstance(answer, (list, tuple)):
            return [_spadework_boxed(a) for a in answer]
        return _spadework_boxed(answer)


ENV_CLASS = "{name}{suffix}"
'''


@dataclass(frozen=True)
class Adapted:
    """A reference game rewritten to the contract: the code to check and store, the class the
    reference played, and what was changed (in words)."""

    code: str
    played_class: str
    adaptations: tuple[str, ...]


def reference_class(tree: ast.Module) -> str:
    """The class the reference would play: the first module-level class or function whose name
    ends in ``Env`` (other than ``Env`` and ``ToolUseBaseEnv``).

    >>> reference_class(ast.parse("class GridEnv: pass\\nclass MazeEnv(GridEnv): pass"))
    'GridEnv'
    """
    for stmt in tree.body:
        if isinstance(stmt, (ast.ClassDef, ast.FunctionDef)) and stmt.name.endswith("Env") \
                and stmt.name not in ("Env", TOOL_BASE):
            if isinstance(stmt, ast.FunctionDef):
                raise ContractError(f"the first name ending in Env is a function, {stmt.name}(); "
                                    "the reference would call it, spadework needs a class")
            return stmt.name
    raise ContractError("no class whose name ends in Env: the reference would not load this game")


def _bound_anywhere(tree: ast.Module) -> set[str]:
    """Every name the module binds anywhere: what the static check counts as bound, plus
    exception names (a prelude import must not shadow them)."""
    nodes = list(ast.walk(tree))
    return bound_names(nodes) | {n.name for n in nodes if isinstance(n, ast.ExceptHandler) and n.name}


def missing_prelude(tree: ast.Module) -> list[str]:
    """Names of the reference's pre-filled namespace that the module uses but never binds.

    >>> missing_prelude(ast.parse("import re\\nq = deque()\\nre.compile('x')\\nx: List[int] = []"))
    ['List', 'deque']
    """
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return sorted((used & PRELUDE.keys()) - _bound_anywhere(tree))


def _insert_at(tree: ast.Module) -> int:
    """The line after the module docstring and ``from __future__`` imports (0-based)."""
    line = 0
    for stmt in tree.body:
        docstring = isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
            and isinstance(stmt.value.value, str)
        future = isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"
        if not (docstring or future):
            break
        line = stmt.end_lineno or line
    return line


def adapt(code: str) -> Adapted:
    """Rewrite a reference game to the contract (see the module docstring); ContractError when
    it cannot be: it does not parse, has no class the reference would play, or is a tool-use
    game on the reference's base class.

    >>> a = adapt("import re\\nclass GuessEnv:\\n    def reset(self, seed=None): return 'x'\\n"
    ...           "    def step(self, a): return 'x', 0.0, False, False, {}\\n"
    ...           "    def solution(self): return '7'\\n    seen = deque()\\n")
    >>> a.played_class, a.adaptations[0]
    ('GuessEnv', 'added the reference prelude import: from collections import deque')
    >>> "class GuessEnvAdapted(GuessEnv)" in a.code and a.code.rstrip().endswith('ENV_CLASS = "GuessEnvAdapted"')
    True
    """
    try:
        tree = pyparse.parse(code)
    except SyntaxError as e:
        raise ContractError(f"syntax error at line {e.lineno}: {e.msg}") from e
    name = reference_class(tree)
    played = next(s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == name)
    bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in played.bases}
    if TOOL_BASE in bases:
        raise ContractError(
            f"{name} is a tool-use game on the reference's {TOOL_BASE} (tools as tool_<name> "
            "methods, calls parsed by the base class); spadework's toolenv.ToolEnv declares and "
            "parses tools differently, so only games are imported")
    if any(isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ENV_CLASS"
                                             for t in s.targets) for s in tree.body):
        raise ContractError("the module already sets ENV_CLASS, which the reference ignores; "
                            "remove it to import the game as the reference played it")
    notes: list[str] = []
    missing = missing_prelude(tree)
    lines = code.splitlines()
    if missing:
        at = _insert_at(tree)
        imports = [PRELUDE[n] for n in missing]
        lines[at:at] = imports
        notes += [f"added the reference prelude import: {i}" for i in imports]
    notes += [
        f"plays {name}, the first class named *Env (as the reference does), through "
        f"{name}{_SUFFIX}, which applies the reference's construction, bare-string reset, "
        "turn limit and boxed solution() rules",
    ]
    body = "\n".join(lines) + "\n" + _ADAPTER.format(name=name, suffix=_SUFFIX)
    return Adapted(body, name, tuple(notes))
