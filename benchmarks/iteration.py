"""Where an iteration's time goes: generation, learning and weight sync, per backend.

Runs iteration 0 of a preset (by default ``cpu`` with training: design, pool, hints, play both
arms, rewards, a learner step, the weight sync, store) with the real default model on CPU, in a
fresh run directory, once per backend (by default ``hf`` then ``llamacpp``: before and after the
fast engine, in the same process and the same conditions), and prints one JSON object: per
backend and stage its wall seconds and the seconds spent inside ``Policy.chat``, and for the
iteration the shares spent in generation, in learning (the train stage less the sync) and in
weight sync. The ratios are measured within one run; absolute times depend on the machine's
load, the shares and the backend-to-backend ratio much less.

Usage: OMP_NUM_THREADS=1 .venv/bin/python benchmarks/iteration.py
       [--preset cpu] [--backend hf,llamacpp] [--no-train] [--seed 0]
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


class Clock:
    """The stage now running, and the wall time and output tokens of chat calls per stage."""

    def __init__(self) -> None:
        self.stage = "setup"
        self.seconds: dict[str, float] = {}
        self.tokens: dict[str, int] = {}


class TimedPolicy:
    """Delegates to a policy and adds its ``chat`` calls' wall time to ``clock``, by stage."""

    def __init__(self, inner, clock: Clock) -> None:
        self.inner = inner
        self.clock = clock

    def __getattr__(self, name):
        return getattr(self.inner, name)

    @property
    def context_length(self) -> int:
        return self.inner.context_length

    def chat(self, conversations, params):
        c, t = self.clock, time.monotonic()
        try:
            out = self.inner.chat(conversations, params)
        finally:
            c.seconds[c.stage] = c.seconds.get(c.stage, 0.0) + time.monotonic() - t
        c.tokens[c.stage] = c.tokens.get(c.stage, 0) + sum(len(x.output_ids) for x in out)
        return out


def one_iteration(cfg, backend: str, train: bool) -> dict:
    """Iteration 0 of ``cfg`` with ``backend`` in a fresh run directory: stage walls and shares."""
    import dataclasses

    from spadework.commands import load_roles
    from spadework.loop import run

    cfg = dataclasses.replace(cfg, backend=backend, train=train)
    t_load = time.monotonic()
    parts, clock = load_roles(cfg), Clock()  # each role's model, and a learner per trained one
    for role in ("policy", "designer"):
        if role in parts:
            parts[role] = TimedPolicy(parts[role], clock)
    load_s = time.monotonic() - t_load
    marks: list[tuple[str, float]] = []

    class Marks:  # a spadework.progress.Progress that notes when each stage starts
        def stage(self, name: str, note: str) -> None:
            if note.startswith("iteration"):
                marks.append((name, time.monotonic()))
                clock.stage = name

        def advance(self, name: str, done: int, total: int) -> None:
            pass

    with tempfile.TemporaryDirectory() as d:
        t0 = time.monotonic()
        (m,) = run(cfg, Path(d), progress=Marks(), **parts)
        end = time.monotonic()
    starts = marks + [("end", end)]
    stages = {}
    for (name, t), (_, t_next) in zip(starts, starts[1:]):
        gen = clock.seconds.get(name, 0.0)
        stages[name] = {"wall_s": round(t_next - t, 3), "generation_s": round(gen, 3),
                        "other_s": round(t_next - t - gen, 3), "output_tokens": clock.tokens.get(name, 0)}
    iteration_s = end - marks[0][1]
    gen_total = sum(s["generation_s"] for s in stages.values())
    train = m.values.get("train", {})
    sync_s = float(train.get("sync_seconds", 0.0))
    learn_s = stages.get("train", {}).get("wall_s", 0.0) - sync_s
    tokens = sum(clock.tokens.values())
    return {
        "backend": backend, "load_s": round(load_s, 3), "setup_s": round(marks[0][1] - t0, 3),
        "iteration_s": round(iteration_s, 3), "generation_s": round(gen_total, 3),
        "learning_s": round(learn_s, 3), "sync_s": round(sync_s, 3),
        "share": {"generation": round(gen_total / iteration_s, 4),
                  "learning": round(learn_s / iteration_s, 4),
                  "sync": round(sync_s / iteration_s, 4),
                  "other": round(1 - (gen_total + learn_s + sync_s) / iteration_s, 4)},
        "output_tokens": tokens, "generation_tokens_per_s": round(tokens / max(gen_total, 1e-9), 1),
        "importance_ratio": train.get("importance_ratio"), "train_note": train.get("note"),
        "stages": stages,
    }


def main() -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="cpu")
    ap.add_argument("--backend", default="hf,llamacpp",
                    help="comma-separated backends, each run in turn (the first is the baseline)")
    ap.add_argument("--no-train", action="store_true", help="skip the learner step and the sync")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    from spadework.config import override, preset

    cfg = override(preset(args.preset), {"iterations": 1, "run_seed": args.seed})
    runs = [one_iteration(cfg, b, not args.no_train) for b in args.backend.split(",")]
    base = runs[0]
    for r in runs[1:]:
        r["iteration_speedup_vs_" + base["backend"]] = round(base["iteration_s"] / r["iteration_s"], 3)
        r["generation_speedup_vs_" + base["backend"]] = round(
            base["generation_s"] / max(r["generation_s"], 1e-9), 3)
    print(json.dumps({"benchmark": "iteration", "preset": args.preset, "model": cfg.model or "default",
                      "train": not args.no_train, "runs": runs,
                      "target": "weight sync under 10% of an iteration",
                      "meets_target": all(r["share"]["sync"] < 0.10 for r in runs)}, indent=1))


if __name__ == "__main__":
    main()
