"""Scoring one iteration's plays and summarising them: pure functions over episodes and numbers.

``score_env`` turns the two arms' episodes of one environment into what the archive and the
designer's credit need (win rate over unhinted plays with return > 0, regret, whether a step
hung); the rest are the summaries written to ``metrics.jsonl``.

A play that did not end as a game ends (a ``timeout``, ``policy_error`` or ``env_error``: the
host or the environment failed, the agent neither won nor lost) is left out of the scores, and
so is the other arm's play of the same instance, so that regret still compares both arms on the
same seeds. The training batch leaves the same episodes out (``train.batch.TRAINABLE_STATUSES``).
They are counted as ``failed`` instead. Before, they scored as losses: when the hinted arm won at
its first turn and the unhinted arm played on alone and timed out, the win rate read 0 and the
regret 1 instead of 1 and 0.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from spadework import reward
from spadework.figures import (
    DesignFigures,
    IterationFigures,
    IterationMetrics,
    PlayFigures,
    RewardFigures,
)
from spadework.rollout import step_timed_out
from spadework.train.batch import ROLES
from spadework.types import Episode

#: How a play ends when it ends as a game: won, lost or out of turns. The others are failures.
GAME_ENDS = ("completed", "truncated")


@dataclass(frozen=True)
class EnvOutcome:
    """How one environment played in one iteration: its unhinted plays that ended as games
    (``returns``), wins (return > 0), win rate, regret over the same instances, whether a step
    of it hung, and ``failed``: the episodes (both arms) left out because they or their other
    arm's play of the instance failed (see the module docstring)."""

    env_id: str
    plays: int
    wins: int
    win_rate: float
    regret: float
    step_timeout: bool
    returns: tuple[float, ...]
    failed: int = 0


def score_env(env_id: str, episodes: Sequence[Episode]) -> EnvOutcome | None:
    """Score one environment from its episodes (both arms), over the instances (play indices,
    the same seed in both arms) whose plays all ended as games; None when no unhinted play did
    and no step hung (nothing to score), and an outcome of 0 plays when one hung (the design
    still earns the timeout reward).

    >>> def ep(arm, i, r, status="completed"):
    ...     return Episode("e", arm, i, i, (), (r,), True, False, status)
    >>> eps = [ep("hint", 0, 1.0), ep("hint", 1, 1.0), ep("no_hint", 0, 1.0), ep("no_hint", 1, 0.0)]
    >>> o = score_env("e", eps)
    >>> o.plays, o.wins, o.win_rate, o.regret, o.failed
    (2, 1, 0.5, 0.5, 0)
    >>> o = score_env("e", [ep("hint", 0, 1.0), ep("no_hint", 0, 1.0), ep("hint", 1, 1.0),
    ...                     ep("no_hint", 1, 0.0, "timeout")])
    >>> o.plays, o.win_rate, o.regret, o.failed   # instance 1 is left out of both arms
    (1, 1.0, 0.0, 2)

    Regret is over the instances whose hinted play was shown a hint. A hinted play opened with
    the same first message as its unhinted twin had none (the hint leaked, could not be
    written, or the environment has no ``hint()``): its gap to the unhinted play is chance, not
    what a hint is worth, so it is left out of the regret (not of the win rate); with no hinted
    instance, the regret is 0, as the reference scores a failed hint.

    >>> def op(arm, i, r, opening):
    ...     return Episode("e", arm, i, i, (), (r,), True, False, "completed", opening=opening)
    >>> o = score_env("e", [op("hint", 0, 1.0, "x"), op("no_hint", 0, 0.0, "x"),
    ...                     op("hint", 1, 1.0, "y hint"), op("no_hint", 1, 1.0, "y")])
    >>> o.plays, o.win_rate, o.regret   # instance 0 had no hint (every instance counted: 0.5)
    (2, 0.5, 0.0)
    """
    mine = [e for e in episodes if e.env_id == env_id]
    broken = {e.play_index for e in mine if e.status not in GAME_ENDS}
    kept = [e for e in mine if e.play_index not in broken]
    unhinted = [reward.episode_return(e.rewards, e.terminated) for e in kept if e.arm == "no_hint"]
    hintless = _hintless(kept)
    pairs = [e for e in kept if e.play_index not in hintless]
    hinted = [reward.episode_return(e.rewards, e.terminated) for e in pairs if e.arm == "hint"]
    shown = [reward.episode_return(e.rewards, e.terminated) for e in pairs if e.arm == "no_hint"]
    hung = any(step_timed_out(e) for e in mine)
    failed = len(mine) - len(kept)
    if not unhinted:
        if not hung:
            return None
        return EnvOutcome(env_id, 0, 0, 0.0, 0.0, True, (), failed)
    return EnvOutcome(env_id, plays=len(unhinted), wins=sum(1 for r in unhinted if r > 0),
                      win_rate=reward.win_rate(unhinted),
                      regret=reward.regret(hinted, shown) if hinted and shown else 0.0,
                      step_timeout=hung, returns=tuple(unhinted), failed=failed)


