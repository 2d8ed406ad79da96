"""Would speculative decoding speed up the frozen designer? The 1.5B target with a 0.5B draft.

Issue 26 names it as worth a measurement: the Qwen2.5-Coder 0.5B and 1.5B share a tokenizer, so
the 0.5B can propose ``k`` tokens that the 1.5B then checks in one forward pass of ``k + 1``
tokens. With speculative sampling (Leviathan et al., 2023; Chen et al., 2023) the output keeps
the target's distribution exactly; what it gains depends on two measured things:

- **acceptance**: at each position of a real design reply the draft's token is kept with
  probability ``alpha_t = sum_x min(p_t(x), q_t(x))`` (``p`` the target's and ``q`` the draft's
  next-token distributions after the designer's sampler: temperature, top-k, then top-p). Both
  models are teacher-forced through the design stage's own prompts and replies, read from a
  run's archive (``attempts``: the token ids the designer was given and wrote);
- **cost**: the time of one draft step and of one target step of ``k + 1`` tokens, against one
  target step of one token, each measured on this machine after the same long prompt.

From those, for each ``k``, the expected tokens a step yields starting at position ``t`` are
``1 + sum_{j=1..k} prod_{i<j} alpha_{t+i}``, and the speed-up over plain decoding is that mean
divided by the step's cost in target steps (``k * draft + verify(k + 1)``). This is for one row
at a time; a design stage decodes its four slots in one batch, where a target step of four
rows costs little more than one of a single row, so the gain there is smaller still.

Usage: OMP_NUM_THREADS=1 .venv/bin/python benchmarks/speculative.py [--archive RUN/archive.sqlite]
    [--attempts 4] [--draft-weights gguf] [--target-weights gguf] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from pathlib import Path
from statistics import mean, median

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET, DRAFT = "qwen2.5-coder-1.5b-instruct", "qwen2.5-coder-0.5b-instruct"


def processed(logits, temperature: float, top_k: int, top_p: float) -> dict[int, float]:
    """The sampler's distribution from one row of logits: softmax at ``temperature`` over the
    ``top_k`` largest, then the smallest set holding ``top_p`` of the mass, renormalised.

    >>> import numpy as np
    >>> d = processed(np.array([3.0, 2.0, 1.0, -5.0]), 1.0, 2, 1.0)
    >>> sorted(d), round(sum(d.values()), 6)
    ([0, 1], 1.0)
    """
    import numpy as np

    order = np.argsort(-logits)[:top_k] if top_k > 0 else np.argsort(-logits)
    z = logits[order] / temperature
    p = np.exp(z - z.max())
    p /= p.sum()
    keep = int(np.searchsorted(np.cumsum(p), top_p) + 1)
    p = p[:keep] / p[:keep].sum()
    return {int(i): float(x) for i, x in zip(order[:keep], p)}


def overlap(p: dict[int, float], q: dict[int, float]) -> float:
    """``sum_x min(p(x), q(x))``: the probability speculative sampling keeps the draft's token.

    >>> overlap({1: 0.5, 2: 0.5}, {1: 1.0}), overlap({1: 1.0}, {2: 1.0})
    (0.5, 0.0)
    """
    return sum(min(v, q.get(k, 0.0)) for k, v in p.items())


def load(name: str, weights: str, n_ctx: int, threads: int):
    """A high-level ``llama_cpp.Llama`` on the model's file as the loop loads it (the probe's
    answer about extra buffer types respected), every position's logits kept."""
    import llama_cpp
    import llama_cpp.llama_cpp as lib

    from spadework.paths import model_cache_dir
    from spadework.policy.gguf_copy import check_runs, extra_buffers, weights_file

    path = weights_file(model_cache_dir() / name / f"{name}.gguf", weights)
    check_runs(path)
    default = lib.llama_model_default_params

    def params():
        p = default()
        p.use_extra_bufts = extra_buffers(path)
        return p

    lib.llama_model_default_params = params
    try:
        return llama_cpp.Llama(model_path=str(path), n_ctx=n_ctx, n_batch=512, n_threads=threads,
                               n_threads_batch=threads, logits_all=True, verbose=False)
    finally:
        lib.llama_model_default_params = default


def distributions(llm, prompt: list[int], output: list[int], sampler) -> list[dict[int, float]]:
    """The processed next-token distribution at every position of ``output``."""
    llm.reset()
    llm.eval(prompt + output[:-1])
    first = len(prompt) - 1
    return [processed(llm.scores[first + t], *sampler) for t in range(len(output))]


