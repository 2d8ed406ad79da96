"""The static stage: what can be said about environment code without running it.

This stage is defence in depth and a source of good error messages, not the security boundary:
the sandbox (:mod:`spadework.sandbox`) is. A determined author can defeat any AST screen, so
nothing here is relied on for isolation. What it buys: most mistakes a designer makes (an
``import os``, a module-level self-test, a missing ``step``) are rejected in microseconds with a
reason that names the line, before a sandbox child is forked.

Rules:

* the code parses;
* imports come only from :func:`allowed_imports` (pure standard-library modules, ``toolenv``,
  ``numpy`` and ``math_verify`` when allowed); no relative imports;
* no call to ``eval``/``exec``/``compile``/``open``/``input``/``globals``/``__import__``/...
  unless the module binds that name itself, and no dunder escapes (``__subclasses__``,
  ``__globals__``, ``__builtins__``, frame attributes), neither as attributes nor as strings;
* module level (and class bodies) only define: imports, ``def``, ``class``, docstrings,
  assignments of values built from literals and pure calls (``re.compile``, ``frozenset``, ...),
  ``if __name__ == "__main__":`` (ignored) and ``if TYPE_CHECKING:``;
* the environment class is found by contract (:func:`spadework.env.contract.find_env_class`) and
  has ``__init__(max_turns, ...)``, ``reset(seed)`` and ``step(action)``, possibly inherited from
  a base class of the module or from ``ToolEnv``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from spadework.env import pyparse
from spadework.env.contract import (
    GAMEENV_ANSWER_HOOKS,
    GAMEENV_CLASS,
    GAMEENV_HOOKS,
    GAMEENV_MODULE,
    KIT_CLASSES,
    TOOLENV_CLASS,
    TOOLENV_MODULE,
    find_env_class,
)
from spadework.errors import ContractError

#: Standard-library modules an environment may import (their submodules too).
STDLIB_ALLOWED: frozenset[str] = frozenset(
    {
        "__future__", "abc", "bisect", "collections", "copy", "dataclasses", "datetime",
        "decimal", "enum", "fractions", "functools", "heapq", "itertools", "json", "math",
        "numbers", "operator", "random", "re", "statistics", "string", "textwrap", "typing",
    }
)

#: Builtins that reach outside the environment (files, stdin, code generation, the interpreter).
FORBIDDEN_BUILTINS: frozenset[str] = frozenset(
    {
        "__import__", "eval", "exec", "compile", "open", "input", "globals", "locals", "vars",
        "breakpoint", "exit", "quit", "help", "memoryview", "__builtins__", "__loader__",
        "__spec__",
    }
)

#: Attributes used to climb out of a restricted namespace (object graph and frame walking).
FORBIDDEN_ATTRS: frozenset[str] = frozenset(
    {
        "__subclasses__", "__bases__", "__base__", "__mro__", "__globals__", "__builtins__",
        "__code__", "__closure__", "__getattribute__", "__reduce__", "__reduce_ex__",
        "__loader__", "__spec__", "__import__", "__self__", "__func__",
        "__setattr__", "__delattr__", "f_globals", "f_locals", "f_back", "f_builtins",
        "gi_frame", "gi_code", "cr_frame", "ag_frame", "tb_frame", "tb_next",
    }
)

#: Calls allowed at module level: pure constructors and functions of pure modules.
_PURE_BUILTINS = frozenset(
    {
        "abs", "all", "any", "bool", "chr", "dict", "divmod", "enumerate", "filter", "float",
        "frozenset", "int", "len", "list", "map", "max", "min", "ord", "range", "reversed",
        "round", "set", "sorted", "str", "sum", "tuple", "zip", "object", "property",
        "staticmethod", "classmethod",
    }
)
_PURE_MODULES = frozenset(
    {"collections", "dataclasses", "enum", "fractions", "functools", "itertools", "json",
     "math", "operator", "re", "string", "typing", "decimal", "datetime", "textwrap", "numpy"}
)


#: The answer checker the reference's designer template imports inside games
#: (``from math_verify import parse, verify``); allowed when the sandbox preloads it
#: (``Limits.math_verify``), since a sandbox child cannot import anything it did not inherit.
MATH_VERIFY = "math_verify"


def allowed_imports(allow_numpy: bool = False, allow_math_verify: bool = False) -> frozenset[str]:
    """Top-level module names an environment may import.

    >>> "random" in allowed_imports() and "os" not in allowed_imports()
    True
    >>> "numpy" in allowed_imports(), "numpy" in allowed_imports(allow_numpy=True)
    (False, True)
    >>> "math_verify" in allowed_imports(allow_math_verify=True)
    True
    """
    extra = ({TOOLENV_MODULE, GAMEENV_MODULE} | ({"numpy"} if allow_numpy else set())
             | ({MATH_VERIFY} if allow_math_verify else set()))
    return STDLIB_ALLOWED | extra


@dataclass(frozen=True)
class StaticInfo:
    """What the static stage learned: the class to load and the setting it belongs to."""

    class_name: str
    setting: str  # "games" or "tool-use"


def parse_module(code: str) -> ast.Module:
    """Parse environment code, with the line and message of a syntax error as the reason.

    >>> parse_module("x = (").body
    Traceback (most recent call last):
    ...
    spadework.errors.ContractError: syntax error at line 1: '(' was never closed
    """
    try:
        return pyparse.parse(code)
    except SyntaxError as e:
        raise ContractError(f"syntax error at line {e.lineno}: {e.msg}") from e
    except ValueError as e:  # e.g. null bytes in the source
        raise ContractError(f"code cannot be parsed: {e}") from e


def check_imports(tree: ast.Module, allow_numpy: bool = False, nodes: list[ast.AST] | None = None,
                  allow_math_verify: bool = False) -> None:
    """Reject imports outside the allowlist, and relative imports, naming the line.

    >>> check_imports(ast.parse("import random\\nfrom collections import deque"))
    >>> check_imports(ast.parse("import os.path"))
    Traceback (most recent call last):
    ...
    spadework.errors.ContractError: line 1: import of 'os.path' is not allowed (allowed: __future__, abc, bisect, collections, copy, dataclasses, datetime, decimal, enum, fractions, functools, gameenv, heapq, itertools, json, math, numbers, operator, random, re, statistics, string, textwrap, toolenv, typing)
    """
    allowed = allowed_imports(allow_numpy, allow_math_verify)
    for node in nodes if nodes is not None else ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                raise ContractError(f"line {node.lineno}: relative imports are not allowed")
            names = [node.module or ""]
        else:
            continue
        for name in names:
            if name.split(".")[0] not in allowed:
                raise ContractError(
                    f"line {node.lineno}: import of {name!r} is not allowed "
                    f"(allowed: {', '.join(sorted(allowed))})"
                )


def bound_names(nodes: list[ast.AST]) -> set[str]:
    """Names that ``nodes`` bind: assignments, deletions, defs, classes, arguments, imports
    (not exception names: one is unbound again after its ``except`` block)."""
    bound: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
    return bound


def check_forbidden(tree: ast.Module, nodes: list[ast.AST] | None = None) -> None:
    """Reject escape hatches: forbidden builtins (unless the module binds the name itself) and
    dunder or frame attributes, whether written as attributes or as strings.

    >>> check_forbidden(ast.parse("input = 'x'\\nprint(input)"))
    >>> check_forbidden(ast.parse("eval('1')"))
    Traceback (most recent call last):
    ...
    spadework.errors.ContractError: line 1: use of 'eval' is not allowed (no code generation, files, stdin or interpreter internals)
    >>> check_forbidden(ast.parse("x = ().__class__.__bases__"))
    Traceback (most recent call last):
    ...
    spadework.errors.ContractError: line 1: attribute '__bases__' is not allowed (it reaches interpreter internals)
    """
    nodes = list(ast.walk(tree)) if nodes is None else nodes
    bound = bound_names(nodes)
    for node in nodes:
        if isinstance(node, ast.Name) and node.id in FORBIDDEN_BUILTINS and node.id not in bound:
            raise ContractError(
                f"line {node.lineno}: use of {node.id!r} is not allowed "
                "(no code generation, files, stdin or interpreter internals)"
            )
        if isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_ATTRS:
            raise ContractError(
                f"line {node.lineno}: attribute {node.attr!r} is not allowed "
                "(it reaches interpreter internals)"
            )
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value in (FORBIDDEN_ATTRS | {"__import__", "__builtins__"})
        ):
            raise ContractError(
                f"line {node.lineno}: the string {node.value!r} is not allowed "
                "(getattr on interpreter internals)"
            )


def _dotted(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _import_origins(tree: ast.Module) -> dict[str, str]:
    """Local name -> dotted origin, for module-level imports (``from re import compile`` ->
    ``{"compile": "re.compile"}``)."""
    origins: dict[str, str] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                origins[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(stmt, ast.ImportFrom) and stmt.module:
            for a in stmt.names:
                origins[a.asname or a.name] = f"{stmt.module}.{a.name}"
    return origins


_LITERAL_RECEIVERS = (ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.JoinedStr)


def _pure_call(call: ast.Call, origins: dict[str, str]) -> bool:
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, _LITERAL_RECEIVERS):
        return True  # "a b c".split(), ", ".join([...])
    dotted = _dotted(func)
    if dotted is None:
        return False
    head, _, rest = dotted.partition(".")
    if not rest and head in _PURE_BUILTINS and head not in origins:
        return True
    origin = origins.get(head)
    if origin is None:
        return False
    full = f"{origin}.{rest}" if rest else origin
    return full.split(".")[0] in _PURE_MODULES


def _impure_call(value: ast.AST, origins: dict[str, str]) -> ast.Call | None:
    for node in ast.walk(value):
        if isinstance(node, ast.Call) and not _pure_call(node, origins):
            return node
    return None


def _is_ignored_if(stmt: ast.If) -> bool:
    test = stmt.test
    if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
        return True
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _check_definitions(body: list[ast.stmt], origins: dict[str, str], where: str) -> None:
    for stmt in body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.Pass)):
            continue
        if isinstance(stmt, ast.ClassDef):
            _check_definitions(stmt.body, origins, f"class {stmt.name}")
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # docstring or a bare literal
        if isinstance(stmt, ast.If) and _is_ignored_if(stmt):
            continue
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            call = _impure_call(stmt.value, origins) if stmt.value is not None else None
            if call is None:
                continue
            name = ast.unparse(call.func)
            raise ContractError(
                f"line {stmt.lineno}: {where} calls {name}() when the module is imported; "
                "only pure constructors (re.compile, frozenset, ...) may run there: build "
                "state in __init__() or reset()"
            )
        raise ContractError(
            f"line {stmt.lineno}: {where} has a {type(stmt).__name__} statement; it may only "
            "define (imports, def, class, constants): move the code into a method"
        )


def check_side_effects(tree: ast.Module) -> None:
    """Module level and class bodies only define; nothing runs at import beyond pure constants.

    >>> check_side_effects(ast.parse("import re\\nPAT = re.compile('a')\\nWORDS = 'a b'.split()"))
    >>> check_side_effects(ast.parse("import random\\nrandom.seed(0)"))
    Traceback (most recent call last):
    ...
    spadework.errors.ContractError: line 2: module level has a Expr statement; it may only define (imports, def, class, constants): move the code into a method
    """
    _check_definitions(tree.body, _import_origins(tree), "module level")


def _class_map(tree: ast.Module) -> dict[str, ast.ClassDef]:
    return {s.name: s for s in tree.body if isinstance(s, ast.ClassDef)}


def _find_method(
    cls: ast.ClassDef, name: str, classes: dict[str, ast.ClassDef], seen: frozenset[str] = frozenset()
) -> ast.FunctionDef | str | None:
    """The method node, the base class's name (``"ToolEnv"``, ``"GameEnv"``) when inherited from
    a kit the sandbox provides, else None."""
    for item in cls.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == name:
            return item
    for base in cls.bases:
        base_name = _dotted(base) or ""
        short = base_name.rsplit(".", 1)[-1]
        if short in KIT_CLASSES:
            return short
        if short in classes and short not in seen and short != cls.name:
            found = _find_method(classes[short], name, classes, seen | {cls.name})
            if found is not None:
                return found
    return None


def _accepts(fn: ast.FunctionDef, param: str) -> bool:
    a = fn.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    return param in names or a.kwarg is not None


def _positional_count(fn: ast.FunctionDef) -> int:
    a = fn.args
    return len(a.posonlyargs) + len(a.args) - 1 + (1 if a.vararg else 0)  # without self


def _explain_missing_class(tree: ast.Module) -> str | None:
    for cls in tree.body:
        if isinstance(cls, ast.ClassDef):
            defined = {i.name for i in cls.body if isinstance(i, (ast.FunctionDef, ast.AsyncFunctionDef))}
            if "reset" in defined and "step" not in defined:
                return f"class {cls.name} defines reset() but no step(action) method"
            if "step" in defined and "reset" not in defined:
                return f"class {cls.name} defines step() but no reset(seed) method"
    return None


def check_env_class(tree: ast.Module) -> StaticInfo:
    """Find the environment class by contract and check its three required methods' signatures."""
    try:
        name = find_env_class(tree)
    except ContractError as e:
        raise ContractError(_explain_missing_class(tree) or e.reason) from e
    classes = _class_map(tree)
    cls = classes[name]
    requirements = (
        ("__init__", "max_turns", "__init__(self, max_turns=10, **kwargs)"),
        ("reset", "seed", "reset(self, seed=None)"),
        ("step", None, "step(self, action)"),
    )
    for method, param, shape in requirements:
        found = _find_method(cls, method, classes)
        if found is None:
            raise ContractError(f"class {name} has no {method}() method; write {shape}")
        if found in KIT_CLASSES:
            continue
        if param is not None and not _accepts(found, param):
            raise ContractError(f"line {found.lineno}: {name}.{method} must accept {param!r}; write {shape}")
        if method == "step" and _positional_count(found) < 1:
            raise ContractError(f"line {found.lineno}: {name}.step takes no action argument; write {shape}")
    if _inherits(cls, classes, GAMEENV_CLASS):
        answers = _sets_answer(cls, classes)
        for hook, shape in GAMEENV_HOOKS:
            found = _find_method(cls, hook, classes)
            written = found is not None and found not in KIT_CLASSES
            if not written and not (answers and hook in GAMEENV_ANSWER_HOOKS):
                also = ("" if hook not in GAMEENV_ANSWER_HOOKS
                        else "; or set self.answer in setup() and GameEnv writes it")
                raise ContractError(f"class {name} subclasses GameEnv but has no {hook}() method; "
                                    f"write {shape} (GameEnv calls it){also}")
    tool_use = _inherits(cls, classes, TOOLENV_CLASS)
    return StaticInfo(class_name=name, setting="tool-use" if tool_use else "games")


