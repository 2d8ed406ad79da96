"""The replay pool and the level controller against a model of the agent, without a model.

Runs the main job's pool stage (``spadework.loop._pool``, on a real archive holding the checked
starters) and its level rule (``spadework.levels.next_level``) for ``--iterations`` iterations,
with each play's outcome drawn from a table of per-(starter, level) win rates instead of played:
the base 0.5B agent's measured level-1 rates, moving linearly over the run toward those measured
with a trained agent (``RATES`` says which figure comes from where, and which are assumptions).
Reports, per iteration and over ``--runs`` simulated runs, the issue's figures: the share of
played (environment, level) pairs with an unhinted win rate strictly between 0 and 1, the band
share, the mean level, how often the learnable share reaches 0.3, and the same-level replay
figure of ``spadework runs compare`` (first against latest play of each (environment, level),
over the simulated runs pooled) counted two ways: over every play, and over the plays that kept
their level (what ``runs compare`` counts). With ``--agent fixed`` the agent never changes (every
rate stays at its base), so any replay gain is the pool's and the controller's selection, not
learning. Two rules side by side in one run, on the same draws where their pools agree:

- ``level``: each environment scored by its plays at the level it plays next (the pool today);
- ``latest``: scored by its latest plays whatever their level (the pool before 2026-12-06): an
  environment moved up after 5 of 5 ranks as too easy, one moved down after 0 of 5 as out of reach.

With ``--archive RUN/archive.sqlite`` it simulates nothing: for each iteration of that run it
asks the pool stage again, on a copy of the archive cut back to what was known when the
iteration began, which environments each rule picks, beside those the run played (the rule the
run used must give them back exactly).

Usage: OMP_NUM_THREADS=1 .venv/bin/python benchmarks/curriculum_sim.py [--runs 200] [--iterations 8]
           [--rules latest,level] [--level1 after|before] [--agent learning|fixed]
           [--flat P] [--set KEY=VALUE]
       OMP_NUM_THREADS=1 .venv/bin/python benchmarks/curriculum_sim.py --archive RUN/archive.sqlite
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from statistics import mean

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

#: starter -> {level: (base rate, trained rate)}; a level not listed wins with ``OTHER``.
#: Base, level 1: docs/results.md, the starter table's "level 1 after" column (10 plays each).
#: Trained: run q8's final agent (docs/results.md, "Rungs between level 1 and level 2"): level 1
#: and the rung (level 2) of delivery_route, sequence and sliding_puzzle; their level 3 won 0 of 10.
#: Level 1 of cipher_machine, countdown and garden_trial as rewritten on 2026-12-06 (the example
#: move an answer, a wrong try told and tried again): 1, 5 and 5 of 20 base plays (docs/results.md,
#: "Level 1 of three starters"); before, 0 of 20 each (``--level1 before``).
#: Assumed: the rung's base rate is half its trained one; the other starters do not improve.
RATES: dict[str, dict[int, tuple[float, float]]] = {
    "cipher_machine": {1: (0.05, 0.05)},
    "coin_balance": {1: (0.0, 0.0)},
    "countdown": {1: (0.25, 0.25)},
    "delivery_route": {1: (0.4, 0.9), 2: (0.2, 0.4)},
    "garden_trial": {1: (0.25, 0.25)},
    "maze": {1: (0.3, 0.3)},
    "nim": {1: (0.2, 0.2)},
    "sequence": {1: (0.2, 0.8), 2: (0.15, 0.3)},
    "sliding_puzzle": {1: (0.1, 0.4), 2: (0.1, 0.2)},
}
#: The three level 1s before that rewrite (``--level1 before``).
LEVEL1_BEFORE = {name: {1: (0.0, 0.0)} for name in ("cipher_machine", "countdown", "garden_trial")}
#: Levels above those listed: one win in 310 plays (docs/results.md, the starter table).
OTHER = 1 / 310


def rate(name: str, level: int, iteration: int, iterations: int, learning: bool = True) -> float:
    base, trained = RATES.get(name, {}).get(level, (OTHER, OTHER))
    if not learning:
        return base
    return base + (trained - base) * iteration / max(1, iterations - 1)


def use_rule(archive, rule: str) -> None:
    """Make ``archive`` answer the pool stage as ``rule`` scores: ``level`` as it is; ``latest``
    gives an environment's latest plays whatever their level (the pool before 2026-12-06)."""
    if rule == "latest":
        archive.env_stats_at = lambda env_id, level: archive.env_stats(env_id)
    elif rule != "level":
        raise SystemExit(f"unknown rule {rule!r}: choose latest or level")


