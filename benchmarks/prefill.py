"""Prefill speed of the llama.cpp engine by prompt length and by rows, as JSON.

A loop stage's generation is mostly prompt tokens (a design prompt is about 2,700 tokens, a
play turn restates the game), so the engine's prefill rate at the stage's prompt lengths is
what its in-loop speed should be compared with. Each cell prefills prompts that share no prefix
(each row's own number first) and samples one token, nothing cached (the engine's cache is
released between cells); ``tokens_per_s`` divides the tokens the engine computed (its
``prefilled_tokens`` counter) by the wall time. ``ratio_vs_shortest`` divides each one-row
cell's rate by the shortest prompt's, measured in the same run.

Measured 2026-12-04 with this script's defaults (the 0.5B, bf16, two threads, ``--rows 1,4,16``):
312, 346, 272 and 195 tokens/s at 142, 778, 1,884 and 3,779 tokens; 316, 302 and 302 at 1, 4 and
16 rows. The 1.5B's Q4_1 file (``--model qwen2.5-coder-1.5b-instruct --weights gguf``, measured
the same day with the same kind of prompts before this script kept them): 90, 90, 84 and 66
tokens/s at 145, 823, 1,999 and 4,004 tokens, 81-94 at 1, 4, 16 and 40 rows (docs/engine.md,
"The loop at the engine's speed").

``--design N``: a design stage's prompts instead: N fresh games design prompts as a run builds
them (held-out documents of ``benchmarks/designer_validity.py``, ``--examples`` modules drawn per
slot, 200 words, no memory), prefilled together twice: as built, where every slot opens with the
same system message (the setting's rules, contract and checklist) and the engine computes it once
and copies it, then with one line naming the slot put before the system message, so that no two
prompts share a prefix (the layout before those parts moved into the system message, when slots
shared only the 28-token role line). ``ratio`` divides the unshared cell's time by the shared one's.
Measured 2026-12-05 (``--model qwen2.5-coder-1.5b-instruct --weights gguf --design 4``, the
main job's design stage): 6,424 of 10,925 prompt tokens computed in 81.8 s, against 10,956 in
128.3 s unshared: 1.57x.

``--flash-attn on,off`` measures every cell under both attentions in one run, on one engine
(the second setting's cells under ``flash_attn_off`` or ``design_flash_attn_off``), and
``--decode-tokens K`` lets each row sample K tokens and splits each cell's time between the steps
that prefill and those that only decode. Measured 2026-12-07, two threads, alone
(``--flash-attn on,off --rows 1,16``): the 0.5B prefilled one prompt of 142-3,779 tokens
1.14-1.79x slower without flash attention (the first cell includes making the context) and 16
rows 1.19x faster; four design prompts with 256 tokens each (``--design 4 --decode-tokens 256
--shared-only --flash-attn on,off``), the 1.5B's Q4_1 file (``--model
qwen2.5-coder-1.5b-instruct --weights gguf``): 128.1 s with flash attention (prefill steps 60.9 s,
decode 65.4 s), 140.5 s without (73.5, 65.1); docs/engine.md, "Attention without flash
attention".

Usage: OMP_NUM_THREADS=1 .venv/bin/python benchmarks/prefill.py
       [--model qwen2.5-coder-0.5b-instruct] [--weights bf16] [--threads 2]
       [--lengths 8,50,120,230] [--rows 1,4,16,40] [--design N [--examples 3]]
       [--flash-attn on|off|on,off]
(``--lengths`` are facts per prompt, about 17 tokens each; ``--rows`` use about 180 tokens each.)
"""

from __future__ import annotations

import argparse
import json
import time

from _timing import engine_steps, flash_attn_settings  # (this folder is on sys.path)


def _prompt(row: int, facts: int) -> list[dict[str, str]]:
    body = " ".join(f"Fact {i + row}: river {i * (row + 1)} flows into lake {i * 7 % 13}."
                    for i in range(facts))
    return [{"role": "user", "content": f"Puzzle {row * 7919}. {body}\nSay yes."}]


def _cell(policy, convs, decode_tokens: int = 1) -> dict:
    from spadework.policy.base import SamplingParams

    before = policy.prefilled_tokens
    start = time.perf_counter()
    with engine_steps(policy) as steps:  # tokens fed, rows sampled, seconds
        done = policy.chat(convs, SamplingParams(temperature=0.7, max_tokens=decode_tokens,
                                                 seed=1))
    seconds = time.perf_counter() - start
    computed = policy.prefilled_tokens - before
    policy.release()
    cell = {"rows": len(convs), "prompt_tokens": sum(len(policy.prompt_ids(c)) for c in convs),
            "computed_tokens": computed, "seconds": round(seconds, 2),
            "tokens_per_s": round(computed / seconds, 1)}
    if decode_tokens > 1:  # the steps that prefill and the steps that only decode, apart
        cell.update({"sampled_tokens": sum(len(c.output_ids) for c in done),
                     "prefill_steps_s": round(sum(t for n, r, t in steps if n > r), 2),
                     "decode_steps": sum(1 for n, r, _ in steps if n == r),
                     "decode_steps_s": round(sum(t for n, r, t in steps if n == r), 2)})
    return cell