def step_costs(llm, prompt: list[int], ks: list[int], repeats: int) -> dict[int, float]:
    """Median seconds of one forward pass of ``n`` new tokens after ``prompt`` is cached, for
    n = 1 and each k + 1."""
    llm.reset()
    llm.eval(prompt)
    out = {}
    for n in sorted({1, *[k + 1 for k in ks]}):
        times = []
        for r in range(repeats):
            llm.n_tokens = len(prompt)  # the next eval drops what followed the prompt
            t0 = time.perf_counter()
            llm.eval(prompt[len(prompt) - n - r:len(prompt) - r])
            times.append(time.perf_counter() - t0)
        out[n] = median(times)
    return out


def expected_tokens(alphas: list[float], k: int) -> float:
    """Mean over start positions of ``1 + sum_{j=1..k} prod_{i<j} alpha_{t+i}`` (a step near the
    reply's end can keep no more than is left of it).

    >>> expected_tokens([0.5, 0.5], 1), expected_tokens([0.0] * 2, 3), expected_tokens([1.0] * 4, 2)
    (1.5, 1.0, 2.75)
    """
    total = 0.0
    for t in range(len(alphas)):
        e, run = 1.0, 1.0
        for j in range(k):
            run *= alphas[t + j] if t + j < len(alphas) else 0.0
            e += run
        total += e
    return total / len(alphas)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--archive", default="runs/main/archive.sqlite",
                    help="a run's archive.sqlite with design attempts (default: make run's)")
    ap.add_argument("--attempts", type=int, default=4)
    ap.add_argument("--target-weights", default="gguf")
    ap.add_argument("--draft-weights", default="gguf")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ks", default="1,2,3,4,6")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--max-output", type=int, default=0, help="cut each reply (0: whole)")
    args = ap.parse_args()

    from spadework.archive.records import unpack_ints
    from spadework.config import preset

    d = preset("cpu-qwen").design
    sampler = (d.temperature, d.top_k, d.top_p)
    ks = [int(k) for k in args.ks.split(",")]
    if not Path(args.archive).is_file():
        raise SystemExit(f"no archive at {args.archive}: run `make run` first, or pass --archive "
                         "RUN/archive.sqlite of a run with design attempts")
    con = sqlite3.connect(f"file:{args.archive}?mode=ro", uri=True)
    rows = con.execute("SELECT iteration, slot, prompt_ids, output_ids FROM attempts "
                       "WHERE output_ids IS NOT NULL ORDER BY iteration, slot, attempt LIMIT ?",
                       (args.attempts,)).fetchall()
    samples = [(unpack_ints(p), unpack_ints(o)[: args.max_output or None]) for _, _, p, o in rows]
    samples = [(p, o) for p, o in samples if p and len(o) > 1]
    if not samples:
        raise SystemExit(f"no design attempt with tokens in {args.archive}")
    n_ctx = max(len(p) + len(o) for p, o in samples) + 16
    t0 = time.perf_counter()
    dists, costs = {}, {}
    for role, name, weights in (("target", TARGET, args.target_weights),
                                ("draft", DRAFT, args.draft_weights)):
        llm = load(name, weights, n_ctx, args.threads)
        dists[role] = []
        for i, (p, o) in enumerate(samples):
            dists[role].append(distributions(llm, p, o, sampler))
            print(f"{role}: attempt {i + 1} of {len(samples)} ({len(p)} + {len(o)} tokens, "
                  f"{time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
        costs[role] = step_costs(llm, samples[0][0], ks, args.repeats)
        del llm
    alphas = [[overlap(p, q) for p, q in zip(tp, dp)]
              for tp, dp in zip(dists["target"], dists["draft"])]
    flat = [a for seq in alphas for a in seq]
    one = costs["target"][1]
    draft = costs["draft"][1] / one
    per_k = []
    for k in ks:
        tokens = mean(expected_tokens(seq, k) for seq in alphas)
        step = k * draft + costs["target"][k + 1] / one
        per_k.append({"k": k, "tokens_per_step": round(tokens, 3),
                      "step_cost_in_target_steps": round(step, 3),
                      "speedup": round(tokens / step, 3)})
    print(json.dumps({
        "archive": args.archive, "attempts": len(samples),
        "output_tokens": len(flat), "sampler": {"temperature": d.temperature, "top_k": d.top_k,
                                                "top_p": d.top_p},
        "weights": {"target": args.target_weights, "draft": args.draft_weights},
        "threads": args.threads,
        "acceptance": {"mean": round(mean(flat), 4), "median": round(median(flat), 4),
                       "share_above_0.9": round(mean(a > 0.9 for a in flat), 4),
                       "share_below_0.5": round(mean(a < 0.5 for a in flat), 4)},
        "seconds_per_forward": {role: {str(n): round(s, 4) for n, s in c.items()}
                                for role, c in costs.items()},
        "draft_step_in_target_steps": round(draft, 3),
        "per_k": per_k,
        "seconds": round(time.perf_counter() - t0, 1)}, indent=1))


if __name__ == "__main__":
    main()
