"""The automatic repairs extraction makes to code that does not parse, each recorded.

Two kinds, tried where the parser points: non-breaking, wide and invisible spaces that text tools
put into code (made plain or removed), and f-strings with literal braces
(``f"answer as \\\\boxed{your move}"``: the braces that cannot be replacement fields are doubled).

Departure from the reference (``repair_fstring_braces``): it doubles any ``{...}`` on the
failing line, including dict literals outside f-strings, which turns ``{"a": 1}`` into a set of
a dict. Here only f-string literals on the failing line are touched, and only their fields that
do not compile.
"""

from __future__ import annotations

import ast
import re

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
        return ast.parse(code)
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
        ast.parse(f"{prefix}{quote}{field}{quote}", mode="eval")
    except (SyntaxError, ValueError):
        return False
    return True
