"""Milliseconds per decode step of the transformers backend against transformers' own
``generate``, on the architecture staged for the GPU check, as JSON.

Run it where ``scripts/gpu_check.sh`` runs (the same staging, the same ``.gpu-check`` carried),
with the repository and the staged site on the path::

    PYTHONPATH=$PWD:$PWD/.gpu-check/site python3 scripts/gpu_decode.py [--device cuda] [--quick]

Each figure is the second of two identical calls (the first meets new shapes: on a GPU each new
key length is a new attention shape), over ``--rows`` rows of ``--prompt`` random prompt tokens
and ``--new`` new tokens: ``HFPolicy.chat`` (per-row seeded sampling and logprobs),
``generate`` with its dynamic cache, and ``generate`` with a static cache, which transformers
compiles with ``torch.compile`` (its first call, the compilation, is reported too).

Measured 2026-12-04 on one H200 (torch 2.11, transformers 5.17, Qwen2.5-Coder-0.5B's
architecture, bf16, 32 rows): ``chat`` 22.4 ms a step, ``generate`` 21.7 ms, ``generate`` with
a static cache 3.8 ms (8,389 tokens/s at 32 x 128, after a 26 s first call); docs/cluster.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_check  # noqa: E402  (this folder is on sys.path as a script)


def _timed(fn, device: str) -> tuple[float, float]:
    """Seconds of the first and of the second call of ``fn``."""
    out = []
    for _ in range(2):
        gpu_check._sync(device)
        start = time.perf_counter()
        fn()
        gpu_check._sync(device)
        out.append(time.perf_counter() - start)
    return out[0], out[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", choices=("bfloat16", "float16", "float32"))
    ap.add_argument("--model-dir", type=Path, default=gpu_check.STAGE_DIR / "model")
    ap.add_argument("--rows", type=int, default=32)
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--quick", action="store_true", help="a 2-layer model (tests, CPU)")
    ap.add_argument("--no-static", action="store_true", help="skip the compiled static cache")
    args = ap.parse_args()
    args.dtype = args.dtype or ("float32" if args.device == "cpu" else "bfloat16")
    args.seed = 0
    import torch

    from spadework.policy.base import SamplingParams

    torch.manual_seed(0)
    policy = gpu_check.build_policy(args, args.rows)
    model = policy.model
    ids = torch.randint(100, 20000, (args.rows, args.prompt), device=args.device)
    mask = torch.ones_like(ids)
    convs = [[{"role": "user", "content": f"Tell me about topic {i} in detail."}]
             for i in range(args.rows)]
    params = SamplingParams(temperature=0.7, max_tokens=args.new, seed=0)
    steps: list[int] = []

    def chat() -> None:
        done = policy.chat(convs, params)
        steps.append(max(len(c.output_ids) for c in done))

    def generate(**kw) -> None:
        model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=args.new,
                       min_new_tokens=args.new, do_sample=True, temperature=0.7, pad_token_id=0,
                       **kw)

    out: dict = {"device": args.device, "dtype": args.dtype, "rows": args.rows,
                 "prompt_tokens": args.prompt, "new_tokens": args.new}
    first, second = _timed(chat, args.device)
    out["chat"] = {"first_s": round(first, 3), "ms_per_step": round(1000 * second / steps[-1], 2)}
    first, second = _timed(generate, args.device)
    out["generate"] = {"first_s": round(first, 3),
                       "ms_per_step": round(1000 * second / args.new, 2)}
    if not args.no_static:
        try:
            first, second = _timed(lambda: generate(cache_implementation="static"), args.device)
            out["generate_static"] = {"first_s": round(first, 3),
                                      "ms_per_step": round(1000 * second / args.new, 2)}
        except Exception as e:  # an older transformers without it says so, the rest stands
            out["generate_static"] = {"error": f"{type(e).__name__}: {e}"[:300]}
    for key in ("chat", "generate", "generate_static"):
        if "ms_per_step" in out.get(key, {}):
            out[key]["tokens_per_s"] = round(args.rows * 1000 / out[key]["ms_per_step"], 1)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