def _lineage(cls: ast.ClassDef, classes: dict[str, ast.ClassDef]) -> list[ast.ClassDef]:
    """``cls`` and every class of the module it derives from, each once (a cycle of bases ends)."""
    found, todo = [], [cls]
    while todo:
        c = todo.pop()
        if c.name in {f.name for f in found}:
            continue
        found.append(c)
        for base in c.bases:
            short = (_dotted(base) or "").rsplit(".", 1)[-1]
            if short in classes:
                todo.append(classes[short])
    return found


def _sets_answer(cls: ast.ClassDef, classes: dict[str, ast.ClassDef]) -> bool:
    """Whether ``cls`` or one of the module's classes it derives from assigns ``self.answer`` (or
    defines ``answer``), so that ``GameEnv`` judges moves against it.

    >>> tree = ast.parse("class A(GameEnv):\\n def setup(self, rng):\\n  self.answer = 3\\n")
    >>> _sets_answer(tree.body[0], {"A": tree.body[0]})
    True
    """
    return any((isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "answer")
               or (isinstance(node, ast.Attribute) and node.attr == "answer"
                   and isinstance(node.ctx, ast.Store))
               for c in _lineage(cls, classes) for node in ast.walk(c))


def _inherits(cls: ast.ClassDef, classes: dict[str, ast.ClassDef], kit: str) -> bool:
    """Whether ``cls`` derives from the kit base class ``kit``, directly or through the module's
    own classes."""
    return any((_dotted(base) or "").rsplit(".", 1)[-1] == kit
               for c in _lineage(cls, classes) for base in c.bases)


