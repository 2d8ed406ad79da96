"""Records the archive stores and returns, and the compact codecs for what they carry.

Records are frozen dataclasses. Environments are keyed by the sha256 of their code, so
``EnvRecord.env_id`` is computed from ``code`` and can never disagree with it. Token ids and
logprobs are stored packed (little-endian int32 / float64), which keeps them compact and makes a
round trip exact: the learner trains on exactly the numbers that were sampled.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from spadework.errors import ArchiveError
from spadework.figures import IterationMetrics
from spadework.types import CheckReport, CheckResult, EnvSource, Sampling, env_id_of

#: An environment is either in the archive's pool or kept as a rejected design, with its stage.
ENV_STATUSES = ("accepted", "rejected")

#: Where an environment came from.
ENV_ORIGINS = ("designed", "starter", "imported")

#: ``DesignAttempt.outcome`` of an attempt whose environment passed every check.
ACCEPTED = "accepted"

_INT32 = (-(2**31), 2**31 - 1)


def pack_ints(values: Sequence[int]) -> bytes:
    """Token ids as little-endian int32 bytes (4 bytes each).

    >>> pack_ints([1, 70000]).hex()
    '0100000070110100'
    """
    try:
        return struct.pack(f"<{len(values)}i", *values)
    except struct.error as e:
        raise ArchiveError(f"token ids must be integers in int32 range, got {list(values)[:8]}...: {e}") from e


def unpack_ints(blob: bytes | None) -> tuple[int, ...]:
    """The inverse of :func:`pack_ints`; ``None`` (nothing stored) is the empty tuple.

    >>> unpack_ints(pack_ints([5, -1, 2**31 - 1]))
    (5, -1, 2147483647)
    """
    if not blob:
        return ()
    if len(blob) % 4:
        raise ArchiveError(f"a packed int32 array of {len(blob)} bytes is corrupt (not a multiple of 4)")
    return struct.unpack(f"<{len(blob) // 4}i", blob)


def pack_floats(values: Sequence[float]) -> bytes:
    """Floats as little-endian float64 bytes: exact, so a stored logprob equals the sampled one.

    >>> unpack_floats(pack_floats([-0.1, 0.0, 1e-300]))
    (-0.1, 0.0, 1e-300)
    """
    try:
        return struct.pack(f"<{len(values)}d", *values)
    except struct.error as e:
        raise ArchiveError(f"expected numbers, got {list(values)[:8]}...: {e}") from e


def unpack_floats(blob: bytes | None) -> tuple[float, ...]:
    """The inverse of :func:`pack_floats`."""
    if not blob:
        return ()
    if len(blob) % 8:
        raise ArchiveError(f"a packed float64 array of {len(blob)} bytes is corrupt (not a multiple of 8)")
    return struct.unpack(f"<{len(blob) // 8}d", blob)


def to_json(value: Any, what: str) -> str:
    """Strict JSON (no NaN or infinity, which other readers reject); the error names ``what``.

    >>> to_json({"b": 1, "a": [0.5]}, "metrics")
    '{"a":[0.5],"b":1}'
    """
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ArchiveError(f"{what} must be JSON-serialisable with finite numbers: {e}") from e


def report_to_json(report: CheckReport | None) -> str | None:
    """A check report as JSON (every stage, in order), or ``None`` when there is none."""
    if report is None:
        return None
    results = [
        {"stage": r.stage, "passed": r.passed, "reason": r.reason, "seconds": r.seconds}
        for r in report.results
    ]
    return to_json({"env_id": report.env_id, "class_name": report.class_name, "results": results,
                    "max_turns": report.max_turns, "levels": report.levels}, "check report")


def report_from_json(text: str | None) -> CheckReport | None:
    """The inverse of :func:`report_to_json`; a malformed report raises :class:`ArchiveError`.

    >>> r = CheckReport("ab", "XEnv", (CheckResult("static", True, "ok", 0.25),), max_turns=4, levels=3)
    >>> report_from_json(report_to_json(r)) == r
    True
    """
    if text is None:
        return None
    try:
        d = json.loads(text)
        results = tuple(
            CheckResult(str(x["stage"]), bool(x["passed"]), str(x["reason"]), float(x["seconds"]))
            for x in d["results"]
        )
        turns = d.get("max_turns")  # absent from reports written before it was recorded
        return CheckReport(d["env_id"], d["class_name"], results,
                           None if turns is None else int(turns), int(d.get("levels", 1)))
    except (ValueError, KeyError, TypeError) as e:
        raise ArchiveError(f"a stored check report is corrupt ({e}): {text[:120]!r}") from e


@dataclass(frozen=True)
class EnvRecord:
    """One environment as archived: its code, where it came from, and how validation went.

    ``status`` is one of :data:`ENV_STATUSES`; a rejected environment names the stage that
    failed and why (a rejected design is data too). ``iteration`` is the iteration that designed
    it (-1 for starter entries). ``created_at`` is filled in by the archive when left ``None``.
    ``benchmarks`` names the held-out benchmark tasks its class name or docstring matches
    (:func:`spadework.env.hygiene.env_benchmark_matches`): a flag for people, so a run
    does not quietly train on its own test.
    """

    code: str
    class_name: str
    setting: str
    skill: str | None
    status: str
    iteration: int
    name: str | None = None
    origin: str = "designed"
    doc_id: str | None = None
    doc_excerpt: str | None = None
    parent_id: str | None = None
    failed_stage: str | None = None
    reason: str = ""
    report: CheckReport | None = None
    hint: str | None = None
    created_at: float | None = None
    benchmarks: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.status not in ENV_STATUSES:
            raise ValueError(f"status must be one of {ENV_STATUSES}, got {self.status!r}")
        if self.origin not in ENV_ORIGINS:
            raise ValueError(f"origin must be one of {ENV_ORIGINS}, got {self.origin!r}")
        if (self.status == "rejected") != bool(self.failed_stage):
            raise ValueError("a rejected environment names its failed_stage; an accepted one has none")

    @property
    def env_id(self) -> str:
        return env_id_of(self.code)

    @property
    def levels(self) -> int:
        """The difficulty levels it declares and was checked at (1: none, or not checked)."""
        return self.report.levels if self.report is not None else 1

    @property
    def source(self) -> EnvSource:
        """What playing it needs: code, class, setting, skill, name and levels."""
        return EnvSource(self.code, self.class_name, self.setting, self.skill, self.name, self.levels)

    @classmethod
    def from_check(cls, code: str, report: CheckReport, *, iteration: int, setting: str,
                   skill: str | None, **kw: Any) -> EnvRecord:
        """The record of a checked candidate: accepted iff every stage passed."""
        return cls(code=code, class_name=report.class_name or "", setting=setting, skill=skill,
                   status="accepted" if report.ok else "rejected", iteration=iteration,
                   failed_stage=report.failed_stage, reason=report.reason, report=report, **kw)


@dataclass(frozen=True)
class GroundingDocument:
    """A corpus document as the designer read it: ``text`` is what its prompt held (the
    document cut to the design config's word budget), ``title`` the corpus's title if any."""

    doc_id: str
    text: str
    title: str | None = None


@dataclass(frozen=True)
class EnvStats:
    """How an environment has played: totals over all iterations, rates from the latest one.

    ``win_rate`` and ``regret`` are those of ``last_played_iteration`` (the agent's current
    ability is what memory selection needs); ``plays`` and ``wins`` are summed over iterations.
    """

    env_id: str
    plays: int
    wins: int
    win_rate: float
    regret: float | None
    last_played_iteration: int


@dataclass(frozen=True)
class DesignAttempt:
    """One designer sample: what it was asked, what it wrote, what became of it.

    Keyed by ``(iteration, slot, attempt)``. ``outcome`` is :data:`ACCEPTED` or the name of the
    failing stage (``reason`` says why); ``env_id`` is set when code was extracted and archived.
    ``reward`` stays ``None`` until the environment's plays credit it (delayed credit), and
    ``trained_iteration`` until the learner has used the sample. ``sampling`` is how the reply
    was drawn (None: not recorded, as in archives written before it was; not trainable).
    """

    iteration: int
    slot: int
    attempt: int
    skill: str | None
    setting: str
    doc_id: str | None
    messages: tuple[dict[str, str], ...]
    reply: str
    prompt_ids: tuple[int, ...]
    output_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    outcome: str
    reason: str = ""
    env_id: str | None = None
    finish_reason: str = ""
    memory_ids: tuple[str, ...] = ()
    reward: float | None = None
    trained_iteration: int | None = None
    created_at: float | None = None
    sampling: Sampling | None = None

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.iteration, self.slot, self.attempt)

    def __post_init__(self) -> None:
        if len(self.output_ids) != len(self.logprobs):
            raise ValueError(f"{len(self.output_ids)} output ids but {len(self.logprobs)} logprobs")
        if self.reward is not None and not math.isfinite(self.reward):
            raise ValueError(f"reward must be finite, got {self.reward!r}")


@dataclass(frozen=True)
class IterationRecord:
    """Metrics of one finished iteration (a JSON object), with when they were recorded."""

    iteration: int
    metrics: dict[str, Any] = field(default_factory=dict)
    recorded_at: float = 0.0

    def line(self) -> IterationMetrics:
        """The metrics as the record of a ``metrics.jsonl`` line, read by attribute."""
        return IterationMetrics.from_dict({**self.metrics, "iteration": self.iteration})


@dataclass(frozen=True)
class MemoryPositive:
    """An archived environment at the edge of the agent's ability, for the designer's prompt."""

    env_id: str
    class_name: str
    skill: str | None
    code: str
    win_rate: float
    regret: float | None

    @property
    def note(self) -> str:
        r = "n/a" if self.regret is None else f"{self.regret:.2f}"
        return f"skill: {self.skill}, win rate {self.win_rate:.2f}, regret {r}"


@dataclass(frozen=True)
class MemoryNegative:
    """An environment the agent always or never solves: ``reason`` is "too easy" or "too hard";
    ``summary`` says what the game is (:func:`spadework.archive.memory.design_summary`)."""

    env_id: str
    class_name: str
    skill: str | None
    win_rate: float
    reason: str
    summary: str

    @property
    def note(self) -> str:
        return f"{self.reason} (win rate {self.win_rate:.2f}): class {self.class_name}"


@dataclass(frozen=True)
class PlayedDesign:
    """How a designed environment played at its latest iteration, for the designer's feedback:
    unhinted and hinted wins of the same instances, the level played and how many there are,
    and a few of the agent's unhinted replies (``replies``: the start of each, for the designs
    the agent never wins)."""

    env_id: str
    class_name: str
    skill: str | None
    iteration: int
    level: int
    levels: int
    wins: int
    plays: int
    hinted_wins: int
    hinted_plays: int
    replies: tuple[str, ...] = ()

    @property
    def win_rate(self) -> float:
        return self.wins / self.plays if self.plays else 0.0

    @property
    def regret(self) -> float:
        hinted = self.hinted_wins / self.hinted_plays if self.hinted_plays else self.win_rate
        return hinted - self.win_rate

    @property
    def note(self) -> str:
        """One line of figures, e.g. ``won 1 of 5 without the hint and 4 of 5 with it, at level 2 of 3``."""
        return (f"won {self.wins} of {self.plays} without the hint and {self.hinted_wins} of "
                f"{self.hinted_plays} with it, at level {self.level} of {self.levels}")


@dataclass(frozen=True)
class ImportRecord:
    """Where an imported environment came from (schema v5's ``imports`` table): the format and
    file it was read from, the sha256 of that file's text as found, how it was adapted, and the
    figures its source recorded (the reference agent's, not plays of this archive).
    ``imported_at`` is filled in by the archive when left ``None``."""

    env_id: str
    format: str
    source_file: str
    source_sha256: str
    adaptations: tuple[str, ...] = ()
    rollout_id: int | None = None
    win_rate: float | None = None
    regret: float | None = None
    metadata: dict | None = None
    imported_at: float | None = None
