"""``[reward]``: the agent's shaping and the designer's reward (variant, band, weights)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from spadework.errors import ConfigError

#: The designer's reward variants (each a pure function in ``spadework.designer.credit``'s table).
Variant = Literal["blend", "regret", "solve_rate", "learning_potential", "variance"]
VARIANTS: tuple[str, ...] = get_args(Variant)

#: How the format bonus enters the agent's advantage (``spadework.train.batch.agent_assembly``):
#: ``"zscored"``, added to the return before the group's z-score, so that in a group without a
#: win the bonus is all there is and gets the size of a win; ``"added"``, added after the
#: z-score as ``format_weight * (share - the group's mean share)``, the size its weight says.
FormatShaping = Literal["zscored", "added"]
FORMAT_SHAPINGS: tuple[str, ...] = get_args(FormatShaping)


@dataclass(frozen=True)
class RewardConfig:
    """How plays become rewards (see ``spadework.reward``).

    ``variant``: the designer reward (blend, regret, solve_rate, learning_potential, variance).
    ``rejection_reward``: the reward of a rejected design sample (``DesignConfig.
    rejected_first_attempts == "none"`` gives them no gradient instead). ``timeout_reward``: a
    design whose environment hung in a step. ``designer_scheme``: ``center_scale`` (the
    reference: reward minus its skill's mean, times ``designer_scale``, which ``None`` sets to
    the reference's ``min(n_agent / n_designer * regen_interval, 50)``) or ``zscore`` per skill.
    ``format_weight``: the agent's bonus per unit share of well-formed replies (0 = off), and
    ``format_shaping`` how it enters the advantage (:data:`FORMAT_SHAPINGS`).
    """

    variant: str = "blend"
    plateau_weight: float = 0.6
    regret_weight: float = 0.4
    regret_scale: float = 0.15
    floor: bool = True
    lo: float = 0.4
    hi: float = 0.6
    ramp: float = 0.25
    timeout_reward: float = -0.5
    rejection_reward: float = 0.0
    variance_bonus: bool = False
    lp_gamma_fast: float = 0.98
    lp_gamma_slow: float = 0.85
    designer_scheme: str = "center_scale"
    designer_scale: float | None = None
    format_weight: float = 0.0
    format_shaping: str = "zscored"
    rejection_progress: float = 0.0

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ConfigError(f"RewardConfig.variant must be one of {VARIANTS}, got {self.variant!r}")
        if not 0 < self.lo <= self.hi < 1 or self.ramp <= 0 or self.regret_scale <= 0:
            raise ConfigError("RewardConfig needs 0 < lo <= hi < 1, ramp > 0 and regret_scale > 0")
        if not 0 < self.lp_gamma_slow < self.lp_gamma_fast <= 1:
            raise ConfigError("RewardConfig needs 0 < lp_gamma_slow < lp_gamma_fast <= 1 "
                              "(gamma weights the new observation)")
        if self.format_shaping not in FORMAT_SHAPINGS:
            raise ConfigError(f"RewardConfig.format_shaping must be one of {FORMAT_SHAPINGS}, "
                              f"got {self.format_shaping!r}")
        if self.designer_scheme not in ("center_scale", "zscore"):
            raise ConfigError("RewardConfig.designer_scheme must be 'center_scale' or 'zscore'")
        if self.designer_scale is not None and not self.designer_scale > 0:
            raise ConfigError("RewardConfig.designer_scale must be > 0, or None for the reference's")
        for name in ("format_weight", "rejection_progress"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 10:
                raise ConfigError(f"RewardConfig.{name} must be a number in [0, 10] (0 = off), "
                                  f"got {value!r}")
