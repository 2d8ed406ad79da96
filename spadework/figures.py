"""What each stage of an iteration reports, and the iteration's line of ``metrics.jsonl``, as
frozen records read by attribute.

A stage returns one of the ``*Figures`` records below (``loop.StageResult.figures``); the
iteration collects them in :class:`IterationFigures`, which the ``progress`` state stores after
each stage (as ``to_dict()``: a resumed iteration reads them back with ``from_dict``), and the
store stage summarises them into one :class:`IterationMetrics` (``metrics.summarize``), whose
``to_dict()`` is the line of ``metrics.jsonl`` and the archive's iteration record, key for key as
they were when these figures travelled as dicts. The records import nothing of the package:
the report, the CLI and the loggers read the same records the loop writes.

A field that a stage leaves out of its figures in some cases (an engine without work counters,
a run without rollout workers) is None, and ``to_dict()`` leaves it out, so the stored figures
keep the keys they always had.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

#: The stages of an iteration, in order (``loop.STAGES``).
STAGES = ("design", "pool", "hints", "play", "reward", "train", "eval", "store")


@dataclass(frozen=True, kw_only=True)
class StageFigures:
    """What every stage reports: its wall time (``seconds``) and this process's peak resident
    memory during it (``peak_rss_mib``, :mod:`spadework.rss`; None where ``/proc`` cannot be
    read), both set when the stage commits. The store stage reports only those."""

    peak_rss_mib: int | None = None
    seconds: float | None = None
    #: Fields left out of ``to_dict()`` while None (stored figures never held them then).
    OPTIONAL: ClassVar[frozenset[str]] = frozenset()
    #: What the loop sets when a stage commits, stored last (when known).
    MEASURED: ClassVar[tuple[str, ...]] = ("peak_rss_mib", "seconds")

    def to_dict(self) -> dict[str, Any]:
        """The figures as stored (JSON-ready), ``peak_rss_mib`` and ``seconds`` last."""
        out = {f.name: _plain(getattr(self, f.name)) for f in fields(self)
               if f.name not in self.MEASURED
               and not (f.name in self.OPTIONAL and getattr(self, f.name) is None)}
        out.update({k: getattr(self, k) for k in self.MEASURED if getattr(self, k) is not None})
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StageFigures:
        """Read back what ``to_dict()`` stored; keys it does not know are ignored."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass(frozen=True, kw_only=True)
class DesignFigures(StageFigures):
    """The design stage: whether it ran (``regenerated``), its attempts by outcome (``funnel``:
    ``metrics.funnel``), the tokens the designer generated, ``error`` when the designer failed
    as a whole, and the designer engine's work counters during the stage (llama.cpp's: prompt
    tokens computed, reused from cached cells, copied from another sequence)."""

    regenerated: bool = False
    funnel: Mapping[str, int] = field(default_factory=dict)
    tokens: int = 0
    error: str | None = None
    engine: Mapping[str, int] | None = None
    OPTIONAL: ClassVar[frozenset[str]] = frozenset({"error", "engine"})


@dataclass(frozen=True, kw_only=True)
class PoolFigures(StageFigures):
    """The pool stage: how many environments play, how many of them fresh, and each one's level
    (id prefix -> level)."""

    size: int = 0
    fresh: int = 0
    levels: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class HintFigures(StageFigures):
    """The hints stage: hints written by the policy, hints by source, and how many were dropped
    for leaking an answer."""

    written: int = 0
    sources: Mapping[str, int] = field(default_factory=dict)
    leaked: int = 0


@dataclass(frozen=True, kw_only=True)
class PlayFigures(StageFigures):
    """The play stage: episodes by status, tokens generated, instances dropped because the
    environment's solution() lost them (id prefix -> count), the engine's work counters during
    the stage (llama.cpp's) and the rollout workers' figures (on Ray)."""

    episodes: int = 0
    statuses: Mapping[str, int] = field(default_factory=dict)
    tokens: int = 0
    unwinnable_instances: Mapping[str, int] = field(default_factory=dict)
    engine: Mapping[str, int] | None = None
    rollout_workers: Mapping[str, Any] | None = None
    OPTIONAL: ClassVar[frozenset[str]] = frozenset({"engine", "rollout_workers"})


