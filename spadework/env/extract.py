"""Pull the environment module out of a designer reply.

The designer answers with prose, maybe a ``<think>`` block, and one or more fenced code blocks.
:func:`extract_env_module` returns the one module that defines the environment class, or raises
:class:`~spadework.errors.ExtractError` with a reason a person can act on.

Rules, in order:

1. The reply must be text, non-empty, under a size cap, and not binary junk. A leading
   byte-order mark is dropped (it is encoding, not text).
2. Fenced blocks are found first: backtick or tilde fences (```` ```python ````, ``~~~py``,
   ```` ``` ````); a longer fence needs an equally long closing fence of the same character.
   The language is the first word of the info string, whatever follows it or wraps it
   (```` ```python{cmd=true} ````, ```` ```{python} ````, ```` ```python:env.py ````). A closing fence
   may carry text after it on its line (```` ``` Hope this helps! ````). A ```` ``` ```` line
   inside the module (a board drawn in a triple-quoted string) does not end the block when a
   later closing fence makes the block parse. An opening fence followed at once by another
   opening fence with a language is a stray line and is skipped. An unterminated final fence (a
   truncated reply) runs to the end of the reply and is recorded as a repair; it must then parse.
   When no block gives a module, every fence line with a Python label is tried as an opening
   fence on its own, which finds a block nested in another (```` ````markdown ```` around
   ```` ```python ````) or left behind by a fence that the first pass paired wrongly.
3. Thinking is dropped: ``<think>...</think>`` blocks, an unclosed ``<think>`` (to the end) and a
   prefix that ends in ``</think>`` without an opening tag (chat templates put the opening tag in
   the prompt). Tags inside fenced blocks are code, not thinking.
4. Of the blocks outside thinking, the last one that parses and defines an environment class
   (:func:`~spadework.env.contract.find_env_class`) wins. A reply without fences that is itself
   a module with an environment class is accepted, and so is one whose module follows lines of
   prose (and is followed by some), when the prose can be cut off at line boundaries: the
   prose before holds no code, the prose after has no indented line.
5. A block that does not parse gets two kinds of automatic repair, each recorded: non-breaking
   and other wide spaces become plain spaces (byte-order marks and zero-width characters are
   removed), and the f-string that the ``SyntaxError`` points at has its literal braces doubled
   where they cannot be replacement fields (``f"answer as \\\\boxed{your move}"``), then it is
   parsed again.
6. A module that parses gets two more, each recorded: a value the environment class stores
   under one of its method names (``self.step = 3``) is renamed (:func:`~spadework.env.repair.
   unshadow_methods`), and the kit or standard imports it uses and left out are added.

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

from spadework.env import pyparse
from spadework.env.contract import find_env_class
from spadework.env.reference import PRELUDE, _insert_at, missing_prelude
from spadework.env.repair import parse_with_repair, unshadow_methods
from spadework.errors import ContractError, ExtractError

__all__ = ["MAX_REPLY_CHARS", "PYTHON_LANGS", "ExtractedModule", "extract_env_module", "parse_with_repair"]

#: Largest reply accepted, in characters (a 20,000-token reply is about 80,000 characters).
MAX_REPLY_CHARS = 500_000

#: Info strings that mark a block as Python; an empty info string counts too.
PYTHON_LANGS = frozenset({"", "python", "py", "python3", "py3"})

_MAX_CLOSING_TRIES = 12
_MAX_LOOSE_OPENERS = 64
_MAX_PROSE_STARTS = 40
_FENCE_LINE = re.compile(r"^([ \t]*)(`{3,}|~{3,})([^\n]*)$", re.M)
_LANG = re.compile(r"[{.\s]*([A-Za-z0-9_+#-]*)")
_PROSE_TAIL = re.compile(r"\s|[.!?:;,)\]]$")  # text after a closing fence, not a language
#: Lines that can start a module; prose before an unfenced module must hold none of _CODE_IN.
_CODE_START = re.compile(r"(import\s|from\s+[\w.]+\s+import\s|class\s+\w|def\s+\w|async\s+def\s|@\w|"
                         r"\"\"\"|'''|#|[A-Za-z_]\w*\s*(:[^=\n]*)?=[^=])")
_CODE_IN = re.compile(r"\bimport\s+\w|^\s*(def|class)\s+\w+\s*[(:]|^\s*(return|self\.)")
_THINK_TAG = re.compile(r"<(/?)think>")
_JUNK = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffd]")


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
class _Fence:
    """One line that starts with three or more backticks or tildes."""

    start: int  # offset of the line
    end: int  # offset just past the line and its newline
    indent: str
    char: str
    length: int
    info: str  # the text after the fence, stripped

    @property
    def lang(self) -> str:
        """The first word of the info string, lowercased ("python" of ``{.python .x}``)."""
        return _LANG.match(self.info).group(1).lower()  # type: ignore[union-attr]

    @property
    def can_open(self) -> bool:
        return not (self.char == "`" and "`" in self.info)  # CommonMark: no backticks in the info

    def closes(self, opener: _Fence, *, loose: bool) -> bool:
        """Whether this line closes ``opener``'s block: the same character, at least as long, and
        nothing after it (or, when ``loose``, prose after it on the line)."""
        if self.char != opener.char or self.length < opener.length:
            return False
        return not self.info or (loose and _PROSE_TAIL.search(self.info) is not None)


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
    reply = reply.removeprefix("\ufeff")
    fences = _fence_lines(reply)
    blocks = _fenced_blocks(reply, fences)
    spans, unclosed = _thinking_spans(reply, blocks)
    rest = _without(reply, spans)
    if spans and not rest.strip():
        why = "<think> was never closed, so there is no code after it" if unclosed else (
            "there is nothing after </think>")
        raise ExtractError(f"the reply is all thinking: {why} "
                           "(raise the designer's max tokens or turn thinking off)")
    span_starts = [a for a, _ in spans]

    def outside(found: list[_Block]) -> list[_Block]:
        return [b for b in found if b.lang in PYTHON_LANGS and not _inside(b.start, spans, span_starts)]

    candidates = outside(blocks)
    first_error: ExtractError | None = None
    if candidates:
        try:
            return _choose(candidates)
        except ExtractError as e:
            first_error = e
    loose = outside(_loose_blocks(reply, fences))
    if loose:
        try:
            return _choose(loose)
        except ExtractError as e:
            first_error = first_error or e
    if first_error is not None:
        raise first_error
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


def _fence_lines(text: str) -> list[_Fence]:
    return [_Fence(m.start(), min(m.end() + 1, len(text)), m.group(1), m.group(2)[0],
                   len(m.group(2)), m.group(3).strip())
            for m in _FENCE_LINE.finditer(text)]


def _fenced_blocks(text: str, fences: list[_Fence]) -> list[_Block]:
    """Fenced blocks in order, with parse-aware closing fences for Python blocks."""
    blocks: list[_Block] = []
    i = 0
    while i < len(fences):
        opener = fences[i]
        if not opener.can_open or _stray(text, fences, i):
            i += 1
            continue
        block, i = _block_from(text, fences, i)
        blocks.append(block)
    return blocks


def _stray(text: str, fences: list[_Fence], i: int) -> bool:
    """An opening fence followed, with only blank lines between, by an opening fence that names
    a language: the first is a stray line, not an (empty) block."""
    if i + 1 >= len(fences):
        return False
    nxt = fences[i + 1]
    return bool(nxt.info) and nxt.can_open and not text[fences[i].end:nxt.start].strip()


def _block_from(text: str, fences: list[_Fence], i: int) -> tuple[_Block, int]:
    """The block opened by fence ``i``, and the index of the first fence after it. A block
    closes at its first closing fence (bare, or with prose after it on the line); a Python block
    at the first of its next few closing fences at which it parses, if any does."""
    opener = fences[i]
    lang = opener.lang
    closers = (j for j in range(i + 1, len(fences)) if fences[j].closes(opener, loose=True))
    first = next(closers, None)
    if first is None:
        code = _dedent(text[opener.end:], opener.indent)
        return _Block(opener.start, len(text), lang, code, terminated=False), len(fences)
    chosen = first
    if lang in PYTHON_LANGS:
        j: int | None = first
        for _ in range(_MAX_CLOSING_TRIES):
            if j is None:
                break
            if _parses(_dedent(text[opener.end:fences[j].start], opener.indent)):
                chosen = j
                break
            j = next(closers, None)
    code = _dedent(text[opener.end:fences[chosen].start], opener.indent)
    return _Block(opener.start, fences[chosen].end, lang, code, terminated=True), chosen + 1


def _loose_blocks(text: str, fences: list[_Fence]) -> list[_Block]:
    """The second pass: each fence line with a Python label, as an opening fence on its own,
    up to the first later fence line (of any kind) at which it parses, else the end of the
    reply. Catches a block nested in another and one behind a fence the first pass misread."""
    openers = [i for i, f in enumerate(fences) if f.info and f.lang in PYTHON_LANGS and f.can_open]
    blocks = []
    for i in openers[-_MAX_LOOSE_OPENERS:]:
        opener = fences[i]
        ends = [f.start for f in fences[i + 1:i + 1 + _MAX_CLOSING_TRIES]]
        for k, end in enumerate(ends):
            code = _dedent(text[opener.end:end], opener.indent)
            if _parses(code):
                blocks.append(_Block(opener.start, fences[i + 1 + k].end, opener.lang, code, True))
                break
        else:
            code = _dedent(text[opener.end:], opener.indent)
            blocks.append(_Block(opener.start, len(text), opener.lang, code, terminated=not ends))
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
    blank space dropped, so the module is the same whatever thinking preceded it), or if it is
    lines of prose around such a module (:func:`_between_prose`)."""
    tries = [rest] if rest == reply or has_fences else [rest, reply]
    reasons = []
    for text in tries:
        try:
            return _module_of(text.strip() + "\n")
        except ExtractError as e:
            reasons.append(e.reason)
    for text in tries:
        found = _between_prose(text.strip() + "\n")
        if found is not None:
            return found
    raise ExtractError("no ```python code block in the reply, and the reply is not a module "
                       f"by itself ({reasons[0]}): wrap the module in ```python ... ```")


