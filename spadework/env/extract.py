"""Pull the environment module out of a designer reply.

The designer answers with prose, maybe a ``<think>`` block, and one or more fenced code blocks.
:func:`extract_env_module` returns the one module that defines the environment class, or raises
:class:`~spadework.errors.ExtractError` with a reason a person can act on.

Rules, in order:

1. The reply must be text, non-empty, under a size cap, and not binary junk.
2. Fenced blocks are found first (```` ```python ````, ```` ```py ````, ```` ``` ````; a longer
   fence needs an equally long closing fence). A ```` ``` ```` line inside the module (a board
   drawn in a triple-quoted string) does not end the block when a later closing fence makes the
   block parse. An unterminated final fence (a truncated reply) runs to the end of the reply and
   is recorded as a repair; it must then parse.
3. Thinking is dropped: ``<think>...</think>`` blocks, an unclosed ``<think>`` (to the end) and a
   prefix that ends in ``</think>`` without an opening tag (chat templates put the opening tag in
   the prompt). Tags inside fenced blocks are code, not thinking.
4. Of the blocks outside thinking, the last one that parses and defines an environment class
   (:func:`~spadework.env.contract.find_env_class`) wins. A reply without fences that is itself
   a module with an environment class is accepted.
5. A block that does not parse gets one kind of automatic repair: the f-string that the
   ``SyntaxError`` points at has its literal braces doubled where they cannot be replacement
   fields (``f"answer as \\\\boxed{your move}"``), then it is parsed again.

Departures from the reference (``extract_game_code`` + ``repair_fstring_braces``): it takes the
*first* ``python`` fence and never strips thinking, so a draft in the thinking wins over the final
module; and its repair doubles any ``{...}`` on the failing line, including dict literals outside
f-strings, which turns ``{"a": 1}`` into a set of a dict. Here only f-string literals on the
failing line are touched, and only their fields that do not compile.
"""

from __future__ import annotations

import ast
import bisect
import re
import textwrap
from dataclasses import dataclass

from spadework.env.contract import find_env_class
from spadework.errors import ContractError, ExtractError

#: Largest reply accepted, in characters (a 20,000-token reply is about 80,000 characters).
MAX_REPLY_CHARS = 500_000

#: Info strings that mark a block as Python; an empty info string counts too.
PYTHON_LANGS = frozenset({"", "python", "py", "python3", "py3"})

_MAX_REPAIR_ROUNDS = 20
_MAX_CLOSING_TRIES = 8
_OPEN_FENCE = re.compile(r"^([ \t]*)(`{3,})[ \t]*([^`\n]*?)[ \t\r]*$", re.M)
_THINK_TAG = re.compile(r"<(/?)think>")
_JUNK = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffd]")
_STRING_START = re.compile(r"#|(?:(?<![\w])([rRbBfFuU]{1,2}))?('''|\"\"\"|'|\")")


@dataclass(frozen=True)
class ExtractedModule:
    """The environment module pulled out of a reply.

    ``repairs`` names each automatic change made to the text the model wrote, in order; an
    empty tuple means the code is exactly what the model wrote.
    """

    code: str
    class_name: str
    repairs: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Block:
    start: int  # offset of the opening fence line
    end: int  # offset just past the closing fence line (or the end of the reply)
    lang: str
    code: str
    terminated: bool