@dataclass(frozen=True, kw_only=True)
class RewardFigures(StageFigures):
    """The reward stage (``metrics.reward_figures`` says what each figure is)."""

    envs: int = 0
    failed_plays: int = 0
    learnable_share: float | None = None
    mean_level: float | None = None
    level_moves: int = 0
    win_rate_histogram: tuple[int, ...] | None = None
    band_share: float | None = None
    band_share_ci95: tuple[float, float] | None = None
    mean_regret: float | None = None
    designer_reward: Mapping[str, Any] | None = None
    designer_credited: int = 0
    step_timeouts: int = 0
    per_env: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def designer_reward_mean(self) -> float | None:
        return (self.designer_reward or {}).get("mean")


@dataclass(frozen=True, kw_only=True)
class TrainFigures(StageFigures):
    """The train stage: the samples it assembled (None when training is off), why no update was
    made (``note``), and ``step``: the learner's statistics of the step (``Learner.step`` names
    them: ``loss_agent``, ``importance_ratio``, ...; with two trained models, each role's from the
    model that trains it) plus ``sync_seconds``; ``learners``: each model's own, when two train."""

    agent_samples: int | None = None
    agent_episodes: int | None = None
    designer_samples: int | None = None
    designer_scale: float | None = None
    dropped: Mapping[str, int] | None = None
    packed_turns: int | None = None
    frozen: tuple[str, ...] | None = None
    learners: Mapping[str, Mapping[str, Any]] | None = None
    note: str | None = None
    step: Mapping[str, Any] = field(default_factory=dict)
    OPTIONAL: ClassVar[frozenset[str]] = frozenset({
        "agent_samples", "agent_episodes", "designer_samples", "designer_scale", "dropped",
        "packed_turns", "frozen", "learners", "note"})

    def loss(self, role: str) -> float | None:
        """The role's share of the step's loss (None without an update or without its samples)."""
        return self.step.get(f"loss_{role}")

    def to_dict(self) -> dict[str, Any]:
        """The assembly's figures, then the step's statistics flat beside them (the stage's
        ``seconds`` replaces the step's own; it and the stage's peak memory come last)."""
        out = super().to_dict()
        step, measured = out.pop("step"), {k: out.pop(k) for k in self.MEASURED if k in out}
        out.update({k: v for k, v in step.items() if k != "seconds" and k not in out})
        return {**out, **measured}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TrainFigures:
        names = {f.name for f in fields(cls)} - {"step"}
        return cls(**{k: v for k, v in d.items() if k in names},
                   step={k: v for k, v in d.items() if k not in names})


@dataclass(frozen=True, kw_only=True)
class EvalFigures(StageFigures):
    """The eval stage: whether it was due, and when it was, what ``evaluate_policy`` returned:
    per suite its score, CI and buckets, the suites skipped past the budget, the eval preset,
    seed and results folder."""

    due: bool = False
    suites: Mapping[str, Mapping[str, Any]] | None = None
    skipped: tuple[str, ...] | None = None
    preset: str | None = None
    seed: int | None = None
    dir: str | None = None
    OPTIONAL: ClassVar[frozenset[str]] = frozenset({"suites", "skipped", "preset", "seed", "dir"})


#: The record each stage reports.
RECORDS: dict[str, type[StageFigures]] = {
    "design": DesignFigures, "pool": PoolFigures, "hints": HintFigures, "play": PlayFigures,
    "reward": RewardFigures, "train": TrainFigures, "eval": EvalFigures, "store": StageFigures,
}


