"""Wall time per stage of one smoke iteration, and the share spent outside policy generation.

Runs iteration 0 of the ``smoke`` preset (design, pool, hints, play both arms, rewards, store;
no training) with the real default model on CPU, in a fresh run directory, and prints one JSON
object: per stage its wall seconds and the seconds spent inside ``Policy.chat``; in total the
share of the iteration spent outside generation (sandbox, parsing, checking, storage, scoring).
Target: that share <= 0.10. The ratio is measured within one run, so machine load affects both
sides alike (generation slows more under load, which flatters the share a little).

Usage: OMP_NUM_THREADS=1 .venv/bin/python benchmarks/iteration.py [--preset smoke] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


class TimedPolicy:
    """Delegates to a policy and adds up the wall time of its ``chat`` calls by stage."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.stage = "setup"
        self.seconds: dict[str, float] = {}
        self.tokens: dict[str, int] = {}

    def __getattr__(self, name):
        return getattr(self.inner, name)

    @property
    def context_length(self) -> int:
        return self.inner.context_length

    def chat(self, conversations, params):
        t = time.monotonic()
        try:
            out = self.inner.chat(conversations, params)
        finally:
            self.seconds[self.stage] = self.seconds.get(self.stage, 0.0) + time.monotonic() - t
        self.tokens[self.stage] = self.tokens.get(self.stage, 0) + sum(len(c.output_ids) for c in out)
        return out


def main() -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="smoke")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    from spadework.config import override, preset
    from spadework.loop import run
    from spadework.policy.hf import load_hf_policy

    cfg = override(preset(args.preset), {"iterations": 1, "train": False, "run_seed": args.seed})
    policy = TimedPolicy(load_hf_policy(cfg.model, max_batch_size=cfg.policy_batch))
    marks: list[tuple[str, float]] = []

    class Marks:  # a spadework.progress.Progress that notes when each stage starts
        def stage(self, name: str, note: str) -> None:
            if note.startswith("iteration"):
                marks.append((name, time.monotonic()))
                policy.stage = name

        def advance(self, name: str, done: int, total: int) -> None:
            pass

    with tempfile.TemporaryDirectory() as d:
        t0 = time.monotonic()
        run(cfg, Path(d), policy=policy, progress=Marks())
        end = time.monotonic()
    starts = marks + [("end", end)]
    stages = {}
    for (name, t), (_, t_next) in zip(starts, starts[1:]):
        gen = policy.seconds.get(name, 0.0)
        stages[name] = {"wall_s": round(t_next - t, 3), "generation_s": round(gen, 3),
                        "other_s": round(t_next - t - gen, 3), "output_tokens": policy.tokens.get(name, 0)}
    iteration_s = end - marks[0][1]
    gen_total = sum(s["generation_s"] for s in stages.values())
    share = (iteration_s - gen_total) / iteration_s
    print(json.dumps({
        "benchmark": "iteration", "preset": args.preset, "model": cfg.model or "default",
        "setup_s": round(marks[0][1] - t0, 3), "iteration_s": round(iteration_s, 3),
        "generation_s": round(gen_total, 3), "outside_generation_share": round(share, 4),
        "target_share": 0.10, "meets_target": share <= 0.10, "stages": stages,
    }, indent=1))


if __name__ == "__main__":
    main()
