"""How much probability top-k/top-p truncation removes where the agent samples: the convention
question of the importance ratio (``spadework.train.grpo``).

The sampler draws each token from the softmax at temperature T restricted to the top-k tokens
and then to the smallest set holding top-p of the mass, renormalised; spadework's backends
(transformers, llama.cpp, ``spadework serve``) report, and the learner scores, the token's
log-probability under the full softmax at T, so their ratio is 1 when the weights agree. vLLM's
``processed_logprobs`` report the truncated, renormalised log-probability instead: higher by
``-log(kept mass)``, the mass of the kept set under the full softmax. This script measures that
gap on real replies: it plays ``--plays`` unhinted episodes of each games starter at level 1
with the agent of ``--preset`` (llama.cpp, the run's sampling settings), then teacher-forces the
replies through the transformers model and reports, over every sampled token, the kept mass's
distribution, the share of tokens with kept mass below 0.9, and the mean and worst per-token
log-ratio a truncated-logprob sampler would put into the importance ratio.

Usage: OMP_NUM_THREADS=1 .venv/bin/python benchmarks/kept_mass.py [--preset cpu-qwen] [--plays 4]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def kept_mass(logits, temperature: float, top_k: int, top_p: float):
    """Per position, the full-softmax mass (at ``temperature``) of the set top-k then top-p keep,
    as the samplers build it (``spadework.policy.decode.sample_tokens``).

    >>> import torch
    >>> float(kept_mass(torch.tensor([[2.0, 1.0, 0.0, -9.0]]), 1.0, 0, 0.5)[0]) > 0.5
    True
    """
    import torch

    probs = torch.softmax(logits.float() / temperature, dim=-1)
    sorted_p, _ = probs.sort(dim=-1, descending=True)
    if top_k:
        sorted_p = sorted_p[..., :top_k]
    total = sorted_p.sum(dim=-1, keepdim=True)
    within = sorted_p / total  # the top-k set renormalised, as top-p sees it
    cum = within.cumsum(dim=-1)
    keep = (cum - within) < top_p  # a token is kept while the mass before it is under top_p
    return (sorted_p * keep).sum(dim=-1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="cpu-qwen")
    ap.add_argument("--plays", type=int, default=4)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()

    import torch

    from spadework.config import preset
    from spadework.library import starter_envs
    from spadework.policy.hf import load_hf_policy
    from spadework.policy.load import load_policy
    from spadework.rollout import PlayJob, play
    from spadework.sandbox import Limits, Sandbox
    from spadework.seeding import episode_seed

    torch.set_num_threads(1)
    cfg = preset(args.preset)
    p = cfg.play
    t0 = time.time()
    sampler = load_policy("llamacpp", cfg.role_model("agent"), max_batch_size=cfg.policy_batch)
    jobs = [PlayJob(e, episode_seed(args.seed, e.env_id, k), "no_hint", k)
            for e in starter_envs("games") for k in range(args.plays)]
    with Sandbox(Limits()) as sb:
        eps = play(sampler, sb, jobs, p, seed=args.seed)
    turns = [t for e in eps for t in e.turns if t.output_ids]
    play_s = time.time() - t0
    del sampler
    model = load_hf_policy(cfg.role_model("agent")).model
    masses: list[float] = []
    with torch.no_grad():
        for t in turns:
            ids = torch.tensor([list(t.prompt_ids) + list(t.output_ids)])
            logits = model(ids).logits[0, len(t.prompt_ids) - 1:-1]
            masses += kept_mass(logits, p.temperature, p.top_k, p.top_p).tolist()
    masses.sort()
    logs = [-math.log(m) for m in masses]
    n = len(masses)
    print(json.dumps({
        "benchmark": "kept_mass", "preset": args.preset, "agent_model": cfg.role_model("agent"),
        "temperature": p.temperature, "top_k": p.top_k, "top_p": p.top_p,
        "episodes": len(eps), "turns": len(turns), "tokens": n,
        "share_kept_below_0.9": round(sum(m < 0.9 for m in masses) / n, 4),
        "share_kept_below_0.99": round(sum(m < 0.99 for m in masses) / n, 4),
        "kept_min": round(masses[0], 4), "kept_p01": round(masses[n // 100], 4),
        "kept_median": round(masses[n // 2], 4),
        "truncated_minus_full_logprob_mean": round(sum(logs) / n, 5),
        "truncated_minus_full_logprob_max": round(max(logs), 4),
        "play_seconds": round(play_s, 1), "seconds": round(time.time() - t0, 1)}, indent=1))


if __name__ == "__main__":
    main()
