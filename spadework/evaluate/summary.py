"""Figures of one suite's samples: scores with 95% CIs overall, per bucket, per task; the files.

``score`` is the mean over items of each item's mean correctness (pass@1 estimated from all its
samples); errors of every kind are losses, and ``statuses`` counts them. The overall CI
resamples items; a bucket's CI resamples items within each task (see :mod:`.stats`). When every
item scored 0 (or every one 1) the bootstrap interval has zero width, so ``exact95`` adds the
exact Clopper-Pearson bound for that many items (0/120 items: at most 2.5%).
For reasoning-gym suites a ``disjoint`` row repeats the overall figure without the task
families the starter library overlaps.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from spadework.evaluate.items import Sample
from spadework.evaluate.judge import EvalError
from spadework.evaluate.stats import bootstrap_ci, mean, pass_at_k

SAMPLES_FILE = "samples.jsonl"
SUMMARY_FILE = "summary.json"
REPORT_FILE = "summary.md"


def item_scores(samples: Iterable[Sample]) -> dict[str, tuple[str, str, float, int, int]]:
    """item id -> (task, bucket, mean correctness, samples, correct samples), in first-seen order."""
    rows: dict[str, list] = {}
    for s in samples:
        r = rows.setdefault(s.item_id, [s.task, s.bucket, 0, 0])
        r[2] += int(s.correct)
        r[3] += 1
    return {k: (t, b, c / n, n, c) for k, (t, b, c, n) in rows.items()}


def block(samples: Sequence[Sample], *, stratified: bool, seed: int = 0) -> dict[str, Any]:
    """Score, CI and counts of a set of samples (one suite, bucket or task)."""
    items = item_scores(samples)
    values = [v[2] for v in items.values()]
    strata = [v[0] for v in items.values()] if stratified else None
    lo, hi = bootstrap_ci(values, strata, seed=seed)
    out: dict[str, Any] = {"score": round(mean(values), 6), "ci95": [lo, hi], "items": len(items),
                           "samples": len(samples), "correct": sum(s.correct for s in samples)}
    if values and lo == hi and all(v in (0.0, 1.0) for v in values) and len(set(values)) == 1:
        # Every item agrees: the bootstrap has nothing to resample. The exact one-sided 95%
        # (Clopper-Pearson) bound for 0 (or n) successes in n items is 1 - 0.05 ** (1 / n).
        bound = round(1 - 0.05 ** (1 / len(values)), 6)
        out["exact95"] = [0.0, bound] if values[0] == 0.0 else [round(1 - bound, 6), 1.0]
    n = {v[3] for v in items.values()}
    if len(n) == 1 and (k := n.pop()) > 1:
        out[f"pass@{k}"] = round(mean([pass_at_k(k, v[4], k) for v in items.values()]), 6)
    return out


def _task_row(samples: Sequence[Sample]) -> dict[str, Any]:
    items = item_scores(samples)
    return {"score": round(mean([v[2] for v in items.values()]), 6), "items": len(items),
            "samples": len(samples)}


def summarize(samples: Sequence[Sample], *, seed: int = 0,
              disjoint: Sequence[str] | None = None) -> dict[str, Any]:
    """The ``metrics`` part of ``summary.json`` for one suite's samples."""
    by_bucket: dict[str, list[Sample]] = defaultdict(list)
    by_task: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        by_bucket[s.bucket].append(s)
        by_task[s.task].append(s)
    out: dict[str, Any] = {
        "overall": block(samples, stratified=False, seed=seed),
        "buckets": {b: block(v, stratified=True, seed=seed) for b, v in by_bucket.items()},
        "tasks": {t: _task_row(v) for t, v in by_task.items()},
        "statuses": dict(Counter(s.status for s in samples)),
        "finish_reasons": dict(Counter(s.finish_reason or "-" for s in samples)),
        "mean_output_tokens": round(mean([s.output_tokens for s in samples if s.status == "ok"]), 1),
    }
    if disjoint is not None:
        keep = set(disjoint)
        out["disjoint"] = block([s for s in samples if s.task in keep], stratified=False, seed=seed)
    return out