def _between_prose(text: str) -> ExtractedModule | None:
    """The module in ``text`` after lines of prose (and before more prose), or None.

    It starts at the first line that can start a module (an import, a class, a def, a comment,
    ...) after which the rest parses, as long as no line before it holds code (a line such as
    ``Sure! import random`` means the module cannot be cut off cleanly). Prose after the module
    is cut where the parser first fails, if that line is not indented and no indented line
    follows (so a broken method is never cut away to make the rest parse).
    """
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    starts = 0
    for k, line in enumerate(lines):
        if starts >= _MAX_PROSE_STARTS:
            return None
        if not _CODE_START.match(line):
            if _CODE_IN.search(line):
                return None
            continue
        starts += 1
        found = _module_or_cut(lines[k:])
        if found is not None:
            return found
    return None


def _module_or_cut(lines: list[str]) -> ExtractedModule | None:
    code = "".join(lines)
    try:
        return _module_of(code)
    except ExtractError as e:
        error = e.__cause__
    if not isinstance(error, SyntaxError) or not error.lineno:
        return None
    cut = error.lineno - 1
    tail = lines[cut:]
    if not tail or not tail[0].strip() or any(line[:1] in (" ", "\t") for line in tail):
        return None
    try:
        return _module_of("".join(lines[:cut]).rstrip() + "\n")
    except ExtractError:
        return None


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
    fixed, renamed = unshadow_methods(fixed, tree, name)
    if renamed:
        tree = pyparse.parse(fixed)
    fixed, added = add_missing_imports(fixed, tree)
    return ExtractedModule(fixed, name, repairs + renamed + added)


