"""Rewards and advantages: pure functions over numbers, plus one explicit state object.

Nothing here touches a model, an environment or a clock. Every function states its formula and
checks its inputs: NaN, empty groups, win rates outside [0, 1] and inconsistent plateau bounds
raise ``ValueError`` with a message that names the argument, because a silently wrong reward
trains a model in the wrong direction for hours before anyone notices.

Agent side: ``episode_return`` then ``group_zscore`` within each environment's plays.
Designer side: ``win_rate`` and ``regret`` from the two arms (hinted, unhinted) that played the
same environment on the same seeds, and the terms the designer's reward is built from (``plateau``,
``blend``, ``variance_reward``, ``LearningPotential``, ``center_by_group``); which of them a design
sample earns, and when, is decided in one place, :mod:`spadework.designer.credit`.

Shaping for models too small to win (off by default, on in the ``cpu`` preset):
``shaped_return`` adds a bonus for the share of an episode's replies that held a well-formed
action. It only feeds advantages; win rates, regret and the designer's reward use the true
returns. The reference has a format reward in its Slime path, unused by its recipes.

Departures from the reference implementation:

- ``blend`` and every other variant honour ``step_timeout`` (the reference's blend ignored it).
- ``LearningPotential.potential`` is the real learning potential ``|mu_fast - mu_slow|``; the
  reference's "learning_potential" variant rewarded ``|mean return - mu_slow|`` (a distance from
  a slow baseline, not a rate of learning), which its README admits.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from spadework.settings.reward import RewardConfig, Variant  # noqa: F401 (Variant re-exported)


def check_finite(x: float, name: str) -> float:
    """``x`` as a finite float, else ValueError naming ``name``."""
    try:
        v = float(x)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be a number, got {x!r}") from e
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v!r}")
    return v


def check_values(xs: Sequence[float], name: str, *, allow_empty: bool = False) -> list[float]:
    """``xs`` as finite floats (non-empty unless ``allow_empty``), else ValueError naming ``name``."""
    vals = [check_finite(x, f"{name}[{i}]") for i, x in enumerate(xs)]
    if not vals and not allow_empty:
        raise ValueError(f"{name} is empty; at least one value is needed")
    return vals


def _mean(vals: list[float]) -> float:
    return math.fsum(vals) / len(vals)


def _pvariance(vals: list[float]) -> float:
    m = _mean(vals)
    return math.fsum((v - m) ** 2 for v in vals) / len(vals)


def check_rate(w: float, name: str = "win_rate") -> float:
    """``w`` as a float in [0, 1], else ValueError naming ``name``."""
    v = check_finite(w, name)
    if not 0.0 <= v <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {v!r}")
    return v


def episode_return(rewards: Sequence[float], terminated: bool) -> float:
    """The agent's return: ``clamp(rewards[-1], -1, 1)`` if the episode terminated, else 0.

    Only the final step's reward counts (intermediate rewards are ignored, as in the paper); a
    truncated or unfinished episode and an episode with no steps score 0. ``terminated`` may be
    a numpy boolean. A non-finite final reward breaks the contract and raises ``ValueError``.

    >>> episode_return([0.2, 2.0], True)
    1.0
    >>> episode_return([0.0, -0.3], True)
    -0.3
    >>> episode_return([1.0], False), episode_return([], True)
    (0.0, 0.0)
    """
    if not bool(terminated) or len(rewards) == 0:
        return 0.0
    last = check_finite(rewards[-1], "rewards[-1]")
    return min(1.0, max(-1.0, last))


def shaped_return(ret: float, format_share: float, weight: float) -> float:
    """The agent's training return with format shaping: ``ret + weight * format_share``.

    ``format_share`` is the share of the episode's replies that held a well-formed action (a
    ``\\boxed{}`` in games, a parseable tool call or answer in tool use). A small ``weight`` keeps a
    win worth more than any amount of formatting; weight 0 is the unshaped return.

    >>> shaped_return(0.0, 0.5, 0.2), shaped_return(1.0, 1.0, 0.0)
    (0.1, 1.0)
    """
    share = check_rate(format_share, "format_share")
    w = check_finite(weight, "weight")
    if w < 0:
        raise ValueError(f"weight must be >= 0, got {weight!r}")
    return check_finite(ret, "ret") + w * share


def group_zscore(values: Sequence[float], eps: float = 1e-8) -> list[float]:
    """Advantages within one group: ``(v - mean) / (std + eps)``, std the population std.

    A group whose values are all equal gets all zeros (nothing to learn from it).

    >>> [round(z, 6) for z in group_zscore([0.0, 1.0, 1.0, 0.0])]   # mean 0.5, std 0.5
    [-1.0, 1.0, 1.0, -1.0]
    >>> group_zscore([1.0, 1.0, 1.0])
    [0.0, 0.0, 0.0]
    """
    vals = check_values(values, "values")
    if check_finite(eps, "eps") <= 0:
        raise ValueError(f"eps must be > 0, got {eps!r}")
    m = _mean(vals)
    sd = math.sqrt(_pvariance(vals))
    return [(v - m) / (sd + eps) for v in vals]


def regret(hinted_returns: Sequence[float], unhinted_returns: Sequence[float]) -> float:
    """Hint-based regret: ``mean(hinted) - mean(unhinted)``, not clipped.

    Both arms should have played the same environment on the same seeds (ARCHITECTURE.md,
    "Regret, done right"); this function only averages. Negative regret (the hint hurt) is kept;
    ``blend`` decides whether to floor it.

    >>> regret([1.0, 1.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0])
    0.5
    >>> regret([0.0], [1.0])
    -1.0
    """
    h = check_values(hinted_returns, "hinted_returns")
    u = check_values(unhinted_returns, "unhinted_returns")
    return _mean(h) - _mean(u)


def win_rate(unhinted_returns: Sequence[float]) -> float:
    """The fraction of plays whose return is strictly positive.

    >>> win_rate([1.0, 0.0, -1.0, 0.5])
    0.5
    """
    vals = check_values(unhinted_returns, "unhinted_returns")
    return sum(1 for v in vals if v > 0) / len(vals)


def _check_band(lo: float, hi: float, ramp: float) -> None:
    lo, hi, ramp = check_rate(lo, "lo"), check_rate(hi, "hi"), check_finite(ramp, "ramp")
    if lo > hi:
        raise ValueError(f"lo must be <= hi, got lo={lo!r}, hi={hi!r}")
    if ramp <= 0:
        raise ValueError(f"ramp must be > 0, got {ramp!r}")


def plateau(win_rate: float, lo: float = 0.4, hi: float = 0.6, ramp: float = 0.25) -> float:
    """1 on ``[lo, hi]``, falling linearly to 0 at ``lo - ramp`` and ``hi + ramp``.

    ``max(0, 1 - (lo - w) / ramp)`` below ``lo``; ``max(0, 1 - (w - hi) / ramp)`` above ``hi``.
    With the defaults it reaches 0 at 0.15 and 0.85: environments the agent always or never
    solves teach it nothing.

    >>> plateau(0.5), plateau(0.4), plateau(1.0)
    (1.0, 1.0, 0.0)
    >>> round(plateau(0.3), 6), round(plateau(0.75), 6)
    (0.6, 0.4)
    """
    w = check_rate(win_rate)
    _check_band(lo, hi, ramp)
    if w < lo:
        return max(0.0, 1.0 - (lo - w) / ramp)
    if w > hi:
        return max(0.0, 1.0 - (w - hi) / ramp)
    return 1.0


def blend(
    win_rate: float,
    regret: float,
    *,
    plateau_weight: float = 0.6,
    regret_weight: float = 0.4,
    regret_scale: float = 0.15,
    floor: bool = True,
    lo: float = 0.4,
    hi: float = 0.6,
    ramp: float = 0.25,
) -> float:
    """The paper's designer reward: ``plateau_weight * plateau(win_rate) + regret_weight * r``.

    ``r = regret / regret_scale``, clipped to [0, 1] when ``floor`` is true (the recipe), else
    left as is. With the defaults the result lies in [0, 1].

    >>> round(blend(0.3, 0.3), 6)    # 0.6 * 0.6 + 0.4 * min(1, 2.0)
    0.76
    >>> round(blend(0.5, 0.03), 6)   # 0.6 * 1.0 + 0.4 * 0.2
    0.68
    >>> blend(0.9, -0.2)             # negative regret floored to 0, plateau 0
    0.0
    >>> round(blend(0.5, -0.15, floor=False), 6)
    0.2
    """
    reg = check_finite(regret, "regret")
    scale = check_finite(regret_scale, "regret_scale")
    if scale <= 0:
        raise ValueError(f"regret_scale must be > 0, got {regret_scale!r}")
    pw = check_finite(plateau_weight, "plateau_weight")
    rw = check_finite(regret_weight, "regret_weight")
    r = reg / scale
    if floor:
        r = min(1.0, max(0.0, r))
    return pw * plateau(win_rate, lo, hi, ramp) + rw * r



def blend_reward(cfg: RewardConfig, win_rate: float, regret: float) -> float:
    """:func:`blend` with the run's band, ramp, weights, regret scale and floor (``cfg``): the
    one place the run's blend is computed for anything that ranks by it.

    >>> round(blend_reward(RewardConfig(lo=0.2, hi=0.4), 0.25, 0.0), 6)
    0.6
    >>> round(blend_reward(RewardConfig(), 0.25, 0.0), 6)
    0.24
    """
    return blend(win_rate, regret, plateau_weight=cfg.plateau_weight,
                 regret_weight=cfg.regret_weight, regret_scale=cfg.regret_scale,
                 floor=cfg.floor, lo=cfg.lo, hi=cfg.hi, ramp=cfg.ramp)


def variance_reward(returns: Sequence[float]) -> float:
    """``exp(-((var - 0.25)^2) / (2 * 0.01))`` with ``var`` the population variance.

    Maximal (1.0) at 0.25, the variance of a fair coin's 0/1 outcomes: the environment splits
    the agent's plays evenly.

    >>> variance_reward([0.0, 1.0, 0.0, 1.0])
    1.0
    >>> round(variance_reward([1.0, 1.0]), 6)   # var 0: exp(-0.0625 / 0.02)
    0.043937
    """
    var = _pvariance(check_values(returns, "returns"))
    return math.exp(-((var - 0.25) ** 2) / (2 * 0.01))


def center_by_group(values: Sequence[float], groups: Sequence[Hashable]) -> list[float]:
    """Subtract each group's mean from its members: ``v_i - mean{v_j : g_j == g_i}``.

    Used for designer rewards per skill (mean only, no std division, as in the paper). Empty
    input gives an empty list (an iteration may produce no designer samples); a length mismatch
    raises ``ValueError``.

    >>> center_by_group([1.0, 3.0, 10.0], ["logic", "logic", "math"])
    [-1.0, 1.0, 0.0]
    """
    vals = check_values(values, "values", allow_empty=True)
    if len(vals) != len(groups):
        raise ValueError(f"values and groups differ in length: {len(vals)} != {len(groups)}")
    members: dict[Hashable, list[float]] = {}
    for v, g in zip(vals, groups, strict=True):
        members.setdefault(g, []).append(v)
    means = {g: _mean(vs) for g, vs in members.items()}
    return [v - means[g] for v, g in zip(vals, groups, strict=True)]


@dataclass(frozen=True)
class LearningPotential:
    """Fast and slow exponential averages of a success signal; their gap is the learning potential.

    ``update(x)`` returns a new state: on the first observation both averages become ``x``;
    afterwards ``fast <- (1 - gamma_fast) * fast + gamma_fast * x`` and likewise for ``slow``.
    Gamma weights the *new* observation, so the fast average has the larger gamma (the paper's
    recipes: 0.98 fast, 0.85 slow; the reference's defaults were 0.99/0.95).

    ``potential = |fast - slow|``: large while the signal is moving (the agent is learning the
    environment or skill), near 0 once it is flat. The reference's "learning_potential" reward
    was ``|mean return - slow|`` instead, which also pays for a stable but mediocre environment;
    this class implements the real one. (The reference tracker also divided by
    ``2 * (gamma_fast - gamma_slow)``; a constant factor that centring per skill removes.)

    The state is explicit and serialisable (``to_dict`` / ``from_dict``) so that a run can be
    resumed; the caller owns one instance per skill or per environment and stores it.

    >>> lp = LearningPotential(gamma_fast=0.8, gamma_slow=0.2).update(0.25).update(0.75)
    >>> round(lp.fast, 6), round(lp.slow, 6), round(lp.potential, 6)
    (0.65, 0.35, 0.3)
    >>> LearningPotential.from_dict(lp.to_dict()) == lp
    True
    """

    gamma_fast: float = 0.98
    gamma_slow: float = 0.85
    fast: float | None = None
    slow: float | None = None
    count: int = 0

    def __post_init__(self) -> None:
        gf, gs = check_finite(self.gamma_fast, "gamma_fast"), check_finite(self.gamma_slow, "gamma_slow")
        if not (0.0 < gs < gf <= 1.0):
            raise ValueError(
                f"need 0 < gamma_slow < gamma_fast <= 1 (gamma weights the new observation), "
                f"got gamma_fast={gf!r}, gamma_slow={gs!r}"
            )
        if (self.fast is None) != (self.slow is None) or (self.fast is None) != (self.count == 0):
            raise ValueError("fast, slow and count must be all unset (count 0) or all set")
        if self.count < 0:
            raise ValueError(f"count must be >= 0, got {self.count!r}")

    def update(self, x: float) -> LearningPotential:
        """The state after observing ``x`` (a win rate or mean return); ``self`` is unchanged."""
        v = check_finite(x, "x")
        if self.fast is None or self.slow is None:
            fast = slow = v
        else:
            fast = (1.0 - self.gamma_fast) * self.fast + self.gamma_fast * v
            slow = (1.0 - self.gamma_slow) * self.slow + self.gamma_slow * v
        return LearningPotential(self.gamma_fast, self.gamma_slow, fast, slow, self.count + 1)

    @property
    def potential(self) -> float:
        """``|fast - slow|``; 0 before the first observation."""
        if self.fast is None or self.slow is None:
            return 0.0
        return abs(self.fast - self.slow)

    def to_dict(self) -> dict[str, Any]:
        return {
            "gamma_fast": self.gamma_fast,
            "gamma_slow": self.gamma_slow,
            "fast": self.fast,
            "slow": self.slow,
            "count": self.count,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LearningPotential:
        known = {"gamma_fast", "gamma_slow", "fast", "slow", "count"}
        extra = set(d) - known
        if extra:
            raise ValueError(f"unknown LearningPotential fields: {sorted(extra)}")
        return cls(**d)
