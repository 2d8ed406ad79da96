"""Mutation mode: which archived environment a slot edits, and in which direction.

This is ACCEL-style level editing done by the model: instead of a fresh design from a document,
a slot may show the designer an accepted parent and ask for a changed module
(:func:`spadework.designer.prompts.build_mutation_prompt`). The direction follows the parent's
latest win rate: above ``HARDER_ABOVE`` the child should be harder, below ``EASIER_BELOW``
easier, otherwise (or when the parent has not been played) a variation of the same difficulty.
The child is checked like any design (the novelty stage rejects a child that is a near-copy of
its parent) and its ``EnvRecord.parent_id`` records the lineage.

Parent choice is seeded from (run seed, iteration, slot): among accepted environments of the
slot's skill, those whose win rate lies in the learnable band [0.15, 0.85] are preferred; when
there are none, any accepted environment of the skill is eligible.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spadework.archive.memory import how_it_played
from spadework.seeding import derive_rng
from spadework.skills import Skill

HARDER_ABOVE = 0.85
EASIER_BELOW = 0.15
DIRECTIONS = ("harder", "easier", "varied")


@dataclass(frozen=True)
class Parent:
    """An archived environment chosen to be mutated, with its latest win rate (None: unplayed)
    and, when it was played, how (``played``: wins without and with the hint, the level)."""

    env_id: str
    code: str
    class_name: str
    win_rate: float | None
    played: Any = None  # spadework.archive.records.PlayedDesign

    @property
    def direction(self) -> str:
        return mutation_direction(self.win_rate)


def mutation_direction(win_rate: float | None) -> str:
    """Which way to change a parent: harder above 0.85, easier below 0.15, else varied.

    >>> mutation_direction(0.9), mutation_direction(0.1), mutation_direction(0.5), mutation_direction(None)
    ('harder', 'easier', 'varied', 'varied')
    """
    if win_rate is None:
        return "varied"
    if win_rate > HARDER_ABOVE:
        return "harder"
    if win_rate < EASIER_BELOW:
        return "easier"
    return "varied"


def wants_mutation(ratio: float, run_seed: int, iteration: int, slot: int) -> bool:
    """Whether a slot mutates, drawn from (run seed, iteration, slot): a share ``ratio`` of slots.

    >>> wants_mutation(0.0, 0, 0, 3), wants_mutation(1.0, 0, 0, 3)
    (False, True)
    >>> sum(wants_mutation(0.25, 7, 1, s) for s in range(400)) in range(70, 130)
    True
    """
    if ratio <= 0.0:
        return False
    return derive_rng(run_seed, iteration, slot, "mutate").random() < ratio


def choose_parent(archive: Any, skill: Skill, *, run_seed: int, iteration: int, slot: int,
                  lo: float = EASIER_BELOW, hi: float = HARDER_ABOVE,
                  max_chars: int | None = None) -> Parent | None:
    """A seeded choice among the skill's accepted environments (of at most ``max_chars``
    characters of code), preferring win rates in [lo, hi]; None when the skill has none.
    ``archive`` is an open :class:`spadework.archive.Archive`."""
    envs = [e for e in archive.list_envs(status="accepted", skill=skill.name, setting=skill.setting)
            if max_chars is None or len(e.code) <= max_chars]
    if not envs:
        return None
    rated = [(e, archive.env_stats(e.env_id)) for e in envs]
    cands = [(e, s.win_rate if s else None) for e, s in rated]
    band = [c for c in cands if c[1] is not None and lo <= c[1] <= hi]
    pool = sorted(band or cands, key=lambda c: c[0].env_id)
    env, wr = derive_rng(run_seed, iteration, slot, "parent").choice(pool)

    return Parent(env.env_id, env.code, env.class_name, wr, how_it_played(archive, env.env_id))