def _hintless(episodes: Sequence[Episode]) -> set[int]:
    """The play indices whose hinted play opened with its unhinted twin's first message, so was
    shown no hint (an empty opening, from before the archive kept it, says nothing)."""
    openings: dict[int, dict[str, str]] = defaultdict(dict)
    for e in episodes:
        openings[e.play_index][e.arm] = e.opening
    return {i for i, by in openings.items()
            if by.get("hint") and by.get("hint") == by.get("no_hint")}


def histogram(rates: Iterable[float], bins: int = 10) -> list[int]:
    """Counts of rates in ``bins`` equal bins over [0, 1] (1.0 goes in the last bin).

    >>> histogram([0.0, 0.05, 0.5, 1.0], bins=4)
    [2, 0, 1, 1]
    """
    out = [0] * bins
    for r in rates:
        out[min(bins - 1, int(r * bins))] += 1
    return out


def band_share(rates: Sequence[float], lo: float = 0.4, hi: float = 0.6) -> float | None:
    """The share of rates inside [lo, hi]; None for no rates.

    >>> band_share([0.4, 0.5, 0.9, 0.0])
    0.5
    """
    return sum(1 for r in rates if lo <= r <= hi) / len(rates) if rates else None


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a share ``k / n`` (95% by default).

    ``(p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)``; unlike the normal approximation
    it stays inside [0, 1] and is not empty at k = 0.

    >>> [round(x, 3) for x in wilson(0, 40)], [round(x, 3) for x in wilson(20, 40)]
    ([0.0, 0.088], [0.352, 0.648])
    >>> wilson(0, 0)
    (0.0, 1.0)
    """
    if n == 0:
        return 0.0, 1.0
    p = k / n
    mid = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    den = 1 + z * z / n
    return max(0.0, (mid - half) / den), min(1.0, (mid + half) / den)


def stats(values: Sequence[float]) -> dict[str, float | int | None]:
    """n, mean, min and max (None when empty).

    >>> stats([1.0, 0.0, 0.5])
    {'n': 3, 'mean': 0.5, 'min': 0.0, 'max': 1.0}
    """
    if not values:
        return {"n": 0, "mean": None, "min": None, "max": None}
    return {"n": len(values), "mean": math.fsum(values) / len(values), "min": min(values),
            "max": max(values)}


def statuses(episodes: Iterable[Episode]) -> dict[str, int]:
    """Episodes by status."""
    return dict(sorted(Counter(e.status for e in episodes).items()))


def funnel(outcomes: Iterable[str]) -> dict[str, int]:
    """Design attempts by outcome (``accepted`` or the stage that rejected them), plus ``total``.

    >>> funnel(["accepted", "static", "static"])
    {'accepted': 1, 'static': 2, 'total': 3}
    """
    c = Counter(outcomes)
    return {**dict(sorted(c.items())), "total": sum(c.values())}


def output_tokens(episodes: Iterable[Episode]) -> int:
    """Tokens the policy generated in these episodes."""
    return sum(len(t.output_ids) for e in episodes for t in e.turns)


def reward_figures(outcomes: Sequence[EnvOutcome], env_rewards: Mapping[str, float],
                   credited: Sequence[float], *, lo: float, hi: float,
                   levels: Mapping[str, int] | None = None,
                   moves: Mapping[str, int] | None = None) -> RewardFigures:
    """The reward stage's figures: the played environments' win-rate histogram and share in the
    band [lo, hi], the share strictly between 0 and 1 (``learnable_share``: the (environment,
    level) pairs whose plays differ, so a group gives a gradient), mean regret, step timeouts,
    the mean level played, per environment (by id prefix) its level, win rate, regret, design
    reward and the level it plays next when the controller moved it, and the rewards credited
    to designer samples (``credited``)."""
    levels, moves = levels or {}, moves or {}
    scored = [o for o in outcomes if o.plays]
    rates = [o.win_rate for o in scored]
    played_levels = [levels.get(o.env_id, 1) for o in scored]
    return RewardFigures(
        envs=len(scored), failed_plays=sum(o.failed for o in outcomes),
        learnable_share=(sum(0 < r < 1 for r in rates) / len(rates)) if rates else None,
        mean_level=stats([float(v) for v in played_levels])["mean"],
        level_moves=sum(1 for o in scored if o.env_id in moves),
        win_rate_histogram=tuple(histogram(rates)),
        band_share=band_share(rates, lo, hi),
        band_share_ci95=tuple(round(x, 4)
                              for x in wilson(sum(lo <= r <= hi for r in rates), len(rates))),
        mean_regret=stats([o.regret for o in scored])["mean"],
        designer_reward=stats(list(credited)), designer_credited=len(credited),
        step_timeouts=sum(o.step_timeout for o in outcomes),
        per_env={o.env_id[:12]: {"level": levels.get(o.env_id, 1), "win_rate": o.win_rate,
                                 "regret": o.regret, "plays": o.plays, "failed": o.failed,
                                 "reward": env_rewards[o.env_id],
                                 **({"next_level": moves[o.env_id]} if o.env_id in moves else {})}
                 for o in outcomes},
    )


def summarize(iteration: int, figures: IterationFigures, episodes: Sequence[Episode], *,
              preset: str) -> IterationMetrics:
    """An iteration's line of ``metrics.jsonl`` from the figures its stages stored as they
    committed and its episodes: per-role losses and rewards, returns and format share per arm,
    the design funnel, pool, hints, statuses, win rates, regret, the learner's figures, tokens,
    and seconds and peak resident memory (MiB) per stage."""
    def mean(values: list[float]) -> float | None:
        return stats(values)["mean"]

    def ret(arm: str) -> float | None:
        return mean([reward.episode_return(e.rewards, e.terminated) for e in episodes if e.arm == arm])

    design, play_f = figures.design or DesignFigures(), figures.play or PlayFigures()
    rew, train, ev = figures.reward or RewardFigures(), figures.train, figures.eval
    return IterationMetrics(
        iteration=iteration,
        losses={role: train.loss(role) if train else None for role in ROLES},
        rewards={"agent": ret("no_hint"), "designer": rew.designer_reward_mean},
        agent_format_share={arm: mean([e.format_share for e in episodes if e.arm == arm])
                            for arm in ("no_hint", "hint")},
        preset=preset, regenerated=design.regenerated, validity_funnel=design.funnel,
        pool=figures.pool.to_dict() if figures.pool else {},
        hints=figures.hints.to_dict() if figures.hints else {},
        episodes=play_f.episodes if figures.play else None,
        statuses=play_f.statuses if figures.play else None,
        agent_return={"no_hint": ret("no_hint"), "hint": ret("hint")},
        win_rate_histogram=rew.win_rate_histogram, band_share=rew.band_share,
        band_share_ci95=rew.band_share_ci95, learnable_share=rew.learnable_share,
        mean_level=rew.mean_level, level_moves=rew.level_moves if figures.reward else None,
        failed_plays=rew.failed_plays if figures.reward else None, mean_regret=rew.mean_regret,
        designer_reward=rew.designer_reward, per_env=rew.per_env if figures.reward else None,
        train=train.to_dict() if train else None,
        tokens={"design": design.tokens, "play": play_f.tokens},
        eval=ev.to_dict() if ev is not None and ev.due else None,
        unwinnable_instances=play_f.unwinnable_instances, engine=play_f.engine,
        design_engine=design.engine,
        seconds=figures.seconds(), peak_rss_mib=figures.peak_rss(),
    )
