"""``[eval]``: the held-out suites a run evaluates its weights on, and how often."""

from __future__ import annotations

from dataclasses import dataclass

from spadework.errors import ConfigError

#: The eval presets (their settings per suite: :mod:`spadework.evaluate.presets`).
PRESETS = ("paper", "paper-inloop", "cpu", "smoke")

#: The suites a run may evaluate in-loop (:mod:`spadework.evaluate.catalog` builds each).
SUITES = ("rg-hard", "rg-hard-disjoint", "rg-default", "math", "library-heldout", "bfcl-ast",
          "humaneval")

#: Suites that read a local file given with ``--data`` (``spadework eval`` only).
DATA_SUITES = ("aime", "gpqa")


@dataclass(frozen=True)
class EvalConfig:
    """The ``[eval]`` section of a run config.

    ``every``: evaluate after every ``every``-th iteration (0: never). ``suites``: suite names
    (see ``spadework eval list``; the ``--data`` suites need files and are not allowed here).
    ``preset``: the eval preset (``paper-inloop`` is the reference's in-run setting).
    ``max_items``: fewer items per suite (per task for reasoning-gym) than the preset plays.
    ``seed``: the eval seed, the same at every evaluation so they pair. ``budget_seconds``: skip
    the suites (after the first) that would start after this much wall time (None: no limit).
    """

    every: int = 0
    suites: tuple[str, ...] = ("library-heldout",)
    preset: str = "cpu"
    max_items: int | None = None
    seed: int = 0
    budget_seconds: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "suites", tuple(self.suites))
        if not isinstance(self.every, int) or self.every < 0:
            raise ConfigError(f"eval.every must be an int >= 0 (0 = never), got {self.every!r}")
        if self.every and not self.suites:
            raise ConfigError("eval.suites is empty; name at least one suite, e.g. "
                              "suites = [\"library-heldout\"], or set eval.every = 0")
        for name in self.suites:
            if name not in SUITES:
                raise ConfigError(f"eval.suites: unknown or file-based suite {name!r}; "
                                  f"use some of {', '.join(SUITES)}")
        if self.preset not in PRESETS:
            raise ConfigError(f"eval.preset must be one of {', '.join(PRESETS)}, got {self.preset!r}")
        if self.max_items is not None and self.max_items < 1:
            raise ConfigError(f"eval.max_items must be >= 1 or unset, got {self.max_items}")
        if self.budget_seconds is not None and not self.budget_seconds > 0:
            raise ConfigError(f"eval.budget_seconds must be > 0 or unset, got {self.budget_seconds}")
