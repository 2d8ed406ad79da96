"""Checker throughput over the starter library: environments validated per second.

Figure: all stages with one Sandbox shared by every candidate (what the loop does). Baselines
from the same run: the same check with a fresh Sandbox per candidate (zygote start included),
and the static stage alone. Passes are interleaved and the median pass is reported, so the
ratios hold on a noisy machine even where absolute times do not.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/checker.py [--passes 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from spadework.env.checker import check  # noqa: E402
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    envs = starter_envs()
    limits = Limits()
    times: dict[str, list[float]] = {"shared": [], "fresh": [], "static": []}
    valid = True
    for _ in range(args.passes):
        t, ok = shared(envs, limits)
        times["shared"].append(t)
        t2, ok2 = fresh(envs, limits)
        times["fresh"].append(t2)
        times["static"].append(static_only(envs))
        valid &= ok and ok2
    med = {k: statistics.median(v) for k, v in times.items()}
    n = len(envs)
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
        "median_seconds": {k: round(v, 4) for k, v in med.items()},
    }, indent=2))


if __name__ == "__main__":
    main()
