"""The one parser of the games answer format, ``\\boxed{...}`` (standard library only; the host's
:mod:`spadework.env.actions` and the sandbox's ``gameenv`` both use it)."""

from __future__ import annotations

import re

_BOX_OPEN = re.compile(r"\\boxed\s*\{")
_BRACE = re.compile(r"[{}]")


def extract_boxed(text: str) -> str | None:
    """The content of the last complete ``\\boxed{...}``, stripped, or None when there is none.

    Braces are matched, so nested groups stay (``\\boxed{\\frac{1}{2}}`` gives ``\\frac{1}{2}``);
    outer brace layers that wrap the whole content are removed (``\\boxed{{7}}`` gives ``7``);
    ``\\boxed {x}`` counts. "Last" means the box that opens last among those that close, so an
    unclosed final box (a truncated reply) falls back to the previous complete one. Escaped
    braces ``\\{`` ``\\}`` count like plain ones: LaTeX answers pair them (``\\{1, 2\\}``).
    One linear pass, so huge replies are cheap.

    >>> extract_boxed(r"First \\boxed{\\frac{1}{2}}, then \\boxed{3}.")
    '3'
    >>> extract_boxed(r"The answer is \\boxed{\\frac{1}{2}}")
    '\\\\frac{1}{2}'
    >>> extract_boxed(r"\\boxed{{7}} and then \\boxed{8")
    '7'
    >>> extract_boxed("no box here") is None
    True
    """
    if not isinstance(text, str) or "\\boxed" not in text:
        return None
    box_braces = {m.end() - 1: m.start() for m in _BOX_OPEN.finditer(text)}
    stack: list[int] = []
    best_start, best = -1, None
    for m in _BRACE.finditer(text):
        if m.group() == "{":
            stack.append(m.start())
        elif stack:
            opened = stack.pop()
            start = box_braces.get(opened)
            if start is not None and start > best_start:
                best_start, best = start, text[opened + 1:m.start()]
    return None if best is None else unwrap(best)


def boxes(text: str) -> list[str]:
    """The content of every complete ``\\boxed{...}`` in ``text``, in order of opening.

    >>> boxes(r"like \\boxed{3 + 4} or \\boxed{undo}; not \\boxed{")
    ['3 + 4', 'undo']
    """
    return [unwrap(text[opened + 1:closed]) for _, opened, closed in _box_spans(text)]


def empty_boxes(text: str) -> str:
    """``text`` with the content of every complete box removed (a box inside another goes with
    it): what an observation says outside its boxes.

    >>> empty_boxes(r"Add them, for example \\boxed{6 8} or \\boxed {\\frac{1}{2}}; not \\boxed{")
    'Add them, for example \\\\boxed{} or \\\\boxed {}; not \\\\boxed{'
    """
    out, last = [], 0
    for _, opened, closed in _box_spans(text):
        if opened >= last:  # not inside a box already emptied
            out.append(text[last:opened + 1])
            last = closed
    return "".join(out) + text[last:]


def _box_spans(text: str) -> list[tuple[int, int, int]]:
    """``(start, opening brace, closing brace)`` of every complete box in ``text``, in order of
    opening (braces matched, so a box may hold braces)."""
    if not isinstance(text, str) or "\\boxed" not in text:
        return []
    box_braces = {m.end() - 1: m.start() for m in _BOX_OPEN.finditer(text)}
    stack: list[int] = []
    found: list[tuple[int, int, int]] = []
    for m in _BRACE.finditer(text):
        if m.group() == "{":
            stack.append(m.start())
        elif stack:
            opened = stack.pop()
            if opened in box_braces:
                found.append((box_braces[opened], opened, m.start()))
    return sorted(found)


def unwrap(content: str) -> str:
    """Strip whitespace and every outer brace layer that spans the whole content.

    >>> unwrap(" {{ x }} "), unwrap("{a}{b}")
    ('x', '{a}{b}')
    """
    content = content.strip()
    while content.startswith("{") and closing_of_first(content) == len(content) - 1:
        content = content[1:-1].strip()
    return content


def closing_of_first(s: str) -> int | None:
    """The index of the brace that closes the first one opened in ``s`` (None: never closed)."""
    depth = 0
    for m in _BRACE.finditer(s):
        depth += 1 if m.group() == "{" else -1
        if depth == 0:
            return m.start()
    return None


def box(move: object) -> str:
    """A move written as the agent writes it.

    >>> box(12), box("3 + 4")
    ('\\\\boxed{12}', '\\\\boxed{3 + 4}')
    """
    return "\\boxed{" + str(move) + "}"


#: Words that stand for a move rather than being one (``\boxed{N}``, ``\boxed{your answer}``).
#: Small models copy such placeholders literally as their move
#: (``../shared/reference/small-agent-probe.md``: ``\boxed{N}`` in 8 of 10 terse plays).
PLACEHOLDER_WORDS = frozenset({
    "a", "an", "the", "your", "my", "final", "next", "here", "some", "something", "n", "x", "y",
    "k", "m", "number", "num", "numbers", "answer", "move", "guess", "value", "word", "letter",
    "digit", "digits", "integer", "int", "result", "choice", "option", "action", "text",
    "reply", "solution", "op", "operator", "operation", "expression", "direction", "coordinates",
    "position", "name", "item", "list", "sequence", "code", "string", "whole", "positive",
})
#: Single capital letters that are placeholders (``\boxed{N}``); others (``\boxed{B}``) name a
#: choice and are real moves.
PLACEHOLDER_CAPITALS = frozenset("NXYKM")
_TOKEN = re.compile(r"[A-Za-z]+|\d+")


def is_placeholder(content: str) -> bool:
    """Whether a box's content stands for a move instead of being a concrete one: empty, an
    ellipsis, an angle-bracketed name, only punctuation, or (without any digit) only words of
    :data:`PLACEHOLDER_WORDS`, single lower-case letters and placeholder capitals. A heuristic for what small models copy;
    anything with a digit or a real word counts as concrete.

    >>> [is_placeholder(c) for c in ("N", "...", "<answer>", "your answer", "number", "", "?", "d")]
    [True, True, True, True, True, True, True, True]
    >>> [is_placeholder(c) for c in ("5", "3 + 4", "up", "B", "weigh 1 2 vs 3 4", "undo")]
    [False, False, False, False, False, False]
    """
    text = content.strip()
    if not text or "..." in text or "\u2026" in text or "<" in text or ">" in text:
        return True
    tokens = _TOKEN.findall(text)
    if not tokens:
        return True
    if any(t.isdigit() for t in tokens):
        return False
    return all(t in PLACEHOLDER_CAPITALS if len(t) == 1 and t.isupper()
               else len(t) == 1 or t.lower() in PLACEHOLDER_WORDS for t in tokens)