def simulate(rule: str, run: int, iterations: int, plays: int, hint_gain: float,
             records, curriculum: dict | None = None, learning: bool = True,
             played: list | None = None, moved: set | None = None) -> list[dict]:
    """One simulated run's rows per iteration; each play is appended to ``played`` (as
    ``env_plays`` rows, the env id prefixed by the run) and each play that moved its level to
    ``moved``, when given."""
    import spadework.loop as loop
    from spadework.archive import Archive, archive_path
    from spadework.config import override, preset
    from spadework.levels import next_level
    from spadework.loop import Models, Plan, RunContext, _Iteration

    cfg = replace(override(preset("cpu-qwen"), {"curriculum": curriculum or {}}), run_seed=run)
    cc, rc = cfg.curriculum, cfg.reward
    draws = random.Random(run)  # the same stream for both rules: outcomes agree while pools do
    rows = []
    with tempfile.TemporaryDirectory() as d, Archive.open(archive_path(Path(d))) as a:
        a.import_starter(records)
        names = {r.env_id: r for r in a.list_envs(status="accepted")}
        use_rule(a, rule)
        ctx = RunContext(cfg, Path(d), a, Models(None), sandbox=None)
        state = loop.cur.CurriculumState()
        for i in range(iterations):
            res = loop._pool(ctx, _Iteration(i, Plan(i), state, {}, a))
            res.write(a)
            state = loop.cur.CurriculumState.from_dict(a.load_state("curriculum"))
            won, levels, in_band = [], [], []
            for env_id, level in res.plan.levels:
                rec = names[env_id]
                level = min(level, rec.levels)
                p = rate(rec.name, level, i, iterations, learning)
                w = sum(draws.random() < p for _ in range(plays))
                h = sum(draws.random() < min(1.0, p + hint_gain) for _ in range(plays))
                a.record_env_stats(env_id, i, plays=plays, wins=w, regret=(h - w) / plays,
                                   level=level)
                after = next_level(level, rec.levels, w / plays, up_at=cc.level_up_at,
                                   down_at=cc.level_down_at)
                if after != level:
                    a.record_level(env_id, i, from_level=level, to_level=after, plays=plays, wins=w)
                    if moved is not None:
                        moved.add((f"{run}:{env_id}", i))
                if played is not None:
                    played.append({"env_id": f"{run}:{env_id}", "iteration": i, "level": level,
                                   "win_rate": w / plays, "p": p})
                won.append(0 < w < plays)
                in_band.append(rc.lo <= w / plays <= rc.hi)
                levels.append(level)
            rows.append({"learnable": mean(won), "band": mean(in_band), "level": mean(levels)})
    return rows


def true_change(played: list[dict], left_out: set) -> float:
    """The mean change of the model's own win rate (``p``, which the draws only sample) over the
    pairs ``runs compare`` forms from ``played`` leaving out ``left_out`` (its own pairing, fed
    ``p`` for the drawn rate): what its replay figure estimates."""
    from spadework.report.runs import replayed

    r = replayed([{**row, "win_rate": row["p"]} for row in played], left_out)
    return 0.0 if r is None else r.diff


