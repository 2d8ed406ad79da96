"""The automatic repairs extraction makes to the code the model wrote, each recorded.

Two kinds for code that does not parse, tried where the parser points: non-breaking, wide and
invisible spaces that text tools put into code (made plain or removed), and f-strings with
literal braces (``f"answer as \\\\boxed{your move}"``: the braces that cannot be replacement
fields are doubled). One for code that parses: a value the environment class stores under its own
method's name (``self.step = rng.randint(1, 9)``) is renamed, so that the method stays callable
(:func:`unshadow_methods`).

Departure from the reference (``repair_fstring_braces``): it doubles any ``{...}`` on the
failing line, including dict literals outside f-strings, which turns ``{"a": 1}`` into a set of
a dict. Here only f-string literals on the failing line are touched, and only their fields that
do not compile.
"""

from __future__ import annotations

import ast
import inspect
import re

from spadework.env import pyparse
from spadework.env.gameenv import GameEnv
from spadework.env.toolenv import ToolEnv

_MAX_REPAIR_ROUNDS = 20
#: Spaces a tokenizer refuses that text tools put into code; byte-order marks and zero-width
#: characters are removed, the others become a plain space.
_ODD_SPACES = re.compile("[\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]")
_INVISIBLE = re.compile("[\ufeff\u200b\u200c\u200d\u2060]")
_STRING_START = re.compile(r"#|(?:(?<![\w])([rRbBfFuU]{1,2}))?('''|\"\"\"|'|\")")


def parse_with_repair(code: str) -> tuple[ast.Module, str, tuple[str, ...]]:
    """Parse ``code``; where the parser refuses a non-breaking or invisible space, make it a
    plain one (or remove it); where it fails inside an f-string, double its stray braces; and
    try again after each repair.

    Returns ``(tree, code_as_parsed, repairs)``. Raises the *original* ``SyntaxError`` when the
    code does not parse even after repair (its line numbers refer to what the model wrote).

    >>> _, fixed, repairs = parse_with_repair('x = f"reply {your move} or {}"\\n')
    >>> fixed, repairs
    ('x = f"reply {{your move}} or {{}}"\\n', ('doubled literal braces in the f-string at line 1',))
    >>> parse_with_repair("d = {'a': 1}\\n")[2]
    ()
    >>> parse_with_repair("if True:\\n\\u00a0\\u00a0x = 1\\n")[1:]
    ('if True:\\n  x = 1\\n', ('replaced 2 non-breaking or wide space(s) with plain spaces',))
    """
    try:
        return _parse(code), code, ()
    except SyntaxError as first:
        original = first
    current, repairs = code, []
    error = original
    spaces_done = False
    for _ in range(_MAX_REPAIR_ROUNDS):
        msg = error.msg or ""
        if "non-printable character" in msg and not spaces_done:
            fixed, notes = _plain_spaces(current)
            spaces_done = True
            repairs += notes
        elif "f-string" in msg and error.lineno is not None:
            fixed = _repair_fstrings_at(current, error.lineno)
            if fixed != current:
                repairs.append(f"doubled literal braces in the f-string at line {error.lineno}")
        else:
            break
        if fixed == current:
            break
        current = fixed
        try:
            return _parse(current), current, tuple(repairs)
        except SyntaxError as e:
            error = e
    raise original


def _plain_spaces(code: str) -> tuple[str, list[str]]:
    """Non-breaking and wide spaces made plain, byte-order marks and zero-width characters
    removed; with a note for each kind changed."""
    notes = []
    code, n = _ODD_SPACES.subn(" ", code)
    if n:
        notes.append(f"replaced {n} non-breaking or wide space(s) with plain spaces")
    code, n = _INVISIBLE.subn("", code)
    if n:
        notes.append(f"removed {n} byte-order mark or zero-width character(s)")
    return code, notes


def _parse(code: str) -> ast.Module:
    """``ast.parse`` with every refusal as a SyntaxError: null bytes (ValueError) and nesting
    too deep for the parser (MemoryError, RecursionError) are code that cannot load either."""
    try:
        return pyparse.parse(code)
    except ValueError as e:
        raise SyntaxError(str(e)) from e
    except (MemoryError, RecursionError) as e:
        raise SyntaxError("the code is nested too deeply for Python's parser") from e


def _repair_fstrings_at(code: str, lineno: int) -> str:
    """Double the braces of every f-string literal that covers line ``lineno``."""
    line_starts = [0] + [m.end() for m in re.finditer("\n", code)]
    lo = line_starts[lineno - 1] if lineno - 1 < len(line_starts) else len(code)
    hi = line_starts[lineno] if lineno < len(line_starts) else len(code)
    out, last = [], 0
    for start, body_start, body_end, prefix, quote in _string_literals(code):
        if "f" not in prefix.lower() or body_end < lo or start >= hi:
            continue
        out.append(code[last:body_start])
        out.append(_repair_fstring_body(code[body_start:body_end], prefix, quote))
        last = body_end
    out.append(code[last:])
    return "".join(out)


def _string_literals(code: str):
    """Yield ``(start, body_start, body_end, prefix, quote)`` of each string literal.

    Python 3.11 rules: a literal ends at the first unescaped closing quote (replacement fields
    cannot reuse the delimiter); a one-line literal also ends at a newline (it is broken then).
    """
    pos = 0
    while (m := _STRING_START.search(code, pos)) is not None:
        if m.group(0) == "#":
            nl = code.find("\n", m.end())
            pos = len(code) if nl < 0 else nl
            continue
        prefix, quote = m.group(1) or "", m.group(2)
        i = m.end()
        while i < len(code):
            ch = code[i]
            if ch == "\\":
                i += 2
            elif code.startswith(quote, i) or (len(quote) == 1 and ch == "\n"):
                break
            else:
                i += 1
        body_end = min(i, len(code))
        yield m.start(), m.end(), body_end, prefix, quote
        pos = body_end + (len(quote) if code.startswith(quote, body_end) else 1)


