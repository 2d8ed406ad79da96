"""Starter games by level: how often the agent wins each games starter at each of its levels.

For every games starter of the library (``spadework.library``) and every level it declares,
``--plays`` unhinted episodes at a preset's play settings (default ``cpu-qwen``: the base
Qwen2.5-Coder-0.5B, 4 turns, 128 reply tokens, temperature 0.7), on seeds drawn as a run draws
them. Prints one JSON object: per starter and level the wins, the share of well-formed replies,
the share cut at the token limit, the mean reply length and seconds (``agent_probe.measure``),
and a Markdown table (starter x level -> wins of N) for the README. Progress goes to stderr.
With ``--arms both`` each cell plays both regret arms on the same instances, the hinted one
shown the starter's own ``hint()`` as a run shows it (``agent_probe.measure_regret``): the
table gives unhinted / hinted wins, and ``pairs`` counts the instances by which arm won them
over every cell, with the exact two-sided sign test (does the hint help this agent?).

What it is for: level 1 of every starter should be won in some plays by the base 0.5B, so a
curriculum has a rung to start on, and the top level less often (issue "Environments a small
agent can read"). The table is a measurement of the environments as written, not of training.
With ``--checkpoint RUN_DIR`` (or ``RUN_DIR/ITER``) the agent is a run's trained one instead: its
LoRA checkpoint goes onto the base weights as a llama.cpp adapter, as ``spadework eval
--backend llamacpp --checkpoint`` applies it, so a rung can be measured against the agent a
curriculum has brought to it.

Usage: OMP_NUM_THREADS=1 .venv/bin/python benchmarks/starter_levels.py [--preset cpu-qwen]
       [--plays 10] [--only maze,nim] [--modules DIR] [--history K] [--levels 1,2] [--template-tools off]
       [--threads N] [--seed 7] [--checkpoint RUN_DIR] [--arms both]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def table(results: dict[str, dict[int, dict]], plays: int) -> str:
    """The Markdown table: one row per starter, one column per level (wins of ``plays``; for a
    cell of both arms, unhinted / hinted wins).

    >>> print(table({"maze": {1: {"wins": 3}, 2: {"wins": 0}}}, 10))
    | starter | level 1 | level 2 |
    | --- | --- | --- |
    | maze | 3/10 | 0/10 |
    >>> print(table({"nim": {2: {"wins": 2}}, "maze": {}}, 10))
    | starter | level 2 |
    | --- | --- |
    | nim | 2/10 |
    | maze | - |
    >>> both = {"nim": {1: {"no_hint": {"wins": 2}, "hint": {"wins": 5}}}}
    >>> print(table(both, 10).splitlines()[-1])
    | nim | 2/10 / 5/10 |
    """
    played = sorted({k for levels in results.values() for k in levels})
    lines = ["| starter | " + " | ".join(f"level {k}" for k in played) + " |",
             "| --- |" + " --- |" * len(played)]
    for name, levels in results.items():
        cells = ["-" if k not in levels else f"{levels[k]['wins']}/{plays}" if "wins" in levels[k]
                 else " / ".join(f"{levels[k][arm]['wins']}/{plays}" for arm in ("no_hint", "hint"))
                 for k in played]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="cpu-qwen")
    ap.add_argument("--plays", type=int, default=10)
    ap.add_argument("--only", default="", help="comma-separated starter names (default: every starter of the preset's setting)")
    ap.add_argument("--levels", default="", help="comma-separated levels to play (default: every level)")
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: the preset's)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--modules", type=Path, default=None,
                    help="play the environment modules in this folder instead of the starters")
    ap.add_argument("--history", default=None,
                    help="PlayConfig.history_turns (default: the preset's; 0: the latest observation only; "
                         "all: the whole conversation)")
    ap.add_argument("--template-tools", choices=("on", "off"), default=None,
                    help="PlayConfig.template_tools (default: the preset's; off: the opening lists the tools)")
    ap.add_argument("--checkpoint", default=None,
                    help="a run's checkpoint (RUN_DIR: its latest; RUN_DIR/ITER) for the agent")
    ap.add_argument("--arms", choices=("no_hint", "both"), default="no_hint",
                    help="no_hint: unhinted plays only; both: both regret arms on the same "
                         "instances")
    args = ap.parse_args()

    from agent_probe import measure, measure_regret
    from agent_replies import sign_test

    from spadework.config import preset
    from spadework.library import starter_envs
    from spadework.policy.load import load_policy
    from spadework.sandbox import Limits, Sandbox

    cfg = preset(args.preset)
    if args.history is not None:
        history = None if args.history == "all" else int(args.history)
        cfg = dataclasses.replace(cfg, play=dataclasses.replace(cfg.play, history_turns=history))
    if args.template_tools is not None:
        cfg = dataclasses.replace(cfg, play=dataclasses.replace(cfg.play,
                                                                template_tools=args.template_tools == "on"))
    wanted = {n for n in args.only.split(",") if n}
    if args.modules is not None:
        from designer_validity import extra_sources

        sources = extra_sources(args.modules)
    else:
        sources = starter_envs(cfg.setting)
    starters = [s for s in sources if not wanted or s.name in wanted]
    t0 = time.time()
    policy = load_policy("llamacpp", cfg.role_model("agent"), max_batch_size=cfg.policy_batch,
                         threads=args.threads or cfg.engine_threads)
    checkpoint = None
    if args.checkpoint is not None:
        from spadework.evaluate.run import resolve_checkpoint
        from spadework.policy.backends import backend

        checkpoint = resolve_checkpoint(args.checkpoint)
        backend("llamacpp").checkpoint(policy, checkpoint)
    out: dict = {"benchmark": "starter_levels", "preset": args.preset, "agent_model": cfg.role_model("agent"),
                 "checkpoint": None if checkpoint is None else str(checkpoint),
                 "plays": args.plays, "max_turns": cfg.play.max_turns, "max_tokens": cfg.play.max_tokens,
                 "temperature": cfg.play.temperature, "seed": args.seed,
                 "history_turns": cfg.play.history_turns, "template_tools": cfg.play.template_tools,
                 "load_seconds": round(time.time() - t0, 1), "starters": {}}
    with Sandbox(Limits()) as sb:
        for s in starters:
            out["starters"][s.name] = {}
            chosen = [int(x) for x in args.levels.split(",") if x] or range(1, s.levels + 1)
            for level in [k for k in chosen if k <= s.levels]:
                cell = (measure if args.arms == "no_hint" else measure_regret)(
                    policy, sb, s, plays=args.plays, play_cfg=cfg.play, seed=args.seed, level=level)
                out["starters"][s.name][level] = cell
                shown = ({k: v for k, v in cell.items() if k != "won"} if "wins" in cell else
                         {arm: cell[arm]["wins"] for arm in ("no_hint", "hint")} | cell["pairs"])
                print(f"[starter_levels] {s.name} level {level}: {shown}", file=sys.stderr,
                      flush=True)
    out["table"] = table(out["starters"], args.plays)
    if args.arms == "both":
        cells = [c for levels in out["starters"].values() for c in levels.values()]
        pairs = {k: sum(c["pairs"][k] for c in cells) for k in cells[0]["pairs"]} if cells else {}
        out["pairs"] = pairs | {"sign_test_p": round(sign_test(pairs.get("hinted_only", 0),
                                                               pairs.get("unhinted_only", 0)), 4)}
        out["wins"] = {arm: sum(c[arm]["wins"] for c in cells) for arm in ("no_hint", "hint")}
    out["seconds"] = round(time.time() - t0, 1)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