def write_samples(path: Path, samples: Iterable[Sample]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    with tmp.open("w", encoding="utf-8") as f:
        for s in samples:
            f.write(json.dumps(s.to_dict(), ensure_ascii=False) + "\n")
    tmp.replace(path)


def read_samples(path: Path) -> list[Sample]:
    """Rows of a ``samples.jsonl``; a clear error naming the file and line when one is bad."""
    if not path.is_file():
        raise EvalError(f"{path} does not exist: give an eval output folder (or its "
                        f"<suite>/{SAMPLES_FILE})")
    out = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                out.append(Sample.from_dict(json.loads(line)))
            except (json.JSONDecodeError, TypeError) as e:
                raise EvalError(f"{path}:{n} is not a sample row: {e}") from e
            except EvalError as e:
                raise EvalError(f"{path}:{n}: {e.reason}") from e
    return out


def _fmt(b: Mapping[str, Any]) -> str:
    lo, hi = b["ci95"]
    text = f"{100 * b['score']:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"
    if "exact95" in b:
        elo, ehi = b["exact95"]
        text += f" (exact 95%: [{100 * elo:.1f}, {100 * ehi:.1f}])"
    return text


def report_markdown(summary: Mapping[str, Any]) -> str:
    """``summary.md``: the figures a person reads first, in percent with 95% CIs."""
    m = summary["metrics"]
    lines = [f"# {summary['suite']}: {summary.get('model', {}).get('name', '?')}", "",
             f"preset `{summary['preset']}`, seed {summary['seed']}, "
             f"{summary['wall_seconds']:.0f} s wall", "",
             "| scope | score % [95% CI] | items | samples |", "| --- | --- | ---: | ---: |"]
    rows = [("overall", m["overall"])] + sorted(m["buckets"].items())
    if "disjoint" in m:
        rows.append(("disjoint (no starter-library families)", m["disjoint"]))
    for name, b in rows:
        lines.append(f"| {name} | {_fmt(b)} | {b['items']} | {b['samples']} |")
    lines += ["", "Statuses: " + ", ".join(f"{k} {v}" for k, v in sorted(m["statuses"].items())),
              "(every status but ok is counted as a loss).", "",
              "CIs: percentile bootstrap over items (2000 replicates); buckets stratified by task."]
    return "\n".join(lines) + "\n"


def summary_lines(summary: Mapping[str, Any], out: Path) -> list[str]:
    """The closing lines of ``spadework eval``: a row per scope (overall, each bucket, the
    disjoint figure) with its score and 95% CI, then the statuses, seconds and output folder.

    >>> b = {"score": 0.25, "ci95": [0.1, 0.4], "items": 4, "samples": 8}
    >>> s = {"suite": "math", "wall_seconds": 3.2, "metrics": {"overall": b,
    ...      "buckets": {"easy": b}, "statuses": {"ok": 8}}}
    >>> print("\\n".join(summary_lines(s, Path("eval"))))
    overall   25.0%  95% CI [10.0, 40.0]  (4 items, 8 samples)
    easy      25.0%  95% CI [10.0, 40.0]  (4 items, 8 samples)
    statuses: {'ok': 8}; 3 s; eval/math
    """
    m = summary["metrics"]
    rows = [("overall", m["overall"]), *m["buckets"].items(),
            *([("disjoint", m["disjoint"])] if "disjoint" in m else [])]
    width = max(len(name) for name, _ in rows)
    lines = []
    for name, b in rows:
        lo, hi = b["ci95"]
        exact = (f" exact [{100 * b['exact95'][0]:.1f}, {100 * b['exact95'][1]:.1f}]"
                 if "exact95" in b else "")
        lines.append(f"{name:<{width}}  {100 * b['score']:5.1f}%  95% CI [{100 * lo:.1f}, "
                     f"{100 * hi:.1f}]{exact}  ({b['items']} items, {b['samples']} samples)")
    lines.append(f"statuses: {m['statuses']}; {summary['wall_seconds']:.0f} s; "
                 f"{out / summary['suite']}")
    return lines