#: Imports a reply may leave out that can be added without guessing: the sandbox's kits.
KIT_IMPORTS = {"GameEnv": "from gameenv import GameEnv", "ToolEnv": "from toolenv import ToolEnv"}


def add_missing_imports(code: str, tree: ast.Module) -> tuple[str, tuple[str, ...]]:
    """``code`` with the import statements it needs but left out, and a repair note for each:
    a kit base class (``GameEnv``, ``ToolEnv``) or a standard module or name the reference
    implementation pre-filled (``random``, ``math``, ``deque``, ...; :data:`spadework.env.
    reference.PRELUDE`) that the module uses and never binds. Small models drop them when they
    rewrite an example (one design attempt in 40 of a 1.5B benchmark raised ``NameError: name
    'GameEnv' is not defined``; earlier, a dropped ``import re`` cost 4 of 7).

    >>> fixed, notes = add_missing_imports("class A(GameEnv):\\n    pass\\n",
    ...                                    ast.parse("class A(GameEnv):\\n    pass\\n"))
    >>> fixed.splitlines()[0], notes
    ('from gameenv import GameEnv', ('added the missing import: from gameenv import GameEnv',))
    """
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    bound = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
    imports = [KIT_IMPORTS[n] for n in sorted((used & KIT_IMPORTS.keys()) - bound)]
    imports += [PRELUDE[n] for n in missing_prelude(tree)]
    if not imports:
        return code, ()
    lines = code.splitlines(keepends=True)
    at = _insert_at(tree)
    lines[at:at] = [i + "\n" for i in imports]
    return "".join(lines), tuple(f"added the missing import: {i}" for i in imports)
