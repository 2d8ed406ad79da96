"""Evaluation during a run: the ``[eval]`` config section and the one call the run loop makes.

The loop calls, after finishing iteration ``i``::

    if eval_due(cfg.eval, i):
        figures = evaluate_policy(policy, cfg.eval, run_dir / "eval" / f"iter_{i:04d}",
                                  sandbox=sandbox)
        # figures -> metrics.jsonl under "eval"

Every evaluation of a run uses the same eval seed (``EvalConfig.seed``), so iterations play the
same items with the same per-(item, sample) seeds and ``spadework eval compare`` can pair any
two of them (``run_dir/eval/iter_0003`` against ``run_dir/eval/iter_0007``).

``budget_seconds`` bounds the wall time of one evaluation: suites run in the order given; the
first always runs, and a later suite that would start after the budget is spent is skipped (the
figures say which). The
``cpu`` run preset keeps the budget small so that an evaluation costs a bounded share of a run.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from spadework.evaluate.catalog import make_suite
from spadework.evaluate.judge import Judge
from spadework.evaluate.presets import preset_settings
from spadework.settings.eval import EvalConfig


def eval_due(cfg: EvalConfig, iteration: int) -> bool:
    """Whether to evaluate after (0-based) ``iteration``.

    >>> [eval_due(EvalConfig(every=2), i) for i in range(4)]
    [False, True, False, True]
    >>> eval_due(EvalConfig(), 5)
    False
    """
    return cfg.every > 0 and (iteration + 1) % cfg.every == 0


def evaluate_policy(policy: Any, cfg: EvalConfig, out_dir: str | Path, *,
                    seed: int | None = None, sandbox: Any = None,
                    held_out: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Evaluate ``policy`` on ``cfg.suites``; write each suite under ``out_dir/<suite>/``.

    Returns the figures for ``metrics.jsonl``: ``{"suites": {name: {"score", "ci95", "items",
    "samples", "buckets": {bucket: score}, "statuses": {...}}}, "skipped": [names], "seconds",
    "preset", "seed", "dir"}``. ``seed`` overrides ``cfg.seed``; ``sandbox`` is the loop's
    started sandbox for multi-turn suites (left open); ``held_out`` the run's held-out starters
    (what ``library-heldout`` plays; default its own list).
    """
    # here: keeps numpy out of `spadework --help` (tests/test_package.py)
    from spadework.evaluate.run import evaluate

    eval_seed = cfg.seed if seed is None else seed
    start = time.monotonic()
    figures: dict[str, Any] = {"suites": {}, "skipped": [], "preset": cfg.preset,
                               "seed": eval_seed, "dir": str(out_dir)}
    with Judge() as judge:
        for name in cfg.suites:
            spent = time.monotonic() - start
            if figures["suites"] and cfg.budget_seconds is not None and spent >= cfg.budget_seconds:
                figures["skipped"].append(name)
                continue
            suite = make_suite(name)
            if held_out is not None and hasattr(suite, "held_out"):
                suite = replace(suite, held_out=tuple(held_out))
            s = preset_settings(cfg.preset, suite.kind)
            if cfg.max_items is not None:
                s = replace(s, items=min(s.items or cfg.max_items, cfg.max_items))
            summary = evaluate(policy, suite, out_dir, preset=cfg.preset, settings=s,
                               seed=eval_seed, judge=judge, sandbox=sandbox)
            m = summary["metrics"]
            figures["suites"][name] = {
                **{k: m["overall"][k] for k in ("score", "ci95", "items", "samples")},
                "buckets": {b: v["score"] for b, v in m["buckets"].items()},
                "statuses": m["statuses"], "seconds": summary["wall_seconds"]}
    figures["seconds"] = round(time.monotonic() - start, 1)
    return figures