def _repair_fstring_body(body: str, prefix: str, quote: str) -> str:
    """Keep fields that compile; double the braces of everything else."""
    out, i = [], 0
    while i < len(body):
        ch = body[i]
        if body.startswith("{{", i) or body.startswith("}}", i):
            out.append(body[i:i + 2])
            i += 2
        elif ch == "{":
            j = _matching_brace(body, i)
            field = body[i:j + 1] if j is not None else body[i]
            ok = j is not None and _field_compiles(field, prefix, quote)
            out.append(field if ok else field.replace("{", "{{").replace("}", "}}"))
            i += len(field)
        elif ch == "}":
            out.append("}}")
            i += 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _matching_brace(body: str, i: int) -> int | None:
    depth = 0
    for j in range(i, len(body)):
        if body[j] == "{":
            depth += 1
        elif body[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return None


def _field_compiles(field: str, prefix: str, quote: str) -> bool:
    try:
        pyparse.parse(f"{prefix}{quote}{field}{quote}", mode="eval")
    except (SyntaxError, ValueError):
        return False
    return True


#: Methods the harness and the kits call on an environment whatever its base class.
CONTRACT_METHODS = frozenset({"reset", "step", "solution", "hint"})


#: The public methods of the two sandbox kits, by base-class name (``level`` and the other
#: properties are not methods: a kit guards them itself).
KIT_METHODS = {b.__name__: frozenset(n for n, _ in inspect.getmembers(b, inspect.isfunction)
                                     if not n.startswith("_"))
               for b in (GameEnv, ToolEnv)}


def unshadow_methods(code: str, tree: ast.Module, class_name: str) -> tuple[str, tuple[str, ...]]:
    """``code`` with each value the environment class stores under one of its own method names
    (``self.step = rng.randint(1, 9)`` in a ``GameEnv``: the instance's ``step`` is then an int,
    and every move raises ``TypeError: 'int' object is not callable``) renamed to
    ``<name>_value``, in every read and write of ``self.<name>`` that is not a call; with a
    repair note per name.

    A method name is one the class defines, one of its kit's (``GameEnv``, ``ToolEnv``) or one
    of the contract's (``reset``, ``step``, ``solution``, ``hint``). Calls ``self.<name>(...)``
    keep calling the method. Nothing is renamed when a stored value could be a callable meant to
    replace the method (a lambda, a method of the instance, a function of the module).

    >>> src = ("class A(GameEnv):\\n    def setup(self, rng):\\n        self.step = 3\\n"
    ...        "    def task(self):\\n        return str(self.step + self.task_count())\\n")
    >>> fixed, notes = unshadow_methods(src, ast.parse(src), "A")
    >>> print(fixed)  # doctest: +NORMALIZE_WHITESPACE
    class A(GameEnv):
        def setup(self, rng):
            self.step_value = 3
        def task(self):
            return str(self.step_value + self.task_count())
    >>> notes
    ('renamed self.step to self.step_value: the class stored a value under its method step() (line 3)',)
    """
    cls = next((s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == class_name), None)
    if cls is None:
        return code, ()
    methods = set(CONTRACT_METHODS)
    methods |= {s.name for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for base in cls.bases:
        if isinstance(base, ast.Name) and base.id in KIT_METHODS:
            methods |= KIT_METHODS[base.id]
    called: set[int] = set()
    uses: dict[str, list[ast.Attribute]] = {}
    stores: dict[str, list[tuple[int, int, str]]] = {}  # name -> (line, target's id, self)
    values: dict[int, ast.AST] = {}  # a plain assignment's target -> the value assigned
    for fn in (s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))):
        if not fn.args.args:
            continue
        me = fn.args.args[0].arg
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                called.add(id(node.func))
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                values.update({id(t): node.value for t in targets})
            if _is_self_attr(node, me) and node.attr in methods:
                uses.setdefault(node.attr, []).append(node)
                if isinstance(node.ctx, ast.Store):  # a target: assigned, augmented, looped
                    stores.setdefault(node.attr, []).append((node.lineno, id(node), me))
    functions = {s.name for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if not stores or any(_may_be_method(values.get(t), me, methods, functions)
                         for found in stores.values() for _, t, me in found):
        return code, ()
    taken = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    taken |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    edits, notes = [], []
    for name in sorted(stores):
        new = f"{name}_value"
        while new in taken:
            new += "_"
        taken.add(new)
        nodes = [n for n in uses[name] if id(n) not in called]
        first = min(line for line, _, _ in stores[name])
        edits += [(n.end_lineno, n.end_col_offset - len(name), n.end_col_offset, new) for n in nodes]
        notes.append(f"renamed self.{name} to self.{new}: the class stored a value under its "
                     f"method {name}() (line {first})")
    lines = code.splitlines(keepends=True)
    for lineno, start, end, new in sorted(edits, reverse=True):
        raw = lines[lineno - 1].encode("utf-8")  # ast offsets count UTF-8 bytes
        lines[lineno - 1] = (raw[:start] + new.encode() + raw[end:]).decode("utf-8")
    return "".join(lines), tuple(notes)


def _is_self_attr(node: ast.AST, me: str) -> bool:
    return (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id == me)


def _may_be_method(value: ast.AST | None, me: str, methods: set[str], functions: set[str]) -> bool:
    """Whether a stored value could be a callable meant to replace the method: a lambda, a
    method of the instance or a function of the module."""
    return (isinstance(value, ast.Lambda)
            or (_is_self_attr(value, me) and value.attr in methods)
            or (isinstance(value, ast.Name) and value.id in functions))