def check_static(code: str, *, allow_numpy: bool = False, allow_math_verify: bool = False) -> StaticInfo:
    """Run every static rule (see the module docstring); raise ContractError with the first
    violation, naming its line.

    >>> code = '''
    ... import random
    ... class GuessEnv:
    ...     def __init__(self, max_turns=10, **kwargs):
    ...         self.max_turns = max_turns
    ...     def reset(self, seed=None):
    ...         self.target = random.Random(seed).randint(1, 9)
    ...         return "Guess 1-9 as \\\\boxed{n}.", {}
    ...     def step(self, action):
    ...         return "ok", 0.0, False, False, {}
    ...     def solution(self):
    ...         return f"\\\\boxed{{{self.target}}}"
    ... '''
    >>> check_static(code)
    StaticInfo(class_name='GuessEnv', setting='games')
    >>> check_static("import subprocess")
    Traceback (most recent call last):
    ...
    spadework.errors.ContractError: line 1: import of 'subprocess' is not allowed (allowed: __future__, abc, bisect, collections, copy, dataclasses, datetime, decimal, enum, fractions, functools, gameenv, heapq, itertools, json, math, numbers, operator, random, re, statistics, string, textwrap, toolenv, typing)
    """
    tree = parse_module(code)
    nodes = list(ast.walk(tree))  # one walk shared by the rules: modules run to hundreds of lines
    check_imports(tree, allow_numpy, nodes, allow_math_verify)
    check_forbidden(tree, nodes)
    check_side_effects(tree)
    return check_env_class(tree)
