"""The curriculum: when the designer runs, which skills it exercises, which environments are played.

Everything here is a pure function of explicit inputs or a frozen state object; the loop stores
the state in the archive (``save_state("curriculum", state.to_dict())``) so that a resumed run
makes the same choices.

- **Regeneration** every ``regen_interval`` iterations (iteration 0 included): the designer writes
  ``designs_per_regen`` environments; the accepted ones are the *fresh* set until the next
  regeneration.
- **Skill rotation**: each regeneration takes the next ``skills_per_regen`` skills of the setting,
  cyclically (regeneration r starts at skill ``r * k mod n``). It advances per regeneration, not
  per iteration: skills only matter when the designer runs, and with R = 4, k = 3, n = 6 a
  per-iteration rotation would land on the same three skills at every regeneration.
- **Pool**: the fresh environments first, then archived accepted environments replayed by score
  and staleness until the pool has ``pool_size`` entries. Replay follows prioritized level replay
  (PLR, Jiang et al. 2021): ``P = (1 - rho) * P_score + rho * P_stale`` with rank-based
  ``P_score ~ (1 / rank) ** (1 / temperature)`` and ``P_stale ~ iteration - last_played``; picks
  are drawn without replacement from ``derive_rng(run_seed, iteration, "pool")``. Environments
  never played rank first (score +inf; or as if won ``unplayed_win_rate`` of the time) and are
  the stalest, so the starter library seeds the first iterations. Departure from the
  reference, which replaced its whole pool at every regeneration and forgot the old games: we
  keep the good ones.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from spadework.errors import ConfigError
from spadework.reward import RewardConfig, blend_reward
from spadework.settings.curriculum import SCORES, CurriculumConfig


@dataclass(frozen=True)
class CurriculumState:
    """What the curriculum remembers between iterations: how many regenerations ran, the fresh
    environments of the latest one, and the last pool played."""

    regenerations: int = 0
    fresh: tuple[str, ...] = ()
    pool: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"regenerations": self.regenerations, "fresh": list(self.fresh), "pool": list(self.pool)}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> CurriculumState:
        if not d:
            return cls()
        return cls(int(d["regenerations"]), tuple(d["fresh"]), tuple(d["pool"]))


@dataclass(frozen=True)
class Candidate:
    """An archived environment that may be replayed: its score (None: never played) and the last
    iteration it was played in (None: never)."""

    env_id: str
    score: float | None
    last_played: int | None


def is_regeneration(iteration: int, regen_interval: int) -> bool:
    """Whether the designer runs in this iteration.

    >>> [i for i in range(9) if is_regeneration(i, 4)]
    [0, 4, 8]
    """
    return iteration % regen_interval == 0


def active_skills(skills: Sequence[Any], regeneration: int, k: int) -> tuple[Any, ...]:
    """The ``k`` skills of regeneration number ``regeneration`` (cyclic, no repeats within one).

    >>> active_skills("abcdef", 0, 3), active_skills("abcdef", 1, 3), active_skills("abcdef", 2, 4)
    (('a', 'b', 'c'), ('d', 'e', 'f'), ('c', 'd', 'e', 'f'))
    >>> active_skills("ab", 5, 3)
    ('b', 'a')
    """
    n = len(skills)
    if n == 0:
        raise ConfigError("no skills to rotate through")
    start = (regeneration * k) % n
    return tuple(skills[(start + j) % n] for j in range(min(k, n)))


def env_score(kind: str, win_rate: float, regret: float | None,
              reward_cfg: RewardConfig | None = None) -> float:
    """The replay score of an environment from its latest plays.

    ``blend``: the designer's blend reward under the run's ``reward_cfg`` (its band, ramp and
    weights; the defaults when None); ``learnability``: ``p * (1 - p)``; ``regret``: the regret
    itself (0 when unknown).

    >>> env_score("learnability", 0.5, None), env_score("blend", 0.5, 0.15), env_score("regret", 0.9, 0.2)
    (0.25, 1.0, 0.2)
    >>> round(env_score("blend", 0.25, 0.0, RewardConfig(lo=0.2, hi=0.4)), 6)   # the run's band
    0.6
    """
    if kind == "learnability":
        return win_rate * (1.0 - win_rate)
    if kind == "regret":
        return 0.0 if regret is None else float(regret)
    if kind == "blend":
        return blend_reward(reward_cfg or RewardConfig(), win_rate, 0.0 if regret is None else regret)
    raise ConfigError(f"unknown score {kind!r}; choose one of {SCORES}")


def candidate_score(stats: Any, cfg: CurriculumConfig, reward_cfg: RewardConfig | None = None) -> float | None:
    """The replay score of an archived environment from its latest plays (``stats``: an object
    with ``win_rate`` and ``regret``, None when never played): :func:`env_score`, or for an
    unplayed one the score of ``cfg.unplayed_win_rate`` (None when that is None: ranks first).

    >>> from types import SimpleNamespace as S
    >>> cfg = CurriculumConfig(score="learnability", unplayed_win_rate=0.2)
    >>> candidate_score(S(win_rate=0.5, regret=0.0), cfg), round(candidate_score(None, cfg), 4)
    (0.25, 0.16)
    >>> candidate_score(None, CurriculumConfig()) is None
    True
    """
    if stats is None:
        if cfg.unplayed_win_rate is None:
            return None
        return env_score(cfg.score, float(cfg.unplayed_win_rate), None, reward_cfg)
    return env_score(cfg.score, stats.win_rate, stats.regret, reward_cfg)


def replay_probabilities(candidates: Sequence[Candidate], iteration: int, *,
                         temperature: float, staleness_coef: float) -> list[float]:
    """PLR's replay distribution ``(1 - rho) * P_score + rho * P_stale`` over the candidates.

    ``P_score``: ``h_i ** (1 / temperature)`` normalised, with ``h_i = 1 / rank_i`` (rank 1 = the
    highest score; never played ranks above everything). Tied candidates share the weight of
    the ranks they span equally (a tie broken by env id, as PLR's argsort breaks it, made the
    first of the starters unplayed at iteration 0 ten times as likely as the second at
    temperature 0.3).
    ``P_stale``: ``(iteration - last_played_i)`` normalised, never played counting as -1; uniform
    when every staleness is 0.

    Worked example: scores 0.9, 0.5, 0.1 at temperature 1 give ``P_score = 6/11, 3/11, 2/11``;
    last played 2, 0 and never at iteration 3 give staleness 1, 3, 4, ``P_stale = 1/8, 3/8, 4/8``;
    with rho = 0.5: 0.3352, 0.3239, 0.3409.

    >>> cs = [Candidate("a", 0.9, 2), Candidate("b", 0.5, 0), Candidate("c", 0.1, None)]
    >>> [round(p, 4) for p in replay_probabilities(cs, 3, temperature=1.0, staleness_coef=0.5)]
    [0.3352, 0.3239, 0.3409]
    >>> [round(p, 4) for p in replay_probabilities(cs, 3, temperature=1.0, staleness_coef=0.0)]
    [0.5455, 0.2727, 0.1818]
    >>> tied = [Candidate(e, None, None) for e in "abc"] + [Candidate("d", 0.5, 0)]
    >>> [round(p, 4) for p in replay_probabilities(tied, 0, temperature=0.3, staleness_coef=0.0)]
    [0.3304, 0.3304, 0.3304, 0.0087]
    """
    if not candidates:
        return []

    def key(i: int) -> float:
        return -math.inf if candidates[i].score is None else -candidates[i].score

    order = sorted(range(len(candidates)), key=lambda i: (key(i), candidates[i].env_id))
    h = [0.0] * len(candidates)
    rank = 0
    for _, run in itertools.groupby(order, key=key):  # one run of tied scores at a time
        tied = list(run)
        ranks = range(rank + 1, rank + len(tied) + 1)
        share = math.fsum((1.0 / r) ** (1.0 / temperature) for r in ranks) / len(tied)
        for i in tied:
            h[i] = share
        rank += len(tied)
    total_h = math.fsum(h)
    stale = [float(iteration - (-1 if c.last_played is None else c.last_played)) for c in candidates]
    stale = [max(0.0, s) for s in stale]
    total_s = math.fsum(stale)
    p_stale = [s / total_s for s in stale] if total_s > 0 else [1.0 / len(stale)] * len(stale)
    return [(1.0 - staleness_coef) * hi / total_h + staleness_coef * ps for hi, ps in zip(h, p_stale)]


def choose_pool(fresh: Sequence[str], candidates: Sequence[Candidate], iteration: int,
                cfg: CurriculumConfig, rng: random.Random) -> tuple[str, ...]:
    """The environments to play: ``fresh`` first (up to ``pool_size``), then replay picks drawn
    without replacement by :func:`replay_probabilities` (recomputed over what is left).

    >>> cfg = CurriculumConfig(pool_size=3, staleness_coef=0.0, replay_temperature=0.01)
    >>> cs = [Candidate("a", 0.1, 0), Candidate("b", 0.9, 0), Candidate("c", 0.5, 0)]
    >>> choose_pool(["new"], cs, 1, cfg, random.Random(0))
    ('new', 'b', 'c')
    """
    pool = list(dict.fromkeys(fresh))[: cfg.pool_size]
    left = [c for c in candidates if c.env_id not in pool]
    while len(pool) < cfg.pool_size and left:
        probs = replay_probabilities(left, iteration, temperature=cfg.replay_temperature,
                                     staleness_coef=cfg.staleness_coef)
        pick = rng.choices(range(len(left)), weights=probs)[0]
        pool.append(left.pop(pick).env_id)
    return tuple(pool)


def next_state(state: CurriculumState, *, regenerated: bool, fresh: Sequence[str],
               pool: Sequence[str]) -> CurriculumState:
    """The state after an iteration: a regeneration replaces the fresh set and counts once.

    >>> s = next_state(CurriculumState(), regenerated=True, fresh=["x"], pool=["x", "y"])
    >>> s, next_state(s, regenerated=False, fresh=[], pool=["x", "z"]).fresh
    (CurriculumState(regenerations=1, fresh=('x',), pool=('x', 'y')), ('x',))
    """
    if regenerated:
        return CurriculumState(state.regenerations + 1, tuple(fresh), tuple(pool))
    return CurriculumState(state.regenerations, state.fresh, tuple(pool))