def extract_env_module(reply: str, *, max_chars: int = MAX_REPLY_CHARS) -> ExtractedModule:
    """The environment module of a designer reply (see the module docstring for the rules).

    Raises :class:`ExtractError` for an empty, oversized, binary or all-thinking reply, a reply
    without code, code that does not parse even after repair, or code without an environment
    class; the reason says which, and where.

    >>> reply = '''<think>A dice game.</think>
    ... Here it is:
    ... ```python
    ... class DiceEnv:
    ...     def reset(self, seed=None):
    ...         return f"Roll and answer as \\\\boxed{your guess}", {}
    ...     def step(self, action):
    ...         return "ok", 1.0, True, False, {}
    ... ```'''
    >>> m = extract_env_module(reply)
    >>> m.class_name, m.repairs
    ('DiceEnv', ('doubled literal braces in the f-string at line 3',))
    >>> "{{your guess}}" in m.code
    True
    >>> extract_env_module("<think>Let me think about a game")
    Traceback (most recent call last):
    ...
    spadework.errors.ExtractError: the reply is all thinking: <think> was never closed, so there is no code after it (raise the designer's max tokens or turn thinking off)
    """
    _check_text(reply, max_chars)
    blocks = _fenced_blocks(reply)
    spans, unclosed = _thinking_spans(reply, blocks)
    rest = _without(reply, spans)
    if spans and not rest.strip():
        why = "<think> was never closed, so there is no code after it" if unclosed else (
            "there is nothing after </think>")
        raise ExtractError(f"the reply is all thinking: {why} "
                           "(raise the designer's max tokens or turn thinking off)")
    span_starts = [a for a, _ in spans]
    candidates = [b for b in blocks
                  if b.lang in PYTHON_LANGS and not _inside(b.start, spans, span_starts)]
    if candidates:
        return _choose(candidates)
    try:
        return _unfenced(reply, rest, has_fences=bool(blocks))
    except ExtractError as e:
        if any(b.lang in PYTHON_LANGS for b in blocks):
            raise ExtractError("the only code blocks are inside the thinking; write the module "
                               "after </think> in a ```python block") from e
        raise


def _check_text(reply: object, max_chars: int) -> None:
    if not isinstance(reply, str):
        raise ExtractError(f"the reply is {type(reply).__name__}, not text")
    if not reply.strip():
        raise ExtractError("the reply is empty: the designer produced no text")
    if len(reply) > max_chars:
        raise ExtractError(f"the reply has {len(reply):,} characters, over the cap of "
                           f"{max_chars:,}: ask for one module, or raise max_chars")
    junk = len(_JUNK.findall(reply))
    if "\x00" in reply or junk > len(reply) // 100:
        raise ExtractError(f"the reply looks like binary data ({junk} control or invalid "
                           "characters): check the model's decoding and tokenizer")


def _fenced_blocks(text: str) -> list[_Block]:
    """Fenced blocks in order, with parse-aware closing fences for Python blocks."""
    blocks: list[_Block] = []
    pos = 0
    while (m := _OPEN_FENCE.search(text, pos)) is not None:
        indent, ticks, info = m.group(1), m.group(2), m.group(3)
        lang = info.split()[0].lower() if info.split() else ""
        body_start = min(m.end() + 1, len(text))
        closing = re.compile(rf"^[ \t]*`{{{len(ticks)},}}[ \t\r]*$", re.M)
        first = closing.search(text, body_start)
        if first is None:
            code = _dedent(text[body_start:], indent)
            blocks.append(_Block(m.start(), len(text), lang, code, terminated=False))
            break
        chosen, tries, c = first, 0, first
        while lang in PYTHON_LANGS and c is not None and tries < _MAX_CLOSING_TRIES:
            if _parses(_dedent(text[body_start:c.start()], indent)):
                chosen = c
                break
            c, tries = closing.search(text, c.end()), tries + 1
        code = _dedent(text[body_start:chosen.start()], indent)
        blocks.append(_Block(m.start(), chosen.end(), lang, code, terminated=True))
        pos = chosen.end()
    return blocks


def _dedent(code: str, indent: str) -> str:
    return textwrap.dedent(code) if indent else code


def _parses(code: str) -> bool:
    try:
        parse_with_repair(code)
    except SyntaxError:
        return False
    return True


def _thinking_spans(text: str, blocks: list[_Block]) -> tuple[list[tuple[int, int]], bool]:
    """Character spans of thinking, and whether a ``<think>`` was left open at the end."""
    spans: list[tuple[int, int]] = []
    open_at: int | None = None
    block_spans = [(b.start, b.end) for b in blocks]
    starts = [b.start for b in blocks]
    for tag in _THINK_TAG.finditer(text):
        if _inside(tag.start(), block_spans, starts):
            continue
        if tag.group(1) == "":
            if open_at is None:
                open_at = tag.start()
        else:
            start = open_at if open_at is not None else (spans[-1][1] if spans else 0)
            spans.append((start, tag.end()))
            open_at = None
    if open_at is not None:
        spans.append((open_at, len(text)))
    return spans, open_at is not None


