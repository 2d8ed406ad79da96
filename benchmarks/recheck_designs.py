"""Archived design replies judged again by this checkout's extraction, kits and checker: what a
change to them does to acceptance, measured on replies already sampled (no model runs).

Reads every distinct reply of the given archives' design attempts (run directories, or the
``--archive-dir`` of ``benchmarks/designer_validity.py``) of one setting, judges each with the
loop's own judge (:func:`spadework.designer.judge.judge_reply`: the reply screen, extraction
and its repairs, the checker under the preset's settings, novelty against the archive's starters
and the prompt examples the preset shows, as a run indexes them) and prints one JSON object: the
replies, the verdicts stored in the archives and the verdicts now (counts per stage), and every
reply whose verdict changed, with the old and the new reason. Run it from two checkouts (before
and after a change) on the same archives for a paired comparison; from an unchanged checkout
every stored verdict comes back (designs a run accepted are judged against the starters, not
against themselves).

Measured 2026-12-05 on 32 distinct games replies (two benchmarks/designer_validity.py runs kept
with --archive-dir, and runs/mechanism-k and -l, whose replies are the same): from a checkout of
commit 50592b3 all 32 verdicts as stored; from commit 444a8fa on (values stored under a method's
name renamed) one more accepted, the ``self.step`` game (6 s).

Usage: OMP_NUM_THREADS=1 .venv/bin/python benchmarks/recheck_designs.py ARCHIVE_OR_RUN_DIR...
       [--preset cpu-qwen] [--setting games]
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


def archive_file(path: Path) -> Path:
    """``path`` itself when it is an archive file, else the archive of the run directory."""
    from spadework.archive import archive_path

    return path if path.is_file() else archive_path(path)


def distinct_replies(paths: list[Path], setting: str) -> tuple[list[dict], dict[str, list[str]]]:
    """Each distinct reply of ``setting`` in the archives, with its stored verdict; and each
    archive's starters (what novelty is judged against), by source."""
    from spadework.archive import Archive

    seen, rows, starters = set(), [], {}
    for path in paths:
        with Archive.open_read_only(archive_file(path)) as a:
            starters[str(path)] = [r["code"] for r in a.query(
                "SELECT code FROM envs WHERE status = 'accepted' AND origin = 'starter'")]
            for r in a.query("SELECT reply, finish_reason, outcome, reason FROM attempts "
                             "WHERE setting = ? ORDER BY iteration, slot, attempt", (setting,)):
                if r["reply"] in seen:
                    continue
                seen.add(r["reply"])
                rows.append({"source": str(path), "reply": r["reply"], "finish": r["finish_reason"],
                             "outcome": r["outcome"], "reason": r["reason"] or ""})
    return rows, starters


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("archives", nargs="+", type=Path)
    ap.add_argument("--preset", default="cpu-qwen", help="whose checker settings judge the replies")
    ap.add_argument("--setting", default="games", choices=("games", "tool-use"))
    args = ap.parse_args()
    missing = [str(p) for p in args.archives if not archive_file(p).is_file()]
    if missing:
        sys.exit(f"recheck_designs: no archive at {', '.join(missing)}: give a run directory or "
                 "an archive.sqlite file")

    from spadework.config import preset
    from spadework.designer.examples import design_novelty_index
    from spadework.designer.judge import judge_reply
    from spadework.sandbox import Limits, Sandbox

    t0 = time.time()
    cfg = preset(args.preset)
    rows, starters = distinct_replies(args.archives, args.setting)
    indexes = {source: design_novelty_index(codes, args.setting, cfg.design.examples, cfg.check)
               for source, codes in starters.items()}
    before, after, changed = Counter(), Counter(), []
    with Sandbox(Limits()) as sb:
        for k, row in enumerate(rows):
            j = judge_reply(row["reply"], row["finish"], sandbox=sb,
                            max_tokens=cfg.design.max_tokens, seeds=None, check_config=cfg.check,
                            index=indexes[row["source"]])
            before[row["outcome"]] += 1
            after[j.outcome] += 1
            if j.outcome != row["outcome"]:
                changed.append({"source": row["source"], "was": row["outcome"],
                                "was_reason": row["reason"][:200], "now": j.outcome,
                                "now_reason": (j.reason or "")[:200]})
            print(f"[recheck_designs] {k + 1}/{len(rows)} {row['outcome']} -> {j.outcome}",
                  file=sys.stderr, flush=True)
    print(json.dumps({"benchmark": "recheck_designs", "checkout": str(ROOT),
                      "archives": [str(p) for p in args.archives], "preset": args.preset,
                      "setting": args.setting, "replies": len(rows),
                      "stored": dict(before.most_common()), "now": dict(after.most_common()),
                      "changed": changed, "seconds": round(time.time() - t0, 1)}, indent=1))


if __name__ == "__main__":
    main()
