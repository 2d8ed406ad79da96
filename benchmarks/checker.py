"""Checker throughput over the starter library: environments validated per second.

Figure: all stages with one Sandbox shared by every candidate (what the loop does). Baselines
from the same run: the same check with a fresh Sandbox per candidate (zygote start included),
and the static stage alone. Passes are interleaved and the median pass is reported, so the
ratios hold on a noisy machine even where absolute times do not.

The solvable stage's cost: the default check (64 play-style seeds) against the same check with
5 seeds (the former command-line default), the stage's share of a default check, and what
``solution_losses`` costs per seed (what the loop pays to replay solution() on the instances
it plays).

The comparison of levels (``same_levels``: every level traced on the determinism seeds, so that
levels giving one game count as one): the default check against the same check with the
comparison left out, per environment, interleaved.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/checker.py [--passes 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from spadework.env.checker import CheckConfig, check, solution_losses, solvable_seeds  # noqa: E402
from spadework.env.static import check_static  # noqa: E402
from spadework.library import starter_envs  # noqa: E402
from spadework.sandbox import Limits, Sandbox  # noqa: E402


def shared(envs, limits) -> tuple[float, bool]:
    start = time.perf_counter()
    with Sandbox(limits) as sb:
        ok = all(check(e.code, sandbox=sb).ok for e in envs)
    return time.perf_counter() - start, ok


def fresh(envs, limits) -> tuple[float, bool]:
    start = time.perf_counter()
    ok = True
    for e in envs:
        with Sandbox(limits) as sb:
            ok &= check(e.code, sandbox=sb).ok
    return time.perf_counter() - start, ok


def static_only(envs) -> float:
    start = time.perf_counter()
    for e in envs:
        check_static(e.code)
    return time.perf_counter() - start


def seeds_cost(envs, limits) -> dict[str, float]:
    """Seconds for the library checked with 5 and with the default seeds, the solvable stage's
    seconds within the latter, and seconds of solution_losses over the default seeds."""
    cfg = CheckConfig()
    out = {"check_5_seeds": 0.0, "check_default_seeds": 0.0, "solvable_stage": 0.0, "replay": 0.0}
    with Sandbox(limits) as sb:
        for e in envs:
            start = time.perf_counter()
            check(e.code, sandbox=sb, seeds=5, module=True)
            out["check_5_seeds"] += time.perf_counter() - start
            start = time.perf_counter()
            report = check(e.code, sandbox=sb, module=True)
            out["check_default_seeds"] += time.perf_counter() - start
            out["solvable_stage"] += sum(r.seconds for r in report.results if r.stage == "solvable")
            seeds = solvable_seeds(1, e.env_id, cfg.solvable_seeds)
            start = time.perf_counter()
            solution_losses(lambda e=e: sb.load(e.code, max_turns=cfg.max_turns, class_name=e.class_name), seeds, cfg)
            out["replay"] += time.perf_counter() - start
    return out


def same_levels_cost(envs, limits) -> dict[str, float]:
    """Seconds for the library checked as the loop checks it and with the levels' comparison
    left out (``same_levels`` replaced by one that finds nothing), each environment both ways."""
    import spadework.env.checker as checker

    compare = checker.same_levels
    out = {"check_with_level_comparison": 0.0, "check_without_level_comparison": 0.0}
    with Sandbox(limits) as sb:
        for e in envs:
            for key, fn in (("check_with_level_comparison", compare),
                            ("check_without_level_comparison", lambda *a, **k: None)):
                checker.same_levels = fn
                try:
                    start = time.perf_counter()
                    check(e.code, sandbox=sb, module=True)
                    out[key] += time.perf_counter() - start
                finally:
                    checker.same_levels = compare
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    envs = starter_envs()
    limits = Limits()
    times: dict[str, list[float]] = {"shared": [], "fresh": [], "static": [], "check_5_seeds": [],
                                     "check_default_seeds": [], "solvable_stage": [], "replay": [],
                                     "check_with_level_comparison": [],
                                     "check_without_level_comparison": []}
    valid = True
    for _ in range(args.passes):
        t, ok = shared(envs, limits)
        times["shared"].append(t)
        t2, ok2 = fresh(envs, limits)
        times["fresh"].append(t2)
        times["static"].append(static_only(envs))
        for k, v in {**seeds_cost(envs, limits), **same_levels_cost(envs, limits)}.items():
            times[k].append(v)
        valid &= ok and ok2
    med = {k: statistics.median(v) for k, v in times.items()}
    n = len(envs)
    n_seeds = CheckConfig().solvable_seeds
    print(json.dumps({
        "benchmark": "checker_throughput",
        "envs": n,
        "passes": args.passes,
        "all_valid": valid,
        "shared_sandbox_envs_per_s": round(n / med["shared"], 2),
        "fresh_sandbox_envs_per_s": round(n / med["fresh"], 2),
        "static_only_envs_per_s": round(n / med["static"], 1),
        "shared_vs_fresh_speedup": round(med["fresh"] / med["shared"], 2),
        "full_check_cost_vs_static": round(med["shared"] / med["static"], 1),
        "solvable_seeds": n_seeds,
        "check_default_vs_5_seeds": round(med["check_default_seeds"] / med["check_5_seeds"], 2),
        "solvable_share_of_default_check": round(med["solvable_stage"] / med["check_default_seeds"], 2),
        "replay_ms_per_seed": round(1000 * med["replay"] / (n * n_seeds), 2),
        "level_comparison_cost": round(med["check_with_level_comparison"]
                                       / med["check_without_level_comparison"] - 1, 3),
        "median_seconds": {k: round(v, 4) for k, v in med.items()},
    }, indent=2))


if __name__ == "__main__":
    main()