def _inside(pos: int, spans: list[tuple[int, int]], starts: list[int] | None = None) -> bool:
    """Whether ``pos`` lies in one of ``spans`` (sorted, not overlapping); ``starts`` are their
    starts, passed in when the same spans are asked about many times."""
    i = bisect.bisect_right(starts if starts is not None else [a for a, _ in spans], pos) - 1
    return i >= 0 and pos < spans[i][1]


def _without(text: str, spans: list[tuple[int, int]]) -> str:
    out, last = [], 0
    for a, b in spans:
        out.append(text[last:a])
        last = b
    out.append(text[last:])
    return "".join(out)


def _choose(candidates: list[_Block]) -> ExtractedModule:
    """The last block that parses (after repair) and defines an environment class."""
    outcomes: list[str] = []
    for i, block in reversed(list(enumerate(candidates, 1))):
        label = f"block {i} of {len(candidates)} ({block.lang or 'unlabelled'}, " \
                f"{block.code.count(chr(10)) + 1} lines)"
        try:
            found = _module_of(block.code)
        except ExtractError as e:
            cut = "" if block.terminated else " and is cut off (no closing fence: the reply " \
                                              "was probably truncated, raise max tokens)"
            outcomes.append(f"{label}: {e.reason}{cut}")
            continue
        if not block.terminated:
            found = ExtractedModule(found.code, found.class_name,
                                    ("took the unterminated final code block to the end of the reply",)
                                    + found.repairs)
        return found
    outcomes.reverse()
    raise ExtractError("no code block holds a usable environment module: " + "; ".join(outcomes[:5]))


def _unfenced(reply: str, rest: str, *, has_fences: bool) -> ExtractedModule:
    """A reply without Python fences is accepted only if it is itself the module (surrounding
    blank space dropped, so the module is the same whatever thinking preceded it)."""
    tries = [rest] if rest == reply or has_fences else [rest, reply]
    reasons = []
    for text in tries:
        try:
            return _module_of(text.strip() + "\n")
        except ExtractError as e:
            reasons.append(e.reason)
    raise ExtractError("no ```python code block in the reply, and the reply is not a module "
                       f"by itself ({reasons[0]}): wrap the module in ```python ... ```")


def _module_of(code: str) -> ExtractedModule:
    try:
        tree, fixed, repairs = parse_with_repair(code)
    except SyntaxError as e:
        where = f"syntax error at line {e.lineno}: " if e.lineno else "does not parse: "
        raise ExtractError(where + str(e.msg)) from e
    try:
        name = find_env_class(tree)
    except ContractError as e:
        raise ExtractError(e.reason) from e
    return ExtractedModule(fixed, name, repairs)


def parse_with_repair(code: str) -> tuple[ast.Module, str, tuple[str, ...]]:
    """Parse ``code``; if it fails inside an f-string, double its stray braces and try again.

    Returns ``(tree, code_as_parsed, repairs)``. Raises the *original* ``SyntaxError`` when the
    code does not parse even after repair (its line numbers refer to what the model wrote).

    >>> _, fixed, repairs = parse_with_repair('x = f"reply {your move} or {}"\\n')
    >>> fixed, repairs
    ('x = f"reply {{your move}} or {{}}"\\n', ('doubled literal braces in the f-string at line 1',))
    >>> parse_with_repair("d = {'a': 1}\\n")[2]
    ()
    """
    try:
        return _parse(code), code, ()
    except SyntaxError as first:
        original = first
    current, repairs = code, []
    error = original
    for _ in range(_MAX_REPAIR_ROUNDS):
        if "f-string" not in (error.msg or "") or error.lineno is None:
            break
        fixed = _repair_fstrings_at(current, error.lineno)
        if fixed == current:
            break
        current = fixed
        repairs.append(f"doubled literal braces in the f-string at line {error.lineno}")
        try:
            return _parse(current), current, tuple(repairs)
        except SyntaxError as e:
            error = e
    raise original


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
