"""How far the learner's logprobs are from the sampler's, per engine weights and learner dtype.

The importance ratio ``exp(lp_learner - lp_sampler)`` of every sampled token is what clipping and
the TIS cap bound (``train.importance_ratio`` in a run's figures); on policy it should be 1, and
what moves it is the sampler's weights (a 16-bit or quantised copy) and the learner's arithmetic.
This script samples replies from llama.cpp (``--weights``, each a copy of the GGUF, see
``spadework.policy.gguf_copy``) at the cpu-qwen play temperature and scores the same tokens with
the learner (``Learner.score``, the step's own code path) once per ``TrainConfig.compute_dtype``
in ``--dtypes``, and prints one JSON object: per (weights, dtype) the mean, p99 and max of
``|lp_learner - lp_sampler|`` and the mean, min and max of the ratio, and the learner's seconds
to score them (fp32 first: the baseline).

``--batch FILE`` measures instead on the samples an iteration's learner step was given
(``benchmarks/iteration.py --save-batch FILE``): their sampler logprobs (the agent engine's, in
the run) against the learner's for the same tokens under each ``--dtypes`` entry
(``Learner.logprobs``: the step's packing, attention and head, no gradient), so the long
multi-turn contexts of the main job are what is measured, not short replies.

Both name the worst tokens (sample, position in its row, both logprobs).

``--run DIR --iteration I`` measures a finished run's own step: the agent samples of iteration
``I`` rebuilt from the run's archive as its learner step built them (the preset's packing and
format weight), scored by a learner carrying the run's checkpoint of iteration ``I - 1`` (the
weights the engine played iteration ``I`` with), so the importance ratios the run reported for
that step can be split between the learner's arithmetic (``--dtypes``) and the sampler.

Usage: OMP_NUM_THREADS=1 .venv/bin/python benchmarks/drift.py
       [--model qwen2.5-coder-0.5b-instruct] [--weights bf16,f16] [--dtypes float32,bfloat16]
       [--prompts 8] [--n 4] [--max-tokens 48]
       OMP_NUM_THREADS=1 .venv/bin/python benchmarks/drift.py --batch FILE [--dtypes float32,bfloat16]
       OMP_NUM_THREADS=1 .venv/bin/python benchmarks/drift.py --run runs/NAME --iteration I
       [--dtypes float32,auto]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PROMPTS = ["What is the capital of France? Answer in one word.", "Name three colours.",
           "Write a haiku about rain.", "What is 17 + 25? Show one step.",
           "You are in a maze. Reply with one move in a box, like \\boxed{north}.",
           "Guess a number from 1 to 9. Reply as \\boxed{N}.",
           "Explain what a stack is in one sentence.", "List two prime numbers above 50."]


def figures(gaps: list[float], ratios: list[float]) -> dict:
    s = sorted(gaps)
    return {"tokens": len(gaps), "gap_mean": round(sum(gaps) / len(gaps), 5),
            "gap_p99": round(s[min(len(s) - 1, int(0.99 * len(s)))], 5), "gap_max": round(s[-1], 5),
            "ratio_mean": round(sum(ratios) / len(ratios), 5), "ratio_min": round(min(ratios), 5),
            "ratio_max": round(max(ratios), 5)}


def trained_positions(sample) -> list[int]:
    """Where each trained token of ``sample`` sits in its sequence (prompt first; a packed
    episode's untrained host messages in between are skipped)."""
    flags = sample.trained or (True,) * len(sample.output_ids)
    return [len(sample.prompt_ids) + j for j, t in enumerate(flags) if t]


def score_cells(out: dict, samples: list, model: str, settings: dict, dtypes: str,
                checkpoint: Path | None = None) -> dict:
    """Per compute dtype in ``dtypes``: a learner of ``model`` with ``settings`` (and the
    ``checkpoint`` loaded, when given) scores the samples' trained tokens; the gap and ratio
    figures against their sampler logprobs, the worst tokens and the seconds, under
    ``out["cells"]``."""
    import torch

    from spadework.policy.hf import load_hf_policy
    from spadework.train import Learner, TrainConfig
    from spadework.train.checkpoint import load_learner

    torch.set_num_threads(2)
    for dtype in dtypes.split(","):
        learner = Learner(load_hf_policy(model),
                          TrainConfig(**{**settings, "compute_dtype": dtype, "threads": 2}))
        if checkpoint is not None:
            load_learner(learner, checkpoint)
        t0 = time.perf_counter()
        mine = learner.logprobs(samples)
        pairs = [(i, pos, a, b) for i, (lp, s) in enumerate(zip(mine, samples))
                 for pos, a, b in zip(trained_positions(s), lp, s.logprobs)]
        out["cells"][dtype] = {**figures([abs(a - b) for *_, a, b in pairs],
                                         [math.exp(a - b) for *_, a, b in pairs]),
                               "worst": worst(pairs),
                               "score_seconds": round(time.perf_counter() - t0, 2)}
        print(f"{dtype}: {out['cells'][dtype]}", file=sys.stderr, flush=True)
        del learner
    return out


def batch_drift(args: argparse.Namespace) -> dict:
    """Per compute dtype: the gap between a saved batch's sampler logprobs and the learner's."""
    from spadework.train.batch import sample_from_dict

    with open(args.batch) as f:
        samples = [sample_from_dict(json.loads(line)) for line in f if line.strip()]
    out: dict = {"model": args.model, "batch": args.batch, "samples": len(samples),
                 "longest": max(s.length for s in samples), "cells": {}}
    return score_cells(out, samples, args.model, {}, args.dtypes)


def run_samples(run_dir: Path, iteration: int) -> tuple[list, dict, str]:
    """Iteration ``iteration``'s agent samples of a run, as its learner step built them; the
    run's learner settings (its preset's) and its agent model."""
    from spadework.archive.store import Archive
    from spadework.config import preset
    from spadework.train.batch import agent_assembly

    archive = Archive.open_read_only(run_dir / "archive.sqlite")
    try:
        config = archive.load_state("config") or {}
        cfg = preset(config.get("preset") or "cpu-qwen")
        episodes = archive.episodes(iteration=iteration)
    finally:
        archive.close()
    if not episodes:
        raise SystemExit(f"{run_dir} has no episodes of iteration {iteration}")
    samples = agent_assembly(episodes, format_weight=cfg.reward.format_weight,
                             format_shaping=cfg.reward.format_shaping,
                             pack=cfg.learner.pack_turns).samples
    return list(samples), dataclasses.asdict(cfg.learner), config.get("agent_model") or config["model"]


def worst(pairs: list[tuple[int, int, float, float]], n: int = 5) -> list[dict]:
    """The ``n`` tokens farthest from the sampler: sample, position in its row, logprobs."""
    top = sorted(pairs, key=lambda p: -abs(p[2] - p[3]))[:n]
    return [{"sample": i, "position": pos, "learner": round(a, 4), "sampler": round(b, 4)}
            for i, pos, a, b in top]


def run_drift(args: argparse.Namespace) -> dict:
    """Per compute dtype: the gap on a run's own iteration, at the weights it was sampled with."""
    run_dir = Path(args.run)
    samples, settings, model = run_samples(run_dir, args.iteration)
    ckpt = run_dir / "checkpoints" / f"iter_{args.iteration - 1:04d}" if args.iteration else None
    out: dict = {"model": model, "run": str(run_dir), "iteration": args.iteration,
                 "checkpoint": str(ckpt) if ckpt else None,
                 "samples": len(samples), "longest": max(s.length for s in samples), "cells": {}}
    return score_cells(out, samples, model, settings, args.dtypes, ckpt)


def main() -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    ap.add_argument("--weights", default="bf16,f16")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--n", type=int, default=4, help="replies per prompt")
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--batch", default=None, metavar="FILE",
                    help="score the samples benchmarks/iteration.py --save-batch wrote instead")
    ap.add_argument("--run", default=None, metavar="DIR",
                    help="score a finished run's own iteration (with --iteration)")
    ap.add_argument("--iteration", type=int, default=None)
    args = ap.parse_args()
    if (args.run is None) != (args.iteration is None):
        ap.error("--run and --iteration go together")
    if args.run:
        from spadework.errors import SpadeworkError

        try:
            print(json.dumps(run_drift(args), indent=1))
        except SpadeworkError as e:  # not a run, a damaged or missing checkpoint: say which
            raise SystemExit(f"drift.py: {e}") from None
        return
    if args.batch:
        print(json.dumps(batch_drift(args), indent=1))
        return

    import torch

    from spadework.policy import SamplingParams
    from spadework.policy.llamacpp_load import load_llamacpp_policy
    from spadework.policy.load import learner_policy
    from spadework.train import Learner, TrainConfig

    torch.set_num_threads(2)
    prompts = (PROMPTS * ((args.prompts + len(PROMPTS) - 1) // len(PROMPTS)))[: args.prompts]
    params = SamplingParams(temperature=args.temperature, top_p=0.95, top_k=20,
                            max_tokens=args.max_tokens, n=args.n, seed=0)
    out: dict = {"model": args.model, "temperature": args.temperature, "cells": {}}
    learners: dict = {}
    for weights in args.weights.split(","):
        engine = load_llamacpp_policy(args.model, weights=weights, max_batch_size=16)
        done = engine.chat(prompts, params)
        for dtype in args.dtypes.split(","):
            if dtype not in learners:
                learners[dtype] = Learner(learner_policy(engine), TrainConfig(compute_dtype=dtype, threads=2))
            learner = learners[dtype]
            gaps, ratios, t0 = [], [], time.perf_counter()
            for c in done:
                lp = learner.score(c.prompt_ids, c.output_ids, args.temperature)
                gaps += [abs(a - b) for a, b in zip(lp, c.logprobs)]
                ratios += [math.exp(a - b) for a, b in zip(lp, c.logprobs)]
            out["cells"][f"{weights}/{dtype}"] = {**figures(gaps, ratios),
                                                  "score_seconds": round(time.perf_counter() - t0, 2)}
            print(f"{weights}/{dtype}: {out['cells'][f'{weights}/{dtype}']}", file=sys.stderr, flush=True)
        engine.close()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
