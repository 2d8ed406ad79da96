"""What sharing the prompts' common beginning saves the learner, on a real run's episodes.

Reads the episodes of ``RUN_DIR``, assembles the agent's samples as the train stage does (the
preset's ``reward.format_weight`` and ``learner.pack_turns``), keeps those the step runs (advantage
not 0), and prints JSON with two parts:

- ``counted``, for every sample: the micro-batches, rows and tokens the step runs with
  ``learner.share_prefix`` 0 (every sample its own row: the baseline) and with each value of
  ``--share`` (``spadework.train.forward.micro_batches``), and the tokens' ratio to the baseline.
- ``timed``, for ``--samples`` of them (the first in prompt order, so that the subset shares
  prefixes the way a whole step's rows do; 0 skips timing): one learner step of
  the preset's learner on the run's model per setting, each in its own process (its peak RSS
  its own), the baseline first: seconds, tokens run, loss, the importance ratio against the
  run's sampler, peak RSS, and the time ratio to the baseline. The same samples and the same
  maths: the loss and the ratios should agree to float noise.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/shared_prefix.py runs/tools-a \\
        [--preset cpu-qwen-tools] [--share 64] [--samples 8]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def samples(run_dir: Path, preset: str) -> tuple[list, object]:
    from spadework.archive import Archive, archive_path
    from spadework.config import load_config
    from spadework.train.batch import agent_assembly

    cfg = load_config(preset_name=preset)
    with Archive.open(archive_path(run_dir), create=False) as a:
        episodes = a.episodes()
    agent = agent_assembly(episodes, format_weight=cfg.reward.format_weight,
                           format_shaping=cfg.reward.format_shaping, pack=cfg.learner.pack_turns)
    return [s for s in agent.samples if s.advantage != 0], cfg


def subset(run: list, n: int) -> list:
    """The first ``n`` samples in prompt order: neighbours, mostly one environment's turns, as
    in the rows of a whole step."""
    return sorted(run, key=lambda s: s.prompt_ids)[:n]


def count(run: list, cfg, share: int) -> dict:
    from spadework.train.forward import micro_batches

    micros = micro_batches(run, cfg.learner.micro_batch_size, cfg.learner.micro_batch_tokens, share)
    return {"micro_batches": len(micros), "rows": sum(len(m) for m in micros),
            "tokens_run": sum(r.width for m in micros for r in m),
            "padded_tokens": sum(len(m) * max(r.width for r in m) for m in micros)}


def child(args: argparse.Namespace) -> None:
    """One step on the subset with ``share_prefix = args.child``; prints its JSON line."""
    import dataclasses
    import time

    from _memory import peak_rss_mib

    from spadework.policy.hf import load_hf_policy
    from spadework.train import Learner

    run, cfg = samples(args.run_dir, args.preset)
    batch = subset(run, args.samples)
    policy = load_hf_policy(cfg.model)
    learner = Learner(policy, dataclasses.replace(cfg.learner, share_prefix=args.child,
                                                  threads=args.threads))
    t0 = time.perf_counter()
    stats = learner.step(batch)
    ratio = stats["importance_ratio"]["all"]
    print(json.dumps({"share_prefix": args.child, "seconds": round(time.perf_counter() - t0, 1),
                      "tokens_run": int(stats["tokens_run"]), "trained_tokens": int(stats["tokens"]),
                      "loss": round(stats["loss"], 6), "entropy": round(stats["entropy"], 5),
                      "grad_norm": round(stats["grad_norm"], 6),
                      "ratio_mean": round(ratio["mean"], 5), "ratio_max": round(ratio["max"], 5),
                      "peak_rss_mib": round(peak_rss_mib())}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--preset", default="cpu-qwen-tools")
    ap.add_argument("--share", default="64", help="comma-separated share_prefix values to compare with 0")
    ap.add_argument("--samples", type=int, default=8, help="samples in the timed step (0: count only)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        return child(args)
    shares = [0, *(int(x) for x in args.share.split(","))]
    run, cfg = samples(args.run_dir, args.preset)
    if not run:
        sys.exit(f"{args.run_dir}: no agent sample with a non-zero advantage to train on")
    counted = {str(v): count(run, cfg, v) for v in shares}
    base = counted["0"]["tokens_run"]
    for v in shares:
        counted[str(v)]["tokens_ratio"] = round(base / counted[str(v)]["tokens_run"], 3)
    out = {"benchmark": "shared_prefix", "run_dir": str(args.run_dir), "preset": args.preset,
           "samples": len(run), "learner": {"micro_batch_size": cfg.learner.micro_batch_size,
                                            "micro_batch_tokens": cfg.learner.micro_batch_tokens},
           "counted": counted, "timed": None}
    if args.samples:
        timed = []
        for v in shares:
            print(f"timing share_prefix={v} on {args.samples} samples ...", file=sys.stderr, flush=True)
            proc = subprocess.run([sys.executable, __file__, str(args.run_dir), "--preset", args.preset,
                                   "--samples", str(args.samples), "--threads", str(args.threads),
                                   "--child", str(v)], capture_output=True, text=True, check=False)
            if proc.returncode:
                sys.exit(f"share_prefix={v} failed:\n{proc.stderr[-2000:]}")
            timed.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        for t in timed:
            t["time_ratio"] = round(timed[0]["seconds"] / t["seconds"], 3)
        out["timed"] = timed
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
