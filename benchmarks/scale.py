"""What spreading play over Ray rollout workers costs and gives, without generation.

Prints one JSON object. The policy is the tests' scripted one (no model: an instant reply), so
what is timed is the sandbox (one hardened child per episode) and the orchestration: the same
jobs played by ``rollout.play`` in this process (the baseline, measured in the same run), then
by a ``RayPlayer`` with 1 and with 2 rollout workers on a local Ray cluster.

- ``episodes_per_s``: per way of playing (``in_process``, ``ray_1``, ``ray_2``), the median over
  ``--repeats`` rounds;
- ``ray_overhead_ms_per_episode``: (ray_1 time - in-process time) / episodes: what one worker
  adds per episode (shipping jobs and episodes, the actor call, chunking); it can come out
  negative, because the worker's chunks keep fewer episodes live at once than one in-process
  batch (smaller batches of sandbox steps), which is within this machine's noise;
- ``ray_call_ms``: the fixed cost of one ``RayPlayer`` call, from the median time to play a
  single one-turn episode through one worker minus the same episode in process;
- ``speedup_2_over_1``: ray_2 / ray_1 episodes per second. On a machine with 2 cores the driver,
  Ray's own processes, two workers and their sandbox children share them, so this is far from 2;
  with a real model the workers mostly wait on generation servers and the ratio is set by them.
- ``identical``: every way returned the same episodes (text, actions, rewards), as they must
  (seeds per episode, ``rollout.turn_seed``).

Usage: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/scale.py [--plays 8] [--repeats 5]``
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(TESTS.parent))


def scripted():
    """The tests' scripted player (a guess that depends on the observation), with no delay."""
    from scripted_policy import ScriptedPolicy, designing_script

    return ScriptedPolicy(designing_script)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plays", type=int, default=8, help="plays per arm per starter game")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--max-turns", type=int, default=4)
    args = ap.parse_args()

    import ray
    from starters import starter_records

    from spadework.distributed.cluster import connect
    from spadework.distributed.rollout import RayPlayer
    from spadework.rollout import PlayConfig, play, regret_jobs
    from spadework.sandbox import Limits, Sandbox
    from spadework.settings.ray import RayConfig

    envs = [r.source for r in starter_records(args.max_turns) if r.setting == "games"]
    jobs = [j for e in envs for j in regret_jobs(e, None, run_seed=3, plays=args.plays)]
    cfg = PlayConfig(max_turns=args.max_turns, max_tokens=64, batch_size=32)

    def key(eps):
        return [(e.env_id, e.arm, e.play_index, e.rewards, tuple(t.text for t in e.turns)) for e in eps]

    def timed(fn):
        times, out = [], None
        for _ in range(args.repeats):
            start = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - start)
        return statistics.median(times), out

    one_turn = PlayConfig(max_turns=1, max_tokens=16)
    with Sandbox(Limits()) as sb:
        policy = scripted()
        t_local, want = timed(lambda: play(policy, sb, jobs, cfg, seed=1))
        t_one_local = statistics.median(_times(lambda: play(policy, sb, jobs[:1], one_turn, seed=1), 10))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        started = connect(RayConfig(enabled=True), runtime_env={"env_vars": {
            "PYTHONPATH": str(TESTS), "OMP_NUM_THREADS": "1"}})
    results, same = {"in_process": t_local}, True
    try:
        for n in (1, 2):
            player = RayPlayer([scripted], {}, n)
            try:
                player(jobs[: len(envs)], cfg, seed=1)  # warm: workers import and fork once
                t, got = timed(lambda: player(jobs, cfg, seed=1))
                if n == 1:
                    t_one = statistics.median(_times(lambda: player(jobs[:1], one_turn, seed=1), 10))
            finally:
                player.close()
            results[f"ray_{n}"] = t
            same = same and key(got) == key(want)
    finally:
        if started:
            ray.shutdown()
    n_eps = len(jobs)
    print(json.dumps({
        "episodes": n_eps, "games": len(envs), "max_turns": args.max_turns, "repeats": args.repeats,
        "cores": len(os.sched_getaffinity(0)),
        "seconds": {k: round(v, 3) for k, v in results.items()},
        "episodes_per_s": {k: round(n_eps / v, 1) for k, v in results.items()},
        "ray_overhead_ms_per_episode": round((results["ray_1"] - results["in_process"]) / n_eps * 1e3, 2),
        "ray_call_ms": round((t_one - t_one_local) * 1e3, 1),
        "speedup_2_over_1": round(results["ray_1"] / results["ray_2"], 2),
        "identical": same,
    }, indent=1))


def _times(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


if __name__ == "__main__":
    logging.getLogger("ray").setLevel(logging.ERROR)
    main()