@dataclass
class IterationFigures:
    """The figures of an iteration's committed stages so far (None for a stage not yet run)."""

    design: DesignFigures | None = None
    pool: PoolFigures | None = None
    hints: HintFigures | None = None
    play: PlayFigures | None = None
    reward: RewardFigures | None = None
    train: TrainFigures | None = None
    eval: EvalFigures | None = None
    store: StageFigures | None = None

    def seconds(self) -> dict[str, float | None]:
        """Each stage's wall time but the store's (None for a stage not run)."""
        return {name: getattr(getattr(self, name), "seconds", None) for name in STAGES[:-1]}

    def peak_rss(self) -> dict[str, int]:
        """Each stage's peak resident memory in MiB but the store's (which writes the line that
        holds them), for the stages that measured one."""
        return {name: peak for name in STAGES[:-1]
                if (peak := getattr(getattr(self, name), "peak_rss_mib", None)) is not None}

    def to_dict(self) -> dict[str, Any]:
        """Stage name -> stored figures, for the stages run (the progress state's ``figures``)."""
        return {n: getattr(self, n).to_dict() for n in STAGES if getattr(self, n) is not None}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> IterationFigures:
        return cls(**{n: RECORDS[n].from_dict(v) for n, v in d.items() if n in RECORDS})


@dataclass(frozen=True, kw_only=True)
class IterationMetrics:
    """One line of ``metrics.jsonl`` (``metrics.summarize`` says what each figure is). ``train``
    and ``eval`` are the stages' own figures as stored (``eval`` None when not due); ``extra``
    keeps keys of a stored line that this record does not name, so a line read back writes
    back whole."""

    iteration: int
    losses: Mapping[str, float | None] = field(default_factory=dict)
    rewards: Mapping[str, float | None] = field(default_factory=dict)
    agent_format_share: Mapping[str, float | None] = field(default_factory=dict)
    preset: str | None = None
    regenerated: bool = False
    validity_funnel: Mapping[str, int] = field(default_factory=dict)
    pool: Mapping[str, Any] = field(default_factory=dict)
    hints: Mapping[str, Any] = field(default_factory=dict)
    episodes: int | None = None
    statuses: Mapping[str, int] | None = None
    agent_return: Mapping[str, float | None] = field(default_factory=dict)
    win_rate_histogram: tuple[int, ...] | None = None
    band_share: float | None = None
    band_share_ci95: tuple[float, float] | None = None
    learnable_share: float | None = None
    mean_level: float | None = None
    level_moves: int | None = None
    failed_plays: int | None = None
    mean_regret: float | None = None
    designer_reward: Mapping[str, Any] | None = None
    per_env: Mapping[str, Mapping[str, Any]] | None = None
    train: Mapping[str, Any] | None = None
    tokens: Mapping[str, int] = field(default_factory=dict)
    eval: Mapping[str, Any] | None = None
    unwinnable_instances: Mapping[str, int] = field(default_factory=dict)
    engine: Mapping[str, int] | None = None
    design_engine: Mapping[str, int] | None = None
    seconds: Mapping[str, float | None] = field(default_factory=dict)
    peak_rss_mib: Mapping[str, int] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: The figures' names (the line's keys), ``extra`` aside.
    FIELDS: ClassVar[frozenset[str]]

    @property
    def values(self) -> dict[str, Any]:
        """The line without its ``iteration`` (what the archive stores per iteration)."""
        out = self.to_dict()
        del out["iteration"]
        return out

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: _plain(getattr(self, f.name)) for f in fields(self) if f.name != "extra"}
        return {**out, **{k: v for k, v in self.extra.items() if k not in out}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> IterationMetrics:
        """A stored line (``iteration`` plus the values); keys the record does not name go to
        ``extra``, and keys an older line lacks, or holds as null where the record keeps a
        mapping (``seconds``, ``validity_funnel``, ...), take their defaults."""
        mappings = {f.name for f in fields(cls) if f.default_factory is dict}
        kept = {k: v for k, v in d.items() if k in cls.FIELDS and not (v is None and k in mappings)}
        return cls(**kept, extra={k: v for k, v in d.items() if k not in cls.FIELDS})


IterationMetrics.FIELDS = frozenset(f.name for f in fields(IterationMetrics)) - {"extra"}


def _plain(value: Any) -> Any:
    """A figure as JSON stores it: mappings as dicts, tuples as lists (recursively)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value
