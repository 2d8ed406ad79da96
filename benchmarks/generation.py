"""Generation throughput and peak memory on CPU: the transformers backend against llama.cpp.

Prints one JSON object. Every (model, backend, batch) cell runs in a fresh subprocess (so peak
RSS is its own). Rows are distinct "write a long story" prompts sampled at temperature 1 with a
fixed seed, ``max_tokens`` new tokens each; rows that end early leave the batch.
``tokens_per_s`` is aggregate (all rows' output tokens / wall time of the batched call, best of
``--repeats``). The transformers backend runs with one thread, as the main job runs it
(OMP_NUM_THREADS=1: on two shared cores it is fastest so). llama.cpp runs with one thread and
its default weights (a BF16 copy of the dequantised GGUF); at the largest batch it also runs
from an F16 copy and from the Q4_1 file itself (``weights=gguf``), and for the first model with
two threads at every batch (a cell over 10 minutes is cut off and says so). ``speedup_vs_hf`` divides by the transformers backend at the same batch measured in
the same run (the issue's target: >= 5x at batch 16 for the default model). On a shared machine
other processes steal cores, so wall figures swing with the load; ``tokens_per_cpu_s`` (output
tokens per second of this process's CPU time) swings less, and ``load_average`` says how busy
the machine was.

``sync`` cells time ``LlamaCppLoraSync.push`` (extract the LoRA matrices, write the GGUF
adapter, load it) for the default rank-16 adapter on every attention and MLP projection, best
of 3.

Usage: .venv/bin/python benchmarks/generation.py [--batches 1,16] [--max-tokens 64]
       [--models smollm2-135m-instruct,qwen2.5-coder-0.5b-instruct]
(a model that is not pulled is skipped and listed under ``skipped``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time

from _memory import peak_rss_mib, rss_mib

CELL_TIMEOUT_S = 600  # a cell that takes longer (e.g. two threads on a busy machine) is cut off
TOPICS = ["a dragon", "the sea", "a lost key", "a robot", "a city at night", "a small boat",
          "an old clock", "a mountain", "a library", "a storm", "a garden", "a train",
          "a lighthouse", "a desert", "a violin", "a snowy forest"]


def generation_worker(model: str, backend: str, batch: int, threads: int, weights: str,
                      max_tokens: int, repeats: int) -> dict:
    import torch

    from spadework.policy import SamplingParams, load_policy

    torch.set_num_threads(1)
    extra = {"threads": threads, "weights": weights} if backend == "llamacpp" else {}
    policy = load_policy(backend, model, max_batch_size=batch, **extra)
    policy.chat(["Say hi."], SamplingParams(temperature=0, max_tokens=4))  # warm-up
    loaded = rss_mib()
    prompts = [f"Write a long story about {TOPICS[i % len(TOPICS)]}." for i in range(batch)]
    params = SamplingParams(temperature=1.0, max_tokens=max_tokens, seed=0)
    best, best_cpu = None, None
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        done = policy.chat(prompts, params)
        secs, cpu = time.perf_counter() - start, time.process_time() - cpu
        tokens = sum(len(c.output_ids) for c in done)
        if best is None or tokens / secs > best[0] / best[1]:
            best = (tokens, secs)
        if best_cpu is None or tokens / cpu > best_cpu[0] / best_cpu[1]:
            best_cpu = (tokens, cpu)
    # prefill: one token after ``batch`` prompts of about 200 tokens that differ from their
    # first word (each row's own order of the topics, its number first), nothing cached. Rows
    # that shared a long prefix (before 2026-12-04 rows i and i + 16 differed only at the end)
    # were partly copied from each other's cache, not computed, and the rate came out 2.4x
    # too high at batch 40; the engine's own count of computed tokens is the numerator now.
    release = getattr(policy, "release", None)
    if callable(release):
        release()
    long = []
    for i in range(batch):
        order = random.Random(i).sample(TOPICS, len(TOPICS))
        long.append(f"({i}) " + " ".join(order * 3))
    computed_before = getattr(policy, "prefilled_tokens", None)
    start = time.perf_counter()
    done = policy.chat(long, SamplingParams(temperature=0, max_tokens=1))
    seconds = time.perf_counter() - start
    asked = sum(len(c.prompt_ids) for c in done)
    computed = asked if computed_before is None else policy.prefilled_tokens - computed_before
    peak = peak_rss_mib()
    return {"tokens": best[0], "seconds": round(best[1], 3),
            "prefill_tokens": computed, "prefill_prompt_tokens": asked,
            "prefill_tokens_per_s": round(computed / seconds, 1),
            "tokens_per_s": round(best[0] / best[1], 2),
            "tokens_per_cpu_s": round(best_cpu[0] / best_cpu[1], 2),
            "rss_after_load_mib": round(loaded, 1), "peak_rss_mib": round(peak, 1)}


def sync_worker(model: str) -> dict:
    import torch

    from spadework.policy import learner_policy, load_policy
    from spadework.train import Learner, TrainConfig, weight_sync_for

    torch.set_num_threads(1)
    engine = load_policy("llamacpp", model, max_batch_size=1)
    learner = Learner(learner_policy(engine), TrainConfig())
    sync = weight_sync_for(engine, learner)
    times = []
    for _ in range(3):
        sync.push(learner)
        times.append(sync.last_seconds)
    size = (sync.adapter_dir / "adapter.gguf").stat().st_size
    return {"sync_seconds": round(min(times), 3), "adapter_mib": round(size / 2**20, 2),
            "peak_rss_mib": round(peak_rss_mib(), 1)}


def _run(args: list[str]) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    try:
        out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                             env=env, check=False, timeout=CELL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"error": f"over {CELL_TIMEOUT_S} s (killed)"}
    if out.returncode:
        return {"error": out.stderr.strip()[-400:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", default="1,16")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--models", default="smollm2-135m-instruct,qwen2.5-coder-0.5b-instruct")
    ap.add_argument("--worker", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        kind, model, backend, batch, threads, weights = args.worker.split("|")
        if kind == "sync":
            print(json.dumps(sync_worker(model)))
        else:
            print(json.dumps(generation_worker(model, backend, int(batch), int(threads), weights,
                                               args.max_tokens, args.repeats)))
        return
    from spadework.policy.registry import is_pulled

    batches = [int(x) for x in args.batches.split(",")]
    top = max(batches)
    common = ["--max-tokens", str(args.max_tokens), "--repeats", str(args.repeats)]
    rows, skipped = [], []
    for model in args.models.split(","):
        if not is_pulled(model):
            skipped.append(model)
            continue
        cells = ([("hf", b, 1, "-") for b in batches] + [("llamacpp", b, 1, "bf16") for b in batches]
                 + [("llamacpp", top, 1, "f16"), ("llamacpp", top, 1, "gguf")])
        if model == args.models.split(",")[0]:  # two threads: once is enough to show the effect
            cells += [("llamacpp", b, 2, "bf16") for b in batches]
        for backend, batch, threads, weights in cells:
            r = _run(["--worker", f"gen|{model}|{backend}|{batch}|{threads}|{weights}", *common])
            rows.append({"model": model, "backend": backend, "batch": batch,
                         "threads": threads, "weights": weights, **r})
        rows.append({"model": model, "backend": "llamacpp", "kind": "sync",
                     **_run(["--worker", f"sync|{model}|-|0|1|bf16"])})
    hf = {(r["model"], r["batch"]): r for r in rows
          if r["backend"] == "hf" and "tokens_per_s" in r}
    for r in rows:
        base = hf.get((r["model"], r.get("batch")))
        if r["backend"] == "llamacpp" and base and "tokens_per_s" in r:
            r["speedup_vs_hf"] = round(r["tokens_per_s"] / base["tokens_per_s"], 2)
            r["cpu_speedup_vs_hf"] = round(r["tokens_per_cpu_s"] / base["tokens_per_cpu_s"], 2)
    result = {"benchmark": "generation", "device": "cpu", "max_tokens": args.max_tokens,
              "results": rows, "skipped_not_pulled": skipped}
    target = [r for r in rows if r["model"] == "smollm2-135m-instruct" and r["backend"] ==
              "llamacpp" and r.get("batch") == top and r.get("threads") == 1
              and r.get("weights") == "bf16"]
    if target and "speedup_vs_hf" in target[0]:
        result[f"target_batch{top}_ge_5x_wall"] = target[0]["speedup_vs_hf"] >= 5.0
    result["load_average"] = os.getloadavg()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
