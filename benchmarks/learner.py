"""Learner throughput and peak memory: spadework's GRPO step against trl's GRPOTrainer.

Prints one JSON object. Both sides train the default model (SmolLM2-135M-Instruct, fp32 on CPU)
with the same LoRA (r 16, alpha 32, the same seven projection layers), the same batch of
``--samples`` sequences of ``--prompt`` + ``--output`` random token ids (seeded), advantages
+1/-1 (none is 0, so our learner runs every sample: it skips only advantage-0 samples, which have
no gradient), ``--micro`` samples per forward/backward pass, AdamW, gradient clipping at 1.0, one thread.

What is timed, on each side, is one optimizer step on a prepared batch, generation excluded:

- spadework: ``Learner.step(samples)``: packing, forward, LM head over output positions,
  logprobs, entropy, loss, backward per micro-batch, gradient clipping, AdamW step.
- trl: for each micro-batch ``trainer.compute_loss(model, inputs)`` (its fused LM head,
  logprobs, entropy, loss) and ``trainer.accelerator.backward(loss)``, then
  ``accelerator.clip_grad_norm_`` and ``optimizer.step()``. ``GRPOTrainer.training_step`` is not
  called because it starts with ``_prepare_inputs``, which generates completions. ``loss_type``
  is ``bnpo`` (token mean), ``beta`` 0 (no reference pass), on-policy (no old logprobs), like our
  defaults.

Each side runs in its own subprocess, so its peak memory is its own. Memory is peak resident
set size from ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` (``peak_rss_mib``), and
``train_rss_mib`` = that peak minus the RSS right after the model was loaded, i.e. what training
adds (activations, logits, gradients, optimizer state). ``tokens_per_s`` counts trained
(output) tokens per second of wall time, best of ``--repeats`` timed steps after one warm-up step
(``--repeats 0``: the first step itself, for batches whose step takes minutes); ``tokens_per_cpu_s`` uses the
process's CPU time, steadier on a shared machine. ``ratio_vs_trl`` divides ours by trl's, same
run. ``--with-checkpointing`` adds our step with gradient checkpointing (activations recomputed
in the backward pass). With CUDA, a bf16 step of ours (and trl's) on the GPU is reported too; else "skipped".

``--settings "A;B;..."`` instead times only our step, once per list of ``TrainConfig``
overrides (``name=value`` joined by commas; an empty one is the defaults), each in its own
process, and reports each one's ratios to the first in the same run: the baseline goes first.
``--model`` picks the model (a registry name), ``--micro-tokens`` and ``--checkpointing`` the
micro-batch shape and recomputation, ``--threads`` torch's threads. The learner before and
after the chunked LM head and the bounded heap (:mod:`spadework.train.heap`), in the cpu-qwen
learner's shape (packed episodes of about 1,700 tokens, 2 per pass, recomputation, both cores)::

    .venv/bin/python benchmarks/learner.py --model qwen2.5-coder-0.5b-instruct \
        --settings "head_chunk=0,mmap_threshold=0;mmap_threshold=0;" \
        --samples 4 --prompt 1200 --output 500 --micro 2 --micro-tokens 4096 --checkpointing \
        --threads 2 --repeats 1

``--batch FILE`` replays instead the samples an iteration's learner step was given (written by
``benchmarks/iteration.py --save-batch FILE``), and ``--preset NAME`` starts from that preset's
``[learner]`` settings, so that a setting is measured on the main job's own work; each setting's
row then also has the tokens run (prompts included) per second and the first step's loss and
gradient norm, which a change that should not change the maths must leave equal::

    .venv/bin/python benchmarks/learner.py --model qwen2.5-coder-0.5b-instruct --preset cpu-qwen \
        --batch /tmp/batch.jsonl --threads 2 --repeats 1 --settings ";gradient_checkpointing=false"

Usage: .venv/bin/python benchmarks/learner.py [--samples 16 --prompt 256 --output 128 --micro 4
       --repeats 2] [--with-checkpointing]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from _memory import peak_rss_mib, rss_mib

os.environ.setdefault("OMP_NUM_THREADS", "1")


def _batch(args: argparse.Namespace, vocab: int) -> list[tuple[list[int], list[int], float]]:
    import random

    rng = random.Random(0)
    return [([rng.randrange(100, vocab) for _ in range(args.prompt)],
             [rng.randrange(100, vocab) for _ in range(args.output)], 1.0 if i % 2 else -1.0)
            for i in range(args.samples)]


def _ours(policy, batch, args, device: str, checkpointing: bool = False):
    import dataclasses

    from spadework.train import Learner, Sample, TrainConfig
    from spadework.types import Sampling

    settings = {"micro_batch_size": args.micro, "micro_batch_tokens": args.micro_tokens,
                "gradient_checkpointing": checkpointing or args.checkpointing, "threads": args.threads}
    if args.preset:
        from spadework.config import preset

        settings = {**dataclasses.asdict(preset(args.preset).learner), "threads": args.threads}
    learner = Learner(policy, TrainConfig(**{**settings, **_overrides(args.setting)}))
    if args.batch:
        samples = _saved(args.batch)
    else:
        samples = [Sample("agent", tuple(p), tuple(o), tuple([-1.0] * len(o)), a, Sampling(1.0))
                   for p, o, a in batch]
    return lambda: learner.step(samples)


def _saved(path: str) -> list:
    """The samples ``benchmarks/iteration.py --save-batch`` wrote to ``path``."""
    from spadework.train.batch import sample_from_dict

    with open(path) as f:
        return [sample_from_dict(json.loads(line)) for line in f if line.strip()]


def _trl(policy, batch, args, device: str):
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    from spadework.settings.learner import DEFAULT_TARGETS

    cfg = GRPOConfig(
        output_dir=os.path.join(args.tmp, "trl"), per_device_train_batch_size=args.micro,
        gradient_accumulation_steps=args.samples // args.micro, num_generations=args.micro,
        max_completion_length=args.output, learning_rate=1e-5, weight_decay=0.1, adam_beta2=0.98,
        max_grad_norm=1.0, beta=0.0, loss_type="bnpo", epsilon=0.2, epsilon_high=0.28,
        use_cpu=device == "cpu", bf16=device != "cpu", report_to=[], logging_steps=10**9,
        save_strategy="no",
    )
    lora = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=list(DEFAULT_TARGETS),
                      task_type="CAUSAL_LM")
    trainer = GRPOTrainer(model=policy.model, reward_funcs=lambda completions, **kw: [0.0] * len(completions),
                          args=cfg, train_dataset=Dataset.from_dict({"prompt": ["hi"] * 16}),
                          processing_class=policy.tokenizer, peft_config=lora)
    trainer.create_optimizer()
    model = trainer.model
    trainer.current_gradient_accumulation_steps = args.samples // args.micro
    dev = next(model.parameters()).device
    micro = []
    for s in range(0, len(batch), args.micro):
        part = batch[s : s + args.micro]
        micro.append({
            "prompt_ids": torch.tensor([p for p, _, _ in part], device=dev),
            "prompt_mask": torch.ones((len(part), args.prompt), dtype=torch.long, device=dev),
            "completion_ids": torch.tensor([o for _, o, _ in part], device=dev),
            "completion_mask": torch.ones((len(part), args.output), dtype=torch.long, device=dev),
            "advantages": torch.tensor([a for _, _, a in part], device=dev),
            "num_items_in_batch": torch.tensor(float(args.samples * args.output), device=dev),
        })

    def step():
        model.train()
        for inputs in micro:
            loss = trainer.compute_loss(model, inputs)
            trainer.accelerator.backward(loss)
        trainer.accelerator.clip_grad_norm_(model.parameters(), 1.0)
        trainer.optimizer.step()
        trainer.optimizer.zero_grad(set_to_none=True)

    return step


def worker(side: str, device: str, args: argparse.Namespace) -> dict:
    import torch

    from spadework.policy.hf import load_hf_policy

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    policy = load_hf_policy(args.model, device=device)
    loaded = rss_mib()
    batch = _batch(args, len(policy.tokenizer))
    if side == "trl":
        step = _trl(policy, batch, args, device)
    else:
        step = _ours(policy, batch, args, device, checkpointing=side == "spadework_ckpt")
    trainable = {n: p.detach().clone() for n, p in policy.model.named_parameters() if p.requires_grad}
    wall, cpu = time.perf_counter(), time.process_time()
    first = step()  # warm-up (timed as the only step with --repeats 0)
    first_wall, first_cpu = time.perf_counter() - wall, time.process_time() - cpu
    moved = any(bool((p.detach() != trainable[n]).any())
                for n, p in policy.model.named_parameters() if n in trainable)
    best_wall, best_cpu = float("inf"), float("inf")
    # ours counts the batch's trained tokens (a saved batch's too); trl's batch is the shape's
    tokens = first["tokens"] if isinstance(first, dict) else args.samples * args.output
    for _ in range(args.repeats):
        if device != "cpu":
            torch.cuda.synchronize()
        wall, cpu = time.perf_counter(), time.process_time()
        step()
        if device != "cpu":
            torch.cuda.synchronize()
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    if not args.repeats:
        best_wall, best_cpu = first_wall, first_cpu
    peak = peak_rss_mib()
    out = {"step_s": round(best_wall, 3), "tokens_per_s": round(tokens / best_wall, 1),
           "tokens_per_cpu_s": round(tokens / best_cpu, 1), "peak_rss_mib": round(peak, 1),
           "train_rss_mib": round(peak - loaded, 1), "lora_params": len(trainable),
           "weights_moved": moved}
    if isinstance(first, dict) and "tokens_run" in first:  # ours: the first step's own figures
        out.update(tokens_run=first["tokens_run"], run_tokens_per_s=round(first["tokens_run"] / best_wall, 1),
                   loss=first["loss"], grad_norm=first["grad_norm"],
                   importance_ratio=(first.get("importance_ratio") or {}).get("all"))
    if device != "cpu":
        out["peak_cuda_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    return out


def _run(side: str, device: str, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, __file__, "--worker", side, "--device", device, "--samples",
           str(args.samples), "--prompt", str(args.prompt), "--output", str(args.output),
           "--micro", str(args.micro), "--repeats", str(args.repeats), "--tmp", args.tmp,
           "--micro-tokens", str(args.micro_tokens), "--threads", str(args.threads)]
    cmd += ["--model", args.model] if args.model else []
    cmd += ["--checkpointing"] if args.checkpointing else []
    cmd += ["--setting", args.setting] if args.setting else []
    cmd += ["--batch", args.batch] if args.batch else []
    cmd += ["--preset", args.preset] if args.preset else []
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1:] or ["exit %d" % done.returncode]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _compare(device: str, args: argparse.Namespace) -> dict:
    ours, trl = _run("spadework", device, args), _run("trl", device, args)
    row = {"spadework": ours, "trl": trl}
    if args.with_checkpointing:
        row["spadework_checkpointing"] = _run("spadework_ckpt", device, args)
    if "error" not in ours and "error" not in trl:
        row["ratio_vs_trl"] = {
            "tokens_per_s": round(ours["tokens_per_s"] / trl["tokens_per_s"], 3),
            "tokens_per_cpu_s": round(ours["tokens_per_cpu_s"] / trl["tokens_per_cpu_s"], 3),
            "train_rss": round(ours["train_rss_mib"] / max(trl["train_rss_mib"], 1e-9), 3),
        }
    return row


def _overrides(text: str) -> dict:
    """``"head_chunk=0,mmap_threshold=0"`` -> ``{"head_chunk": 0, "mmap_threshold": 0}``."""
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.partition("=")
        out[name.strip()] = json.loads(value)
    return out


def _settings(args: argparse.Namespace, batch: dict) -> dict:
    """Our step once per setting in ``args.settings``; ratios to the first."""
    rows = {}
    for setting in args.settings.split(";"):
        args.setting = setting.strip()
        label = args.setting or "defaults"
        rows[label] = _run("spadework", args.device, args)
        print(f"{label}: {rows[label]}", file=sys.stderr, flush=True)
    first = next(iter(rows.values()))
    ratios = {k: {"tokens_per_s": round(r["tokens_per_s"] / first["tokens_per_s"], 3),
                  "tokens_per_cpu_s": round(r["tokens_per_cpu_s"] / first["tokens_per_cpu_s"], 3),
                  "peak_rss": round(r["peak_rss_mib"] / first["peak_rss_mib"], 3)}
              for k, r in rows.items() if "error" not in r and "error" not in first}
    return {"model": args.model or "smollm2-135m-instruct", "batch": batch, "threads": args.threads,
            "settings": rows, "ratio_vs_first": ratios}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--prompt", type=int, default=256)
    ap.add_argument("--output", type=int, default=128)
    ap.add_argument("--micro", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--worker", choices=["spadework", "spadework_ckpt", "trl"])
    ap.add_argument("--with-checkpointing", action="store_true",
                    help="also time our step with gradient checkpointing (less memory)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--tmp", default="/tmp/spadework-learner-bench")
    ap.add_argument("--model", default=None, help="registry name (default: the default model)")
    ap.add_argument("--micro-tokens", type=int, default=8192, help="TrainConfig.micro_batch_tokens")
    ap.add_argument("--checkpointing", action="store_true", help="our step with recomputation")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--setting", default="", help=argparse.SUPPRESS)
    ap.add_argument("--settings", default=None,
                    help="';'-separated TrainConfig overrides (name=value,...): time only our "
                         "step, one process each, the first the baseline")
    ap.add_argument("--batch", default=None, metavar="FILE",
                    help="replay the samples benchmarks/iteration.py --save-batch wrote (with --settings)")
    ap.add_argument("--preset", default=None,
                    help="start from this preset's [learner] settings (with --settings)")
    args = ap.parse_args()
    if (args.batch or args.preset) and args.settings is None and not args.worker:
        ap.error("--batch and --preset go with --settings (they time our step only)")
    if args.samples % args.micro:
        ap.error("--samples must be a multiple of --micro")
    if args.worker:
        print(json.dumps(worker(args.worker, args.device, args)))
        return
    batch = {"samples": args.samples, "prompt_tokens": args.prompt, "output_tokens": args.output,
             "micro_batch": args.micro, "micro_batch_tokens": args.micro_tokens,
             "checkpointing": args.checkpointing, "lora_r": 16}
    if args.batch:
        saved = _saved(args.batch)
        batch = {"file": args.batch, "samples": len(saved), "trained_tokens": sum(s.n_tokens for s in saved),
                 "preset": args.preset}
    if args.settings is not None:
        print(json.dumps(_settings(args, batch), indent=1))
        return
    import torch

    result = {"model": "smollm2-135m-instruct", "batch": {
        "samples": args.samples, "prompt_tokens": args.prompt, "output_tokens": args.output,
        "micro_batch": args.micro, "lora_r": 16}, "threads": 1, "cpu_fp32": _compare("cpu", args)}
    result["cuda_bf16"] = _compare("cuda", args) if torch.cuda.is_available() else "skipped: no CUDA"
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
