"""A play stage alone, turn by turn and through the engine's stream: where its time goes.

Plays the first four games starters at level 1, ``plays`` times per arm (40 episodes on the
cpu-qwen preset), with the preset's agent model, engine settings and ``PlayConfig``, once per
mode in ``--modes`` (the first is the baseline), each on a fresh KV cache (``release()``), in
one process and the same conditions. Per mode it prints the wall time, the engine's counters
(prompt tokens computed and served from cache, decode steps, rows sampled and their mean per
step), and how the engine's own time splits between steps that prefill prompts and steps that
only decode (with the mean seconds of a decode step by how many rows it held); then the
replies' lengths and wins. ``turns`` is one chat call per turn of all live episodes
(``PlayConfig.continuous = false``); ``continuous`` is the stream; ``scattered`` is the stream
with each decoding row left on the sequence it holds, as before the engine moved them onto
consecutive ones (llama.cpp runs one forward pass per run of consecutive sequences).

Per mode it also fits each step's seconds to its forward passes (llama.cpp's split rule,
counted), tokens fed and positions (``prefill_fit``), and counts the prompt tokens computed
that repeat a text the stage had already computed (``prompt_tokens_repeating_a_computed_prefix``).

Measured 2026-12-06 (``--modes scattered,continuous``): see docs/engine.md, "Rows on
consecutive sequences"; the fit, 2026-12-07: "Where a play stage's prefill goes".

Usage: OMP_NUM_THREADS=1 .venv/bin/python benchmarks/play.py
       [--preset cpu-qwen] [--modes turns,continuous,scattered] [--weights bf16] [--seed 1]
       [--threads N] [--flash-attn on|off|on,off]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _timing import engine_steps, flash_attn_settings, step_work  # noqa: E402  (on sys.path)


def prefill_fit(steps: list, work: list) -> dict:
    """Least squares of each step's seconds on its forward passes, tokens fed and positions
    (thousands; attention's work), over all steps, and the prefill steps' seconds split by
    those terms: is a prefill step paying per pass (tokens of many prompts split into small
    passes) or per token?"""
    import numpy as np

    x = np.array([[w["passes"], n, w["positions"] / 1000] for (n, _, _), w in zip(steps, work)])
    y = np.array([secs for _, _, secs in steps])
    coef = np.linalg.lstsq(x, y, rcond=None)[0]
    residual = y - x @ coef
    prefill = np.array([n > rows for n, rows, _ in steps])
    split = (x[prefill] * coef).sum(axis=0)
    return {"s_per_pass": round(float(coef[0]), 4), "s_per_token": round(float(coef[1]), 5),
            "s_per_1000_positions": round(float(coef[2]), 5),
            "r2": round(float(1 - residual.var() / y.var()), 3),
            "prefill_passes": int(x[prefill, 0].sum()),
            "prefill_steps_s_by_passes_tokens_positions": [round(float(v), 1) for v in split]}


def one_mode(engine, sandbox, jobs, cfg, seed: int) -> dict:
    from spadework.rollout import play

    engine.release()
    counters = engine.COUNTERS
    before = {k: getattr(engine, k) for k in counters}
    start = time.perf_counter()
    with engine_steps(engine) as steps, step_work(engine) as work:  # tokens, rows, seconds
        episodes = play(engine, sandbox, jobs, cfg, seed=seed)
    wall = time.perf_counter() - start
    out = {k: getattr(engine, k) - before[k] for k in counters}
    prefill = [s for s in steps if s[0] > s[1]]
    decode = [s for s in steps if s[0] == s[1]]
    by_rows = defaultdict(list)
    for _, rows, secs in decode:
        by_rows[rows].append(secs)
    lengths = sorted(len(t.output_ids) for e in episodes for t in e.turns)
    return {
        "wall_s": round(wall, 1), **out,
        "occupancy": round(out["sampled_rows"] / max(out["decode_steps"], 1), 2),
        "output_tokens_per_s": round(out["sampled_rows"] / wall, 1),
        "prefill_steps": len(prefill), "prefill_steps_s": round(sum(s[2] for s in prefill), 1),
        "decode_steps_s": round(sum(s[2] for s in decode), 1),
        "decode_step_ms_by_rows": {r: round(1000 * sum(v) / len(v), 1) for r, v in sorted(by_rows.items())},
        "kv_cells_per_sequence": engine._ctx_shape[1],
        "prompt_tokens_repeating_a_computed_prefix": sum(w["repeated"] for w in work),
        "prefill_fit": prefill_fit(steps, work),
        "replies": len(lengths), "reply_tokens_p50": lengths[len(lengths) // 2],
        "reply_tokens_p90": lengths[int(0.9 * len(lengths))], "reply_tokens_max": lengths[-1],
        "replies_cut_at_max_tokens": sum(t.finish_reason == "length" for e in episodes for t in e.turns),
        "won": sum(1 for e in episodes if e.rewards and max(e.rewards) >= 1), "episodes": len(episodes),
    }


#: ``turns``: one chat call per turn; ``continuous``: the stream; ``scattered``: the stream with
#: its decoding rows left on the sequences they hold (not moved onto consecutive ones).
MODES = ("turns", "continuous", "scattered")


def main() -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="cpu-qwen")
    ap.add_argument("--modes", default="turns,continuous")
    ap.add_argument("--weights", default="bf16")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=None,
                    help="engine threads (default: the preset's; \"auto\" is half the cores)")
    ap.add_argument("--flash-attn", default="on",
                    help="on, off or on,off: attention as flash attention or not; with both, "
                         "every mode runs under each and is reported as MODE/off")
    args = ap.parse_args()
    settings = flash_attn_settings(args.flash_attn)

    import torch

    torch.set_num_threads(1)
    from spadework.config import preset
    from spadework.library import starter_envs
    from spadework.policy.load import load_policy
    from spadework.rollout import regret_jobs
    from spadework.sandbox import Limits, Sandbox

    cfg = preset(args.preset)
    envs = starter_envs("games")[:4]
    jobs = [j for e in envs for j in regret_jobs(e, run_seed=0, plays=cfg.plays, level=1)]
    engine = load_policy("llamacpp", cfg.model, max_batch_size=cfg.policy_batch,
                         threads=args.threads or cfg.engine_threads, weights=args.weights)
    result = {"benchmark": "play", "preset": args.preset, "model": cfg.model, "weights": args.weights,
              "threads": engine.threads, "flash_attn": args.flash_attn,
              "envs": [e.class_name for e in envs], "jobs": len(jobs), "modes": {}}
    with Sandbox(Limits()) as box:
        for setting in settings:
            engine.flash_attn = setting == "on"  # read when one_mode's release() remakes it
            for mode in args.modes.split(","):
                if mode not in MODES:
                    raise SystemExit(f"--modes: {mode!r} is not one of {', '.join(MODES)}")
                play_cfg = dataclasses.replace(cfg.play, continuous=mode != "turns")
                if mode == "scattered":  # rows stay on whichever sequences they hold
                    engine._cells.compact = lambda *a, **k: {}
                else:
                    vars(engine._cells).pop("compact", None)
                name = mode if len(settings) == 1 else f"{mode}/{setting}"
                result["modes"][name] = one_mode(engine, box, jobs, play_cfg, args.seed)
                print(name, result["modes"][name], file=sys.stderr, flush=True)
    names = list(result["modes"])
    for name in names[1:]:
        result["modes"][name]["speedup_vs_" + names[0]] = round(
            result["modes"][names[0]]["wall_s"] / result["modes"][name]["wall_s"], 2)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
