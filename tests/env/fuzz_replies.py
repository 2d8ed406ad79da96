"""Seeded designer replies built from the starter environments by the mistakes models make:
truncation, deleted lines, indentation changes, stray unicode, duplicated blocks, one-character
edits of numbers and operators, wrapped in prose, thinking, nested or odd fences.

Case ``i`` of seed ``s`` is always the same reply (:func:`fuzz_case` draws everything from
``Random(f"{s}:{i}")``), so a failure names a case that can be replayed on its own.
"""

from __future__ import annotations

import io
import random
import re
import tokenize
from collections.abc import Callable
from dataclasses import dataclass

from spadework.types import EnvSource

#: Characters that text tools and tokenizers put where they do not belong.
STRAY = ("\u00a0", "\ufeff", "\u200b", "\u3000", "\u202f", "é", "→", "“", "”", "🙂", "\u2028", "\x0c", "\t")

#: Operator edits: the slips that keep code running but change what it means.
EDITS = {"<": ">", ">": "<", "<=": "<", ">=": ">", "==": "!=", "!=": "==", "+": "-", "-": "+",
         "*": "+", "%": "//", "//": "%", "+=": "-="}


@dataclass(frozen=True)
class FuzzCase:
    """One generated reply: which starter it came from, what was done to it, the text."""

    index: int
    starter: str
    mutations: tuple[str, ...]
    wrapper: str
    reply: str


def _lines(code: str) -> list[str]:
    return code.splitlines(keepends=True)


def truncate(code: str, rng: random.Random) -> str:
    return code[: rng.randint(len(code) // 3, len(code) - 1)]


def delete_lines(code: str, rng: random.Random) -> str:
    lines = _lines(code)
    for _ in range(rng.randint(1, 3)):
        if len(lines) > 1:
            del lines[rng.randrange(len(lines))]
    return "".join(lines)


def reindent(code: str, rng: random.Random) -> str:
    lines = _lines(code)
    i = rng.randrange(len(lines))
    if rng.random() < 0.5 and i + 1 < len(lines):
        lines[i], lines[i + 1] = lines[i + 1], lines[i]
    else:
        body = lines[i].lstrip(" ")
        depth = len(lines[i]) - len(body) + rng.choice((-4, 4, -1, 2))
        lines[i] = " " * max(0, depth) + body
    return "".join(lines)


def stray_unicode(code: str, rng: random.Random) -> str:
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(code) + 1)
        code = code[:i] + rng.choice(STRAY) + code[i:]
    return code


def duplicate_block(code: str, rng: random.Random) -> str:
    lines = _lines(code)
    a = rng.randrange(len(lines))
    b = min(len(lines), a + rng.randint(2, 12))
    return "".join(lines[:b] + lines[a:b] + lines[b:])


def edit_char(code: str, rng: random.Random) -> str:
    """One number or operator token changed (a number by one, ``<`` to ``>``, ``+`` to ``-``,
    ...): code that still parses and runs, and now means something else. Falls back to any digit
    or operator character when the code no longer tokenizes."""
    try:
        spots = [(a, b, s) for a, b, s, kind in _tokens(code)
                 if kind == tokenize.NUMBER and s.isdigit() or kind == tokenize.OP and s in EDITS]
    except (tokenize.TokenError, SyntaxError):
        spots = [(m.start(), m.end(), m.group()) for m in re.finditer(r"[0-9]|[<>+\-*%]", code)]
    if not spots:
        return code
    a, b, text = rng.choice(spots)
    new = str(max(0, int(text) + rng.choice((1, -1)))) if text.isdigit() else EDITS[text]
    return code[:a] + new + code[b:]


def _tokens(code: str) -> list[tuple[int, int, str, int]]:
    """(start offset, end offset, text, type) of each token."""
    starts = [0]
    for line in code.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return [(starts[t.start[0] - 1] + t.start[1], starts[t.end[0] - 1] + t.end[1], t.string, t.type)
            for t in tokenize.generate_tokens(io.StringIO(code).readline)]


MUTATIONS: dict[str, Callable[[str, random.Random], str]] = {
    "truncate": truncate,
    "delete_lines": delete_lines,
    "reindent": reindent,
    "stray_unicode": stray_unicode,
    "duplicate_block": duplicate_block,
    "edit_char": edit_char,
}


def _fence(code: str, opening: str = "```python", closing: str = "```") -> str:
    return f"{opening}\n{code}{'' if code.endswith(chr(10)) else chr(10)}{closing}"


WRAPPERS: dict[str, Callable[[str, str, random.Random], str]] = {
    "fenced": lambda code, draft, rng: f"Here is the environment.\n\n{_fence(code)}\nIt is grounded in the text.",
    "think": lambda code, draft, rng: f"<think>\nA first draft:\n{_fence(draft)}\nBetter now.\n</think>\n{_fence(code)}\n",
    "open_think": lambda code, draft, rng: f"Let me plan.\n{_fence(draft)}\n</think>\n\n{_fence(code)}",
    "unclosed_think": lambda code, draft, rng: f"<think>\nThe game could be:\n{_fence(code)}",
    "nested": lambda code, draft, rng: f"````markdown\nenv.py:\n{_fence(code)}\n````\n",
    "stray_fence": lambda code, draft, rng: f"Here:\n```\n{_fence(code)}\n",
    "tilde": lambda code, draft, rng: _fence(code, "~~~python", "~~~"),
    "junk_info": lambda code, draft, rng: _fence(code, "```python{cmd=true}") + "\n",
    "after_fence": lambda code, draft, rng: _fence(code, closing="``` That is the whole module.") + "\n",
    "unfenced": lambda code, draft, rng: f"Here it is:\n\n{code}\n\nGood luck!\n",
    "two_blocks": lambda code, draft, rng: f"{_fence(draft)}\nFixed version:\n{_fence(code)}\n",
    "bom": lambda code, draft, rng: "\ufeff" + _fence(code),
}


#: How often each mutation is drawn: token edits most, since they are the ones a checker can
#: pass while the environment's solution() no longer wins (the others mostly break the code).
WEIGHTS = {"edit_char": 5, "truncate": 1, "delete_lines": 1, "reindent": 1, "stray_unicode": 1,
           "duplicate_block": 1}


def fuzz_case(starters: list[EnvSource], seed: int, index: int) -> FuzzCase:
    """Reply ``index`` of seed ``seed``: a starter, none to three mutations (one in eight gets
    none, so that every wrapper also meets code that should pass), a draft mutated on its own, a
    wrapper."""
    rng = random.Random(f"{seed}:{index}")
    starter = rng.choice(starters)
    n = rng.choice((1, 1, 1, 1, 2, 3)) if rng.random() >= 0.125 else 0
    kinds = sorted(WEIGHTS)
    names = tuple(rng.choices(kinds, [WEIGHTS[k] for k in kinds])[0] for _ in range(n))
    code = starter.code
    for name in names:
        code = MUTATIONS[name](code, rng)
    draft = MUTATIONS[rng.choice(sorted(MUTATIONS))](starter.code, rng)
    wrapper = rng.choice(sorted(WRAPPERS))
    return FuzzCase(index, starter.name, names, wrapper, WRAPPERS[wrapper](code, draft, rng))
