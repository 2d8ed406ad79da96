"""Threads that fit the machine: the engine and the learner with every core, one, and the cores
:func:`spadework.cores.free_cores` finds free, on a quiet machine and beside a process that
holds one core (a busy loop), all in one run.

Prints one JSON object. For each neighbour state (``quiet``, ``busy``: a child process spinning
one core for the whole measurement) and each thread setting (``every``: every core this process
may use, what ``threads`` unset meant for the learner before; ``one``; ``auto``: what a run's
stage picks now, measured right before), it times:

- ``engine``: the llama.cpp engine of ``--model`` (the agent's 16-bit copy) sampling ``--batch``
  rows of ``--tokens`` tokens each (temperature 1, seeded), after a warm-up call; tokens/s;
- ``learner`` (with ``--learner``): one GRPO step of ``--model`` (LoRA, the ``cpu-qwen``
  learner settings) on ``--samples`` sequences of ``--prompt`` + ``--output`` random token ids,
  after a warm-up step; tokens run per second.

``ratios`` divides each setting's rate by ``every``'s in the same neighbour state: what picking
the threads from the free cores gains (busy) and costs (quiet, where ``auto`` should find every
core free). Nothing else should run on the machine: the neighbour is the benchmark's own.

Usage: OMP_NUM_THREADS=1 .venv/bin/python benchmarks/threads.py
       [--model qwen2.5-coder-0.5b-instruct] [--batch 16] [--tokens 48] [--learner]
       [--samples 2] [--prompt 300] [--output 60]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("OMP_NUM_THREADS", "1")

SETTINGS = ("every", "one", "auto")


def _spin() -> None:
    while True:
        pass


def _threads(setting: str) -> int:
    from spadework.cores import allowed_cores, free_cores

    return {"every": len(allowed_cores()), "one": 1}.get(setting) or free_cores()


def _engine(args: argparse.Namespace):
    from spadework.policy import SamplingParams, load_policy

    policy = load_policy("llamacpp", args.model, max_batch_size=args.batch, threads=1,
                         weights="bf16")
    prompts = [f"Write a long story about a {w}." for w in
               ("river", "lamp", "fox", "clock", "storm", "garden", "train", "violin")]
    prompts = [prompts[i % len(prompts)] + f" ({i})" for i in range(args.batch)]
    params = SamplingParams(temperature=1.0, max_tokens=args.tokens, seed=0)

    def run(threads: int) -> dict:
        policy.set_threads(threads)
        policy.release()  # nothing cached: each setting computes the same prompts
        start = time.perf_counter()
        done = policy.chat(prompts, params)
        seconds = time.perf_counter() - start
        tokens = sum(len(c.output_ids) for c in done)
        return {"threads": threads, "tokens": tokens, "seconds": round(seconds, 2),
                "per_s": round(tokens / seconds, 2)}

    policy.chat(prompts[:2], SamplingParams(temperature=0, max_tokens=4))  # warm-up
    return run


def _learner(args: argparse.Namespace):
    import dataclasses
    import random

    import torch

    from spadework.config import preset
    from spadework.policy import load_policy
    from spadework.train import Learner, Sample, TrainConfig
    from spadework.types import Sampling

    torch.set_num_threads(1)
    policy = load_policy("hf", args.model)
    rng = random.Random(0)
    vocab = policy.tokenizer.vocab_size
    samples = [Sample("agent", tuple(rng.randrange(100, vocab) for _ in range(args.prompt)),
                      tuple(rng.randrange(100, vocab) for _ in range(args.output)),
                      tuple([-1.0] * args.output), 1.0 if i % 2 else -1.0, Sampling(0.7))
               for i in range(args.samples)]
    settings = dataclasses.asdict(preset("cpu-qwen").learner)

    def run(threads: int) -> dict:
        learner = Learner(policy, TrainConfig(**{**settings, "threads": threads}))
        learner.step(samples)  # warm-up
        start = time.perf_counter()
        learner.step(samples)
        seconds = time.perf_counter() - start
        tokens = sum(len(s.prompt_ids) + len(s.output_ids) for s in samples)
        return {"threads": threads, "tokens_run": tokens, "seconds": round(seconds, 2),
                "per_s": round(tokens / seconds, 2)}

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--learner", action="store_true")
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=300)
    ap.add_argument("--output", type=int, default=60)
    args = ap.parse_args()

    parts = {"engine": _engine(args)}
    if args.learner:
        parts["learner"] = _learner(args)
    out: dict = {"benchmark": "threads", "model": args.model, "cores": len(os.sched_getaffinity(0)),
                 "settings": vars(args)}
    for neighbour in ("quiet", "busy"):
        child = None
        if neighbour == "busy":
            child = multiprocessing.get_context("spawn").Process(target=_spin, daemon=True)
            child.start()
            time.sleep(1.0)
        try:
            for name, run in parts.items():
                rows = {}
                for setting in SETTINGS:
                    rows[setting] = run(_threads(setting))
                    print(f"[threads] {neighbour} {name} {setting}: {rows[setting]}",
                          file=sys.stderr, flush=True)
                base = rows["every"]["per_s"]
                out[f"{neighbour}_{name}"] = {
                    **rows, "ratios": {s: round(rows[s]["per_s"] / base, 3) for s in SETTINGS}}
        finally:
            if child is not None:
                child.terminate()
                child.join()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