def _design_prompts(n: int, examples: int, unshared: bool) -> list:
    """``n`` design prompts as a run's design stage builds them (see the module docstring)."""
    import sys
    from pathlib import Path

    from spadework.corpus import truncate_words
    from spadework.default_corpus import load_default_corpus
    from spadework.designer import build_design_prompt
    from spadework.designer.examples import choose_examples
    from spadework.policy.base import Conversation
    from spadework.seeding import derive_rng
    from spadework.skills import skills_for

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from designer_validity import choose_documents

    docs = choose_documents(load_default_corpus().documents, "heldout", n)
    skills = skills_for("games")
    convs = []
    for slot, doc in enumerate(docs):
        msgs = build_design_prompt(truncate_words(doc.text, 200), skills[slot % len(skills)],
                                   examples=choose_examples(examples, derive_rng(0, 0, "examples",
                                                                                 slot, 0)),
                                   max_tokens=1024)
        if unshared:
            msgs = [{"role": "system", "content": f"Design slot {slot * 7919}.\n\n"
                     + msgs[0]["content"]}, *msgs[1:]]
        convs.append(Conversation(messages=msgs))
    return convs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    ap.add_argument("--weights", default="bf16", help="bf16, f16, q8_0 or gguf (the file itself)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lengths", default="8,50,120,230")
    ap.add_argument("--rows", default="1,4,16,40")
    ap.add_argument("--design", type=int, default=0,
                    help="prefill N design prompts, shared and unshared (see the docstring)")
    ap.add_argument("--examples", type=int, default=3, help="example modules per design prompt")
    ap.add_argument("--decode-tokens", type=int, default=1,
                    help="tokens each row samples (above 1, each cell also splits its time "
                         "between the steps that prefill and those that only decode)")
    ap.add_argument("--shared-only", action="store_true",
                    help="with --design: the prompts as built only, not the unshared layout")
    ap.add_argument("--flash-attn", default="on",
                    help="on, off or on,off: attention as flash attention or not (the second is "
                         "measured in the same run and reported under flash_attn_off)")
    args = ap.parse_args()
    settings = flash_attn_settings(args.flash_attn)
    if args.decode_tokens < 1:
        raise SystemExit(f"--decode-tokens must be at least 1, got {args.decode_tokens}")
    from spadework.policy.llamacpp_load import load_llamacpp_policy

    if args.design:
        policy = load_llamacpp_policy(args.model, max_batch_size=args.design,
                                      threads=args.threads, weights=args.weights)
        result = {"benchmark": "prefill", "model": args.model, "weights": args.weights,
                  "threads": args.threads, "decode_tokens": args.decode_tokens}
        for setting in settings:
            policy.flash_attn = setting == "on"
            cells = {"flash_attn": setting, "shared": _cell(
                policy, _design_prompts(args.design, args.examples, False), args.decode_tokens)}
            if not args.shared_only:
                cells["unshared"] = _cell(policy, _design_prompts(args.design, args.examples,
                                                                  True), args.decode_tokens)
                cells["ratio"] = round(cells["unshared"]["seconds"] / cells["shared"]["seconds"],
                                       3)
            result["design" if setting == settings[0] else "design_flash_attn_" + setting] = cells
        print(json.dumps(result, indent=1))
        return

    rows = [int(x) for x in args.rows.split(",") if x]
    policy = load_llamacpp_policy(args.model, max_batch_size=max(rows + [1]), threads=args.threads,
                                  weights=args.weights)
    result = {"benchmark": "prefill", "model": args.model, "weights": args.weights,
              "threads": args.threads}
    for setting in settings:
        policy.flash_attn = setting == "on"  # read when the next context is made (_cell frees it)
        by_length = [_cell(policy, [_prompt(0, int(f))], args.decode_tokens)
                     for f in args.lengths.split(",") if f]
        for cell in by_length:
            cell["ratio_vs_shortest"] = round(cell["tokens_per_s"] / by_length[0]["tokens_per_s"],
                                              3)
        by_rows = [_cell(policy, [_prompt(r, 10) for r in range(n)], args.decode_tokens)
                   for n in rows]
        cells = {"flash_attn": setting, "by_length": by_length, "by_rows": by_rows}
        if setting == settings[0]:
            result.update(cells)
        else:
            result["flash_attn_" + setting] = cells
            for a, b in zip(result["by_length"], by_length):
                b["ratio_vs_" + settings[0]] = round(a["seconds"] / b["seconds"], 3)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
