"""``--data PATH`` suites: benchmarks that no package carries, read from a local file.

Rows come from JSONL, a JSON list, parquet (needs pyarrow) or a ``datasets`` folder saved with
``save_to_disk``. Field names follow the benchmarks' public releases:

- ``aime``: ``problem``/``question``/``prompt`` and ``answer``/``label``; scored like ``math``.
- ``gpqa``: ``Question``, ``Correct Answer``, ``Incorrect Answer 1..3`` (the GPQA CSV's names).
  The options are shuffled as the reference does, by one ``random.Random(42)`` advanced across
  the rows in file order; the answer is ``\\boxed{LETTER}``, else "answer is X" / "Answer: X".

LiveCodeBench is not offered: its private tests ship pickled, and unpickling a downloaded file
runs its code (see ``catalog.UNSUPPORTED``).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spadework.env.actions import extract_boxed, strip_thinking
from spadework.evaluate.items import EvalItem, Sample, Scored
from spadework.evaluate.judge import EvalError
from spadework.evaluate.mathsuite import clean_gold, fixed_subset, score_math
from spadework.evaluate.rg import prompt_of
from spadework.evaluate.suite import RunContext, play_single_turn

LETTERS = "ABCD"


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSONL, JSON list, parquet file or ``datasets`` folder; EvalError says what is wrong."""
    if not path.exists():
        raise EvalError(f"--data {path} does not exist")
    try:
        if path.is_dir():
            try:
                import datasets
            except ImportError as e:
                raise EvalError("a datasets folder needs the `datasets` package") from e
            ds = datasets.load_from_disk(str(path))
            if isinstance(ds, datasets.DatasetDict):
                ds = ds[next(iter(ds))]
            return [dict(r) for r in ds]
        if path.suffix == ".parquet":
            try:
                import pyarrow.parquet as pq
            except ImportError as e:
                raise EvalError("reading parquet needs pyarrow: pip install pyarrow") from e
            return pq.read_table(path).to_pylist()
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".json":
            rows = json.loads(text)
            return rows if isinstance(rows, list) else list(rows.values())
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except (OSError, ValueError) as e:
        raise EvalError(f"cannot read --data {path}: {e}") from e


def _field(row: dict, names: tuple[str, ...], path: Path, n: int) -> str:
    for name in names:
        if row.get(name) is not None:
            return str(row[name])
    raise EvalError(f"{path} row {n} has none of the fields {', '.join(names)}")


def gpqa_answer(reply: str) -> str | None:
    """The letter of a multiple-choice reply: last box, else "answer is X", else "Answer: X".

    >>> gpqa_answer(r"... \\boxed{C}"), gpqa_answer("so the answer is (b)."), gpqa_answer("none")
    ('C', 'B', None)
    """
    text = strip_thinking(reply)
    boxed = extract_boxed(text)
    if boxed:
        m = re.fullmatch(r"\(?([A-Da-d])\)?(?:[.:].*)?", boxed.strip(), re.S)
        if m:
            return m.group(1).upper()
    for pattern in (r"answer is\s*\(?([A-Da-d])\b", r"Answer:\s*\(?([A-Da-d])\b"):
        hits = re.findall(pattern, text)
        if hits:
            return hits[-1].upper()
    return None


@dataclass(frozen=True)
class LocalSuite:
    """A ``--data`` suite: ``aime`` or ``gpqa`` from ``path``."""

    name: str
    path: Path
    kind: str = "math"
    data: tuple[str, ...] = ()

    def items(self) -> list[EvalItem]:
        rows = read_rows(self.path)
        if not rows:
            raise EvalError(f"--data {self.path} holds no rows")
        items = []
        shuffle = random.Random(42)
        for n, row in enumerate(rows):
            if self.name == "aime":
                q = _field(row, ("problem", "question", "prompt"), self.path, n)
                gold = clean_gold(_field(row, ("answer", "label"), self.path, n))
                items.append(EvalItem(self.name, "aime", "aime", f"aime/{row.get('id', n)}", n,
                                      messages=({"role": "user", "content": prompt_of(q)},),
                                      gold=gold))
                continue
            q = _field(row, ("Question",), self.path, n)
            right = _field(row, ("Correct Answer",), self.path, n).strip()
            options = [right] + [_field(row, (f"Incorrect Answer {k}",), self.path, n).strip()
                                 for k in (1, 2, 3)]
            shuffle.shuffle(options)
            body = "\n".join(f"{LETTERS[k]}) {o}" for k, o in enumerate(options))
            text = (f"{q}\n\n{body}\n\nPlease reason step by step, and put the letter of your "
                    "final answer within \\boxed{}.")
            items.append(EvalItem(self.name, "gpqa", "gpqa", f"gpqa/{n}", n,
                                  messages=({"role": "user", "content": text},),
                                  gold=LETTERS[options.index(right)]))
        return items

    def run(self, ctx: RunContext) -> list[Sample]:
        items = fixed_subset(self.items(), ctx.settings.items, f"{self.name}-subset")
        if self.name == "aime":
            return play_single_turn(ctx, items, lambda it, reply: score_math(ctx, it, reply))

        def score(item: EvalItem, reply: str) -> Scored:
            letter = gpqa_answer(reply)
            return Scored(letter, float(letter == item.gold), letter == item.gold)

        return play_single_turn(ctx, items, score)


def local_suite(name: str, path: Path | None) -> LocalSuite:
    """The ``--data`` suite ``name`` over ``path``."""
    if path is None:
        raise EvalError(f"suite {name!r} needs --data PATH")
    if name not in ("aime", "gpqa"):
        raise EvalError(f"no local loader for {name!r}; use aime or gpqa")
    return LocalSuite(name, Path(path), kind="math" if name == "aime" else "choice")