def replay_run(path: Path, rules: list[str]) -> dict:
    """Per iteration of the run at ``path``: the environments it played and those each rule's
    pool stage picks from the archive as it stood when the iteration began."""
    import sqlite3

    import spadework.loop as loop
    from spadework.archive import Archive
    from spadework.config import preset

    src = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    run = json.loads(src.execute("SELECT value FROM state WHERE key = 'config'").fetchone()[0])
    cfg = replace(preset(run["preset"]), run_seed=int(run["run_seed"]))
    cc = cfg.curriculum
    iterations = [r[0] for r in src.execute("SELECT DISTINCT iteration FROM env_plays ORDER BY 1")]
    out = []
    for i in iterations:
        played = sorted(r[0][:8] for r in src.execute(
            "SELECT env_id FROM env_plays WHERE iteration = ?", (i,)))
        regen = loop.cur.is_regeneration(i, cc.regen_interval) and cc.designs_per_regen > 0
        last_regen = max(j for j in range(i + 1) if loop.cur.is_regeneration(j, cc.regen_interval))
        fresh = tuple(r[0] for r in src.execute(
            "SELECT env_id FROM attempts WHERE iteration = ? AND outcome = 'accepted' "
            "AND env_id IS NOT NULL ORDER BY slot, attempt", (last_regen,)))
        row = {"iteration": i, "played": played}
        for rule in rules:
            with tempfile.TemporaryDirectory() as d:
                copy = Path(d) / "archive.sqlite"
                dst = sqlite3.connect(copy)
                src.backup(dst)
                dst.execute("DELETE FROM env_plays WHERE iteration >= ?", (i,))
                dst.execute("DELETE FROM level_changes WHERE iteration >= ?", (i,))
                dst.commit()
                dst.close()
                with Archive.open(copy) as a:
                    use_rule(a, rule)
                    ctx = loop.RunContext(cfg, Path(d), a, loop.Models(None), sandbox=None)
                    plan = loop.Plan(i, regenerated=regen, fresh=fresh if regen else ())
                    state = loop.cur.CurriculumState(fresh=() if regen else fresh)
                    res = loop._pool(ctx, loop._Iteration(i, plan, state, {}, a))
            row[rule] = sorted(e[:8] for e in res.plan.pool)
        out.append(row)
    return {"archive": str(path), "run_seed": cfg.run_seed, "iterations": out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--iterations", type=int, default=8)
    ap.add_argument("--plays", type=int, default=5)
    ap.add_argument("--hint-gain", type=float, default=0.1,
                    help="the hinted arm's win rate above the unhinted one (an assumption)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a [curriculum] setting for both rules, e.g. staleness_coef=0.1")
    ap.add_argument("--rules", default="latest,level")
    ap.add_argument("--archive", type=Path, help="replay a run's pools instead of simulating")
    ap.add_argument("--level1", choices=("after", "before"), default="after",
                    help="the starters' level 1 as now, or before 2026-12-06's rewrite of three")
    ap.add_argument("--agent", choices=("learning", "fixed"), default="learning",
                    help="the agent's rates move toward the trained ones, or stay at the base")
    ap.add_argument("--flat", type=float, metavar="P",
                    help="every starter wins every level with probability P (with --agent "
                    "fixed: the regime where the controller moves levels often)")
    args = ap.parse_args()
    if args.level1 == "before":
        RATES.update(LEVEL1_BEFORE)
    if args.flat is not None:
        if not 0 <= args.flat <= 1:
            raise SystemExit(f"--flat must be a probability in [0, 1], got {args.flat}")
        global OTHER
        OTHER = args.flat
        RATES.clear()
    if args.archive:
        if not args.archive.is_file():
            raise SystemExit(f"no archive at {args.archive}: pass RUN/archive.sqlite of a run")
        print(json.dumps(replay_run(args.archive, args.rules.split(",")), indent=1))
        return
    curriculum = {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in args.set)}
    from starters import starter_records

    from spadework.config import preset
    t0 = time.perf_counter()
    records = starter_records(preset("cpu-qwen").play.max_turns)
    out = {"runs": args.runs, "iterations": args.iterations, "plays": args.plays,
           "hint_gain": args.hint_gain, "curriculum": curriculum, "level1": args.level1,
           "agent": args.agent, "flat": args.flat, "rules": {}}
    from spadework.report.runs import replayed
    for rule in args.rules.split(","):
        runs, played, moved = [], [], set()
        for r in range(args.runs):
            runs.append(simulate(rule, r, args.iterations, args.plays, args.hint_gain, records,
                                 curriculum, args.agent == "learning", played, moved))
            if (r + 1) % 25 == 0:
                print(f"{rule}: {r + 1} of {args.runs} runs ({time.perf_counter() - t0:.0f} s)",
                      file=sys.stderr, flush=True)
        per_it = []
        for i in range(args.iterations):
            col = [run[i] for run in runs]
            met = mean(c["learnable"] >= 0.3 - 1e-9 for c in col)
            per_it.append({"iteration": i,
                           "learnable": round(mean(c["learnable"] for c in col), 3),
                           "learnable_at_least_0.3": round(met, 3),
                           "band": round(mean(c["band"] for c in col), 3),
                           "band_above_0": round(mean(c["band"] > 0 for c in col), 3),
                           "mean_level": round(mean(c["level"] for c in col), 3)})
        every = mean(all(run[i]["learnable"] >= 0.3 - 1e-9 for i in range(1, args.iterations))
                     for run in runs)
        replays = {}
        for name, left in (("every_play", set()), ("held_plays", moved)):
            r = replayed(played, left)
            replays[name] = None if r is None else {
                "pairs": r.pairs, "first": round(r.first, 3), "latest": round(r.latest, 3),
                "diff": round(r.diff, 3), "ci95": [round(x, 3) for x in r.ci95],
                "left_out": r.left_out, "true_diff": round(true_change(played, left), 3)}
        out["rules"][rule] = {
            "per_iteration": per_it,
            "runs_meeting_0.3_in_every_iteration_after_the_first": round(every, 3),
            "same_level_replays": replays}
    out["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
