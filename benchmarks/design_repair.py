"""Design repairs, chat against fresh: the designer's rejected first attempts of finished runs,
asked again the way ``DesignConfig.repair = "fresh"`` asks, against the chat repairs the runs
themselves made.

For every first attempt of the given runs that the checker rejected (distinct prompts only; a
rerun of the same seed writes the same attempts), the archive holds the prompt, the reply, the
verdict and, when the run made a repair turn, the chat repair's reply and verdict
(:func:`spadework.designer.prompts.repair_messages`: the rejected reply, then the verdict, in one
conversation). This script asks the run's designer model
:func:`spadework.designer.prompts.fresh_repair_messages` of the same attempt (the prompt and the
verdict, not the reply; without the example module after a novelty rejection) at the run's
design sampling settings, judges the reply with the loop's own judge (the run's checker
settings, novelty against the run's accepted environments and the prompt examples), and prints
one JSON object: per repair form the accepted count of N with its 95% Wilson interval, the
count of replies identical to the rejected reply, the rejection stages, and seconds.

The chat figures are read from the archives, not regenerated: they are what the runs did.

Measured 2026-12-02 on the three cpu-qwen runs of the curriculum issue (runs/mechanism,
runs/mechanism-b, runs/mechanism-c; Qwen2.5-Coder-1.5B, 1,024 tokens, temperature 0.6, two
threads, 20 min): 14 distinct rejected first attempts. Chat repairs: 0 of 14 accepted (95% CI
0-21.5%), 10 of 14 the rejected reply character for character. Fresh repairs: 0 of 14 accepted
(0-21.5%), none a copy of the rejected reply; rejected at reply (cut at 1,024 tokens) 5,
novelty 3, static 3, load 2, extract 1.

Usage: OMP_NUM_THREADS=1 .venv/bin/python benchmarks/design_repair.py RUN_DIR [RUN_DIR...]
       [--preset cpu-qwen] [--threads 2] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def rejected_first_attempts(run_dirs: list[Path]) -> list[dict]:
    """Each distinct rejected first attempt (a two-message prompt) with its chat repair, if any."""
    from spadework.archive import Archive, archive_path
    from spadework.designer.prompts import REPAIR_MARK

    seen, items = set(), []
    for run in run_dirs:
        with Archive.open_read_only(archive_path(run)) as a:
            rows = a.query("SELECT iteration, slot, attempt, messages, reply, outcome, reason, "
                           "finish_reason, temperature, top_p, top_k FROM attempts "
                           "ORDER BY iteration, slot, attempt")
            by_key = {(r["iteration"], r["slot"], r["attempt"]): r for r in rows}
            for r in rows:
                messages = json.loads(r["messages"])
                if (r["outcome"] == "accepted" or len(messages) != 2 or REPAIR_MARK in r["messages"]
                        or r["messages"] in seen):
                    continue
                seen.add(r["messages"])
                repair = by_key.get((r["iteration"], r["slot"], r["attempt"] + 1))
                chat = None
                if repair is not None and len(json.loads(repair["messages"])) > 2:
                    chat = {"outcome": repair["outcome"], "identical": repair["reply"] == r["reply"]}
                items.append({"run": str(run), "iteration": r["iteration"], "slot": r["slot"],
                              "messages": messages, "reply": r["reply"], "outcome": r["outcome"],
                              "reason": r["reason"] or "", "cut": r["finish_reason"] == "length",
                              "sampling": (r["temperature"], r["top_p"], r["top_k"]), "chat": chat})
    return items


def summary(outcomes: list[str], identical: list[bool]) -> dict:
    from spadework.metrics import wilson

    n, won = len(outcomes), sum(o == "accepted" for o in outcomes)
    lo, hi = wilson(won, n) if n else (0.0, 0.0)
    return {"n": n, "accepted": won, "accepted_ci95": [round(lo, 3), round(hi, 3)],
            "identical_to_rejected": sum(identical),
            "stages": dict(Counter(o for o in outcomes if o != "accepted").most_common())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--preset", default="cpu-qwen", help="the preset the runs ran (their designer and checker)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from spadework.archive import Archive, archive_path
    from spadework.config import preset
    from spadework.designer.examples import design_novelty_index
    from spadework.designer.judge import judge_reply
    from spadework.designer.prompts import fresh_repair_messages
    from spadework.policy.base import Conversation, SamplingParams
    from spadework.policy.load import load_policy
    from spadework.sandbox import Limits, Sandbox
    from spadework.seeding import derive_seed

    t0 = time.time()
    items = rejected_first_attempts(args.runs)
    cfg = preset(args.preset)
    codes = []
    for run in args.runs:
        with Archive.open_read_only(archive_path(run)) as a:
            codes += a.env_codes("accepted")
    index = design_novelty_index(codes, cfg.design.setting, cfg.design.examples, cfg.check)
    policy = load_policy("llamacpp", cfg.role_model("designer"), max_batch_size=cfg.policy_batch,
                         threads=args.threads or cfg.engine_threads)
    print(f"[design_repair] {len(items)} rejected first attempts from {len(args.runs)} runs; "
          f"model {cfg.role_model('designer')}", file=sys.stderr, flush=True)
    fresh_outcomes, fresh_identical, rows = [], [], []
    with Sandbox(Limits()) as sb:
        for k, it in enumerate(items):
            t = time.time()
            msgs = fresh_repair_messages(it["messages"], it["outcome"], it["reason"], cut=it["cut"],
                                         drop_example=it["outcome"] == "novelty")
            temperature, top_p, top_k = it["sampling"]
            params = SamplingParams(temperature=temperature, top_p=top_p, top_k=top_k or 0,
                                    max_tokens=cfg.design.max_tokens,
                                    seed=derive_seed(args.seed, "design_repair", k))
            c = policy.chat([Conversation(messages=tuple(msgs))], params)[0]
            j = judge_reply(c.text, c.finish_reason, sandbox=sb, max_tokens=cfg.design.max_tokens,
                            seeds=None, check_config=cfg.check, index=index)
            fresh_outcomes.append(j.outcome)
            fresh_identical.append(c.text == it["reply"])
            rows.append({"run": it["run"], "iteration": it["iteration"], "slot": it["slot"],
                         "first": it["outcome"], "chat": it["chat"], "fresh": j.outcome,
                         "fresh_reason": (j.reason or "")[:160], "seconds": round(time.time() - t, 1)})
            print(f"[design_repair] {k + 1}/{len(items)} first {it['outcome']}, chat "
                  f"{(it['chat'] or {}).get('outcome')}, fresh {j.outcome} ({rows[-1]['seconds']} s)",
                  file=sys.stderr, flush=True)
    chats = [it["chat"] for it in items if it["chat"] is not None]
    out = {"benchmark": "design_repair", "runs": [str(r) for r in args.runs],
           "designer_model": cfg.role_model("designer"), "max_tokens": cfg.design.max_tokens,
           "chat (archived)": summary([c["outcome"] for c in chats], [c["identical"] for c in chats]),
           "fresh": summary(fresh_outcomes, fresh_identical), "attempts": rows,
           "seconds": round(time.time() - t0, 1)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
