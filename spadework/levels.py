"""The level controller: every environment in play has a current level, and after each
iteration it moves one level toward the band, from the unhinted win rate of its plays.

This is the adaptive-difficulty loop of RLVE (arXiv 2511.07317; the reference's own
fixed-environment baseline trains on RLVE's environments) put under SPADE's designer: the
designer writes environments with levels, the controller finds the level of each at which the
agent sometimes wins. Rules (:func:`next_level`), one level at a time:

- up when the agent won (nearly) every unhinted play: win rate >= ``level_up_at`` (0.8);
- down when it won none: win rate <= ``level_down_at`` (0.0);
- otherwise held: a level the agent wins some of the time is where it learns.

New environments start at level 1. Every change is recorded in the archive
(``Archive.record_level``: iteration, level before and after, the plays and wins that moved it),
so a run's levels can be read back and a resumed run continues from the same ones.

Why the defaults, for ``plays = 5`` per arm (the presets that use the controller): a level the
agent wins with probability p moves up with probability P(4 or 5 of 5) and down with
probability (1 - p)^5. At p = 0.5 that is 0.19 up, 0.03 down, 0.78 held; at p = 0.1 it is
0.0005 up, 0.59 down; at p = 0.9 it is 0.92 up. Moving down only when nothing was won keeps a
level that gives a gradient (1 win of 5 is a group whose returns differ) instead of dropping it
for noise.
"""

from __future__ import annotations

from spadework.settings.curriculum import DOWN_AT, UP_AT


def next_level(level: int, levels: int, win_rate: float, *, up_at: float = UP_AT,
               down_at: float = DOWN_AT) -> int:
    """The level to play next, from the current ``level`` (1 to ``levels``) and its unhinted
    ``win_rate``: one up at ``win_rate >= up_at``, one down at ``win_rate <= down_at``.

    >>> [next_level(1, 3, w) for w in (0.0, 0.4, 0.8, 1.0)]
    [1, 1, 2, 2]
    >>> [next_level(3, 3, 1.0), next_level(2, 3, 0.0), next_level(2, 3, 0.2)]
    [3, 1, 2]
    """
    if not 1 <= level <= levels:
        raise ValueError(f"level {level} is outside 1..{levels}")
    if win_rate >= up_at and level < levels:
        return level + 1
    if win_rate <= down_at and level > 1:
        return level - 1
    return level
