"""``[curriculum]``: when the designer runs, which environments are played and at which level."""

from __future__ import annotations

from dataclasses import dataclass

from spadework.errors import ConfigError

#: Unhinted win rate at or above which the next play is one level up (CurriculumConfig.level_up_at).
UP_AT = 0.8


#: Unhinted win rate at or below which the next play is one level down (CurriculumConfig.level_down_at).
DOWN_AT = 0.0


#: Starter environments held out of every run's pool by default (file stems).
HELD_OUT: tuple[str, ...] = ("knapsack", "light_switches", "mastermind", "tool_ledger")


SCORES = ("blend", "learnability", "regret")


@dataclass(frozen=True)
class CurriculumConfig:
    """Cadence, skills and pool. See the module docstring for the rules."""

    regen_interval: int = 4
    """The designer runs on iterations 0, R, 2R, ..."""
    designs_per_regen: int = 24
    """Design slots per regeneration."""
    skills_per_regen: int = 3
    """Skills active per regeneration (the slots cycle through them)."""
    pool_size: int = 24
    """Environments played per iteration (fresh ones first, then replayed ones)."""
    replay_temperature: float = 0.3
    """PLR's beta: lower concentrates replay on the best-ranked environments."""
    staleness_coef: float = 0.3
    """PLR's rho: the weight of staleness against score."""
    held_out: tuple[str, ...] = HELD_OUT
    """Starter environments (file stems) never put in the pool: the ``library-heldout``
    evaluation suite plays them (:mod:`spadework.evaluate.heldout`)."""
    score: str = "blend"
    """How an archived environment is ranked: its designer ``blend``, ``learnability``
    (p * (1 - p) of its win rate), or ``regret``, from its latest plays at the level it plays
    next (with ``adapt_levels``): one the controller just moved up for winning every play is not
    ranked as too easy, nor one moved down as out of reach; at a level it never played, it ranks
    as unplayed."""
    unplayed_win_rate: float | None = None
    """How an environment never played (at the level it plays next) ranks for replay: None ranks
    it above every played one (explore the archive first); a number scores it as if the agent had
    won that share of its plays, so environments measured at the frontier are replayed before
    unplayed ones and unplayed ones before those measured out of reach. Fresh designs are played
    regardless."""
    adapt_levels: bool = True
    """Move each played environment's level toward the band after every iteration
    (:mod:`spadework.levels`); False plays every environment at level 1."""
    level_up_at: float = UP_AT
    """Unhinted win rate at or above which an environment is played one level up next time."""
    level_down_at: float = DOWN_AT
    """Unhinted win rate at or below which it is played one level down next time."""

    def __post_init__(self) -> None:
        for name in ("regen_interval", "skills_per_regen", "pool_size"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ConfigError(f"CurriculumConfig.{name} must be an integer >= 1, "
                                  f"got {getattr(self, name)!r}")
        if not isinstance(self.designs_per_regen, int) or self.designs_per_regen < 0:
            raise ConfigError("CurriculumConfig.designs_per_regen must be an integer >= 0 "
                              "(0 = never design, replay the archive only)")
        if not self.replay_temperature > 0:
            raise ConfigError(f"CurriculumConfig.replay_temperature must be > 0, got {self.replay_temperature!r}")
        if not 0.0 <= self.staleness_coef <= 1.0:
            raise ConfigError(f"CurriculumConfig.staleness_coef must lie in [0, 1], got {self.staleness_coef!r}")
        if self.score not in SCORES:
            raise ConfigError(f"CurriculumConfig.score must be one of {SCORES}, got {self.score!r}")
        u = self.unplayed_win_rate
        if u is not None and (isinstance(u, bool) or not isinstance(u, int | float) or not 0 <= u <= 1):
            raise ConfigError(f"CurriculumConfig.unplayed_win_rate must be a number in [0, 1] or "
                              f"None, got {u!r}")
        for name in ("level_up_at", "level_down_at"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
                raise ConfigError(f"CurriculumConfig.{name} must be a number in [0, 1], got {value!r}")
        if not self.level_down_at < self.level_up_at:
            raise ConfigError(f"CurriculumConfig needs level_down_at < level_up_at (got "
                              f"{self.level_down_at} and {self.level_up_at}): one win rate cannot "
                              "move a level both ways")
