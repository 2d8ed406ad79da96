"""How the agent's replies and its training signal move over a run, per iteration, from archives.

For each ``RUN_DIR`` and iteration, over the unhinted arm: plays and wins (an episode that ended
as a game with a positive return), replies, those that held a move (``Turn.parsed``), how they
ended (``finish_reason``: ``move`` stopped at the move, ``stop`` ended without one, ``length``
cut at the token limit), the mean and median reply in characters; and where the agent's
advantages put their weight under each ``[reward] format_shaping`` at ``--format-weight``: the
token-weighted sum of ``|advantage|`` over the samples the train stage would assemble from that
iteration's episodes, and its share in environments none of whose unhinted plays won (where the
format term is all there is). The advantages are recomputed, not read back, so one run's
episodes show what either mode would have trained on. Per run, over every iteration: the two
arms' plays of one instance (same environment, iteration and play index, both ended as games,
the hinted one shown a hint) paired by who won, with the exact two-sided sign test over the
pairs only one arm won: whether the hint helps the agent at all, which hint-based regret needs.
No model is loaded; prints one JSON object.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/agent_replies.py runs/fixed-pool-s2 \\
        runs/fixed-pool-added-s2 [--format-weight 0.2]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spadework.settings.reward import FORMAT_SHAPINGS  # noqa: E402


def iteration_figures(episodes: list, format_weight: float) -> dict:
    from spadework.metrics import GAME_ENDS
    from spadework.reward import episode_return
    from spadework.train.batch import agent_assembly

    unhinted = [e for e in episodes if e.arm == "no_hint"]
    games = [e for e in unhinted if e.status in GAME_ENDS]
    wins = [e for e in games if episode_return(e.rewards, e.terminated) > 0]
    won = {e.env_id for e in wins}
    replies = [t for e in unhinted for t in e.turns]
    chars = [len(t.text) for t in replies] or [0]
    mass = {}
    for mode in FORMAT_SHAPINGS:
        samples = agent_assembly(episodes, format_weight=format_weight, format_shaping=mode).samples
        total = sum(abs(s.advantage) * len(s.output_ids) for s in samples)
        nowin = sum(abs(s.advantage) * len(s.output_ids) for s in samples if s.key[0] not in won)
        mass[mode] = {"token_weighted_abs_advantage": round(total, 1),
                      "share_without_a_win": round(nowin / total, 3) if total else None}
    return {
        "plays": len(games),
        "wins": len(wins),
        "replies": len(replies),
        "with_a_move": sum(t.parsed for t in replies),
        "finish": dict(Counter(t.finish_reason for t in replies)),
        "mean_chars": round(statistics.mean(chars), 1),
        "median_chars": statistics.median(chars),
        "advantage_mass": mass,
    }


#: An instance both arms played, named by which arm won it: (hinted won, unhinted won) -> name.
PAIRS = {(False, False): "neither", (False, True): "unhinted_only",
         (True, False): "hinted_only", (True, True): "both"}


def arm_pairs(by_iteration: dict) -> dict:
    """The instances both arms played to a game's end (``by_iteration``: iteration -> its
    episodes), by who won, and the exact two-sided sign test p over those only one arm won.
    Instances are paired as regret pairs them (``spadework.metrics.score_env``): by play index,
    leaving out those whose hinted play was shown no hint."""
    from spadework.metrics import GAME_ENDS, _hintless
    from spadework.reward import episode_return

    won: dict = {}
    for it, episodes in by_iteration.items():
        for env_id in {e.env_id for e in episodes}:
            mine = [e for e in episodes if e.env_id == env_id]
            hintless = _hintless(mine)
            for e in mine:
                if e.status in GAME_ENDS and e.play_index not in hintless:
                    won.setdefault((it, env_id, e.play_index), {})[e.arm] = (
                        episode_return(e.rewards, e.terminated) > 0)
    counts = Counter()
    for arms in won.values():
        if len(arms) == 2:
            counts[PAIRS[arms["hint"], arms["no_hint"]]] += 1
    return {k: counts[k] for k in PAIRS.values()} | {
        "sign_test_p": round(sign_test(counts["hinted_only"], counts["unhinted_only"]), 4)}


def sign_test(a: int, b: int) -> float:
    """The exact two-sided sign test's p for ``a`` pairs won by one side only against ``b`` won
    by the other only.

    >>> sign_test(0, 0), round(sign_test(30, 36), 4), round(sign_test(16, 47), 4)
    (1.0, 0.5386, 0.0001)
    """
    n = a + b
    return min(1.0, 2 * sum(math.comb(n, k) for k in range(min(a, b) + 1)) / 2 ** n) if n else 1.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run directories (each with archive.sqlite)")
    ap.add_argument("--format-weight", type=float, default=0.2)
    args = ap.parse_args(argv)
    from spadework.archive import Archive, archive_path

    out = {"format_weight": args.format_weight, "runs": {}}
    for run in args.runs:
        path = archive_path(run)
        if not path.exists():
            raise SystemExit(f"{run}: no archive at {path}; pass a run directory")
        every = {}
        with Archive.open(path, create=False) as a:
            per = {}
            it = 0
            while episodes := a.episodes(iteration=it):
                per[it] = iteration_figures(episodes, args.format_weight)
                every[it] = episodes
                it += 1
        out["runs"][str(run)] = {"iterations": per, "arms": arm_pairs(every)}
        print(f"{run}: {len(per)} iterations", file=sys.stderr)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
