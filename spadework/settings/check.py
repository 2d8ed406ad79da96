"""What a check checks against: :class:`CheckConfig`, its bounds and the validators it shares
with the command line (so ``--max-turns`` and ``CheckConfig.max_turns`` say the same thing)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from spadework.errors import ConfigError

#: Upper bounds of the settings people type (``--max-turns``, ``--seeds``). No text game needs
#: more turns than fit in a context window, and the checker plays about 70 episodes a level of
#: up to ``max_turns`` steps; past 2**64 a turn cap cannot even be sent to the sandbox.
MAX_TURNS = 1000
MAX_SEEDS = 1000
MAX_TURNS_WHY = (f"the checker plays about 70 episodes a level of up to max_turns steps; no text "
                 f"game needs more than {MAX_TURNS} turns")
SEEDS_WHY = "each seed replays solution() once"


@dataclass(frozen=True)
class CheckConfig:
    """Thresholds and budgets of the runtime stages, validated at construction.

    Seeds derive from ``seed``: solvable draws play-style seeds per environment
    (:func:`spadework.env.solvable.solvable_seeds`), determinism uses seed+100+i and not_trivial
    seed+1000+i, so a report is reproducible.

    >>> CheckConfig(max_turns=100_000)
    Traceback (most recent call last):
    ...
    spadework.errors.ConfigError: CheckConfig.max_turns must be an integer from 1 to 1000, got 100000 (the checker plays about 70 episodes a level of up to max_turns steps; no text game needs more than 1000 turns)
    """

    max_turns: int = 20  # pass the play max_turns; the instance is built with it and must end by it
    determinism_seeds: int = 3
    trivial_episodes: int = 20  # random, memorised and example episodes; empty and repeated a quarter
    trivial_rate: float = 0.1  # a strategy winning a larger share of episodes fails
    level_order_alpha: float = 0.05
    """A higher level must not be easier: a trivial strategy whose share of wins there tops a
    lower level's by more than ``trivial_rate`` fails the check only when Fisher's exact test
    (one-sided) gives the difference a p-value below this. Without the test, samples of a few
    episodes decided it: at ``trivial_episodes = 4`` the delivery_route starter's 3-stop levels 2
    and 3 won 0 and 2 of 4 memorised replies (p 0.21) and failed. At the default 20 episodes, 5
    of 20 against 0 of 20 still fails (p 0.024); 4 of 20 does not (p 0.053)."""
    max_obs_chars: int = 32_768
    novelty_threshold: float = 0.9  # Jaccard similarity at or above which a candidate is a copy
    example_novelty_threshold: float = 0.8
    """The same for the example modules a design prompt shows (the designer indexes them with
    it; archived environments, which a mutation is meant to resemble, keep
    ``novelty_threshold``). 0.8: every cpu-qwen run so far accepted, at iteration 0, the prompt's
    example with one constant changed and a new class name (the same task text; 0.88 to the
    example), while the distinct designs of those runs score 0.49-0.53 to it and the starters at
    most 0.17 to each other."""
    shingle_size: int = 5
    allow_numpy: bool = False
    allow_math_verify: bool = False
    """Let environments import ``math_verify`` (the reference's answer checker). Check them in a
    sandbox that preloads it (``Limits(math_verify=True)``); see :mod:`spadework.sandbox`."""
    seed: int = 0
    solvable_seeds: int = 64
    """Play-style seeds solution() must win on. A solution() that loses on a share p of the
    instances passes n seeds with probability (1-p)^n: for p = 1/11 (the one-character slip of
    the cipher starter in the bad fixtures) that is 75% at the former 3 seeds, 5% at 32 and 0.2%
    at 64; for p = 1/20, 4% at 64. The cost, paid for every design: one reset, one solution()
    and its steps per seed, about 1.5 ms per seed averaged over the starter library (10x that
    for the slowest), so a default check takes about 1.5x as long as one with 5 seeds, the
    solvable stage being some 40% of it (``benchmarks/checker.py``): a fraction of a second per
    design, against the tens of seconds a design takes to generate on a CPU."""
    budget_seconds: float = 60.0
    """Wall-clock seconds for the whole check, every stage together. The slowest starter
    environment checks in under 2 s on a loaded two-core machine, so a minute leaves more than
    30x for an honest but slow environment, and a hostile one (a step that sleeps just under the
    per-call limit, say) costs the loop at most a minute, one ``Limits.episode_seconds``, rather
    than the half hour its hundreds of calls would take."""
    init_seconds: float = 2.0
    """Seconds one import and instantiation may take in the load stage. Every played episode
    builds a fresh instance, so a slow ``__init__`` is paid on every play; the starters build in
    about 10-30 ms, fork included."""

    def __post_init__(self) -> None:
        positive = ("determinism_seeds", "trivial_episodes", "max_obs_chars", "shingle_size")
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"CheckConfig.{name} must be a positive integer, got {value!r}")
        validate_count("CheckConfig.max_turns", self.max_turns, MAX_TURNS, MAX_TURNS_WHY)
        validate_count("CheckConfig.solvable_seeds", self.solvable_seeds, MAX_SEEDS, SEEDS_WHY)
        for name in ("trivial_rate", "level_order_alpha", "novelty_threshold",
                     "example_novelty_threshold"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise ConfigError(f"CheckConfig.{name} must be a number in [0, 1], got {value!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise ConfigError(f"CheckConfig.seed must be an integer, got {self.seed!r}")
        for name in ("budget_seconds", "init_seconds"):
            validate_seconds(f"CheckConfig.{name}", getattr(self, name))


def validate_seconds(name: str, value: object) -> float:
    """``value`` if it is a finite number of seconds above 0, else ConfigError naming ``name``.

    >>> validate_seconds("--budget", float("inf"))
    Traceback (most recent call last):
    ...
    spadework.errors.ConfigError: --budget must be a finite number of seconds above 0, got inf
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and value > 0):
        raise ConfigError(f"{name} must be a finite number of seconds above 0, got {value!r}")
    return float(value)


def validate_count(name: str, value: object, most: int, why: str) -> int:
    """``value`` if it is an integer from 1 to ``most``, else ConfigError naming ``name``.

    >>> validate_count("seeds", 5, 1000, "each seed costs a replay")
    5
    >>> validate_count("seeds", 0, 1000, "each seed costs a replay")
    Traceback (most recent call last):
    ...
    spadework.errors.ConfigError: seeds must be an integer from 1 to 1000, got 0 (each seed costs a replay)
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise ConfigError(f"{name} must be an integer from 1 to {most}, got {value!r} ({why})")
    return value
