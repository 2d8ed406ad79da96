"""How often an environment the checker accepts has a solution() that loses a fresh instance.

Figure: of the fuzzed replies of ``tests/env/fuzz_replies.py`` (mutated starters wrapped as
designer replies) that the checker accepts and that differ from their starter, the share whose
solution() loses at least one of 20 fresh play-style seeds. Baseline from the same run: the same
replies checked with the former solvable stage, seeds 0..4 (emulated by replacing
``solvable_seeds`` in the checker for that pass only). Also the checker's seconds per reply in
each pass. The test suite holds the default stage's rate under a bound (``tests/env/test_fuzz.py``).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/checker_fuzz.py [--cases 1500] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.env.fuzz_replies

import spadework.env.checker as checker  # noqa: E402
from spadework.env.checker import CheckConfig, check, looks_like_module, solution_losses  # noqa: E402
from spadework.env.extract import extract_env_module  # noqa: E402
from spadework.library import starter_envs  # noqa: E402
from spadework.sandbox import Limits, Sandbox  # noqa: E402
from spadework.seeding import episode_seed  # noqa: E402
from spadework.types import env_id_of  # noqa: E402
from tests.env.fuzz_replies import fuzz_case  # noqa: E402

CFG = CheckConfig(determinism_seeds=1, trivial_episodes=4, budget_seconds=10.0)  # as the test
FRESH_RUN_SEED, FRESH = 987_654_321, 20


def one_pass(cases, seeds: int | None) -> dict:
    """Check every case (with ``seeds`` solution seeds, None for the default) and replay each
    accepted mutant's solution() on fresh seeds."""
    originals = {s.name: env_id_of(s.code) for s in starter_envs()}
    accepted = mutants = losing = 0
    start = time.perf_counter()
    limits = Limits(step_seconds=1.0, load_seconds=3.0, episode_seconds=10.0, cpu_seconds=10)
    with Sandbox(limits) as sb:
        for case in cases:
            report = check(case.reply, sandbox=sb, config=CFG,
                           **({} if seeds is None else {"seeds": seeds}))
            accepted += report.ok
            if not report.ok or report.env_id == originals[case.starter]:
                continue
            mutants += 1
            code = case.reply if looks_like_module(case.reply) else extract_env_module(case.reply).code
            fresh = [episode_seed(FRESH_RUN_SEED, report.env_id, i) for i in range(FRESH)]
            losing += bool(solution_losses(
                lambda: sb.load(code, max_turns=CFG.max_turns, class_name=report.class_name), fresh, CFG))
    seconds = time.perf_counter() - start
    return {"accepted": accepted, "accepted_mutants": mutants, "losing": losing,
            "loss_rate": round(losing / max(1, mutants), 4),
            "seconds_per_reply": round(seconds / max(1, len(cases)), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    starters = starter_envs()
    cases = [fuzz_case(starters, args.seed, i) for i in range(args.cases)]
    default = checker.solvable_seeds
    checker.solvable_seeds = lambda seed, env_id, n: list(range(n))  # the former seeds 0..n-1
    try:
        former = one_pass(cases, seeds=5)
    finally:
        checker.solvable_seeds = default
    current = one_pass(cases, seeds=None)
    print(json.dumps({
        "benchmark": "checker_fuzz_loss_rate",
        "cases": args.cases,
        "seed": args.seed,
        "fresh_seeds": FRESH,
        "former_seeds_0_to_4": former,
        "default_play_style_seeds": {"solvable_seeds": CFG.solvable_seeds, **current},
        "seconds_per_reply_vs_former": round(current["seconds_per_reply"] / former["seconds_per_reply"], 2),
    }, indent=2))


if __name__ == "__main__":
    main()
