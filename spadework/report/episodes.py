"""Which of an environment's episodes a report embeds, and their turns as the page shows them.

The point of a page is the regret signal: what the agent did with and without the hint on the
same instance. Episodes are therefore taken in pairs, the hinted and the unhinted play of one
(iteration, play index), which share their seed (see :mod:`spadework.seeding`). A file embeds
at most ``k`` episodes per environment (``spadework report --episodes K``): the latest
iteration first and, within an iteration, the pairs whose two arms ended differently first
(where the hint made a difference), then by play index. ``--serve`` pages show them all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spadework.archive import Archive, views
from spadework.archive.records import unpack_floats
from spadework.reward import episode_return

ARMS = ("hint", "no_hint")


def episode_heads(archive: Archive, env_id: str) -> list[dict[str, Any]]:
    """Every episode of ``env_id`` without its turns: key, seed, return, status, opening."""
    out = []
    for r in views.episode_heads(archive, env_id):
        out.append({"env_id": env_id, "iteration": r["iteration"], "arm": r["arm"],
                    "play_index": r["play_index"], "seed": r["seed"],
                    "return": episode_return(unpack_floats(r["rewards"]), bool(r["terminated"])),
                    "status": r["status"], "error": r["error"], "n_turns": r["n_turns"],
                    "opening": r["opening"]})
    return out


def chosen_episodes(heads: Sequence[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    """At most ``k`` episodes, whole pairs first (see the module docstring).

    >>> h = lambda it, arm, i, ret: {"iteration": it, "arm": arm, "play_index": i, "return": ret}
    >>> heads = [h(0, "hint", 0, 1.0), h(0, "no_hint", 0, 1.0), h(1, "hint", 0, 0.0),
    ...          h(1, "no_hint", 0, 0.0), h(1, "hint", 1, 1.0), h(1, "no_hint", 1, 0.0)]
    >>> [(e["iteration"], e["play_index"], e["arm"]) for e in chosen_episodes(heads, 2)]
    [(1, 1, 'hint'), (1, 1, 'no_hint')]
    >>> len(chosen_episodes(heads, 5)), chosen_episodes(heads, 0)
    (5, [])
    """
    groups: dict[tuple[int, int], dict[str, dict[str, Any]]] = {}
    for e in heads:
        groups.setdefault((e["iteration"], e["play_index"]), {})[e["arm"]] = e

    def order(key: tuple[int, int]) -> tuple:
        g = groups[key]
        whole = len(g) == 2
        differ = whole and g["hint"]["return"] != g["no_hint"]["return"]
        return (not whole, -key[0], not differ, key[1])

    out: list[dict[str, Any]] = []
    for key in sorted(groups, key=order):
        for arm in ARMS:
            if arm in groups[key] and len(out) < k:
                out.append(groups[key][arm])
    return out


def episodes_view(archive: Archive, chosen: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chosen episodes as side-by-side pairs: one entry per (iteration, play index) with the
    seed and each arm's episode (or None), each episode with its turns in order."""
    turns: dict[tuple, list[dict[str, Any]]] = {}
    for it in sorted({e["iteration"] for e in chosen}):
        if not chosen:
            break
        env_id = chosen[0]["env_id"]
        for t in views.episode_turns(archive, it, env_id):
            turns.setdefault((it, t["arm"], t["play_index"]), []).append(
                {"text": t["text"], "action": t["action"], "obs": t["observation"],
                 "reward": t["reward"], "finish": t["finish_reason"], "parsed": bool(t["parsed"])})
    pairs: dict[tuple[int, int], dict[str, Any]] = {}
    for e in chosen:
        p = pairs.setdefault((e["iteration"], e["play_index"]),
                             {"iteration": e["iteration"], "play_index": e["play_index"],
                              "seed": e["seed"], "hint": None, "no_hint": None})
        p[e["arm"]] = {"return": e["return"], "status": e["status"], "error": e["error"],
                       "opening": e["opening"],
                       "turns": turns.get((e["iteration"], e["arm"], e["play_index"]), [])}
    return list(pairs.values())
