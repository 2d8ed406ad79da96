"""Frozen records that cross module boundaries.

Records are identified by content (``env_id`` is the sha256 of the environment code), never by a
file path. ``metadata`` dicts, where present, are for logging only.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field


def env_id_of(code: str) -> str:
    """The identity of an environment: the sha256 hex digest of its code (UTF-8).

    >>> env_id_of("x = 1")[:12]
    '8ff436def145'
    """
    return hashlib.sha256(code.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class EnvSource:
    """One environment module's code and what is known about it before it runs. ``levels``:
    the difficulty levels it declares and was checked at (1 when it has none)."""

    code: str
    class_name: str
    setting: str = "games"  # "games" or "tool-use"
    skill: str | None = None
    name: str | None = None
    levels: int = 1

    @property
    def env_id(self) -> str:
        return env_id_of(self.code)


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one named validation stage."""

    stage: str
    passed: bool
    reason: str = ""
    seconds: float = 0.0


@dataclass(frozen=True)
class CheckReport:
    """All stages run on one candidate, in order; the first failure ends the run of stages.

    ``max_turns`` is the turn limit the environment was built and checked with (None in reports
    written before it was recorded): an environment is only played under the limit it passed.
    ``levels`` is the number of difficulty levels it declares (its ``LEVELS``; 1 when it has
    none, when its levels all give the same game, or when the report was written before levels
    existed; the lowest of its top levels when those give one game), each of which was checked.
    """

    env_id: str | None
    class_name: str | None
    results: tuple[CheckResult, ...] = field(default_factory=tuple)
    max_turns: int | None = None
    levels: int = 1

    @property
    def ok(self) -> bool:
        return bool(self.results) and all(r.passed for r in self.results)

    @property
    def failed(self) -> CheckResult | None:
        return next((r for r in self.results if not r.passed), None)

    @property
    def failed_stage(self) -> str | None:
        f = self.failed
        return f.stage if f else None

    @property
    def reason(self) -> str:
        f = self.failed
        return f.reason if f else ""


#: How an episode ended. A failure is recorded here, never raised into the loop.
EPISODE_STATUSES = ("completed", "truncated", "timeout", "env_error", "policy_error")

#: The two regret arms.
ARMS = ("hint", "no_hint")


@dataclass(frozen=True)
class Sampling:
    """How a completion was drawn: what the learner needs to score its tokens the way the sampler
    did (logprobs are ``log_softmax(logits / T)``; ``T = 1`` for greedy, ``temperature == 0``).

    >>> Sampling(0.7, 0.95, 20).scoring_temperature, Sampling(0.0, 1.0, 0).scoring_temperature
    (0.7, 1.0)
    """

    temperature: float
    top_p: float = 1.0
    top_k: int = 0

    @property
    def scoring_temperature(self) -> float:
        return self.temperature if self.temperature > 0 else 1.0


@dataclass(frozen=True)
class Turn:
    """One assistant turn: exactly what was sampled (for the learner) and what the env answered.

    ``sampling`` is how the reply was drawn (None only for turns archived before it was
    recorded: the learner cannot score those and leaves them out). ``parsed`` is whether the host
    parsed a well-formed action from the reply (a ``\\boxed{}`` in games, a tool call or an answer
    in tool use), recorded by the rollout that parsed it.
    """

    prompt_ids: tuple[int, ...]
    output_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    text: str
    action: str
    observation: str
    reward: float
    finish_reason: str
    sampling: Sampling | None
    parsed: bool


@dataclass(frozen=True)
class Episode:
    """One play of one environment instance by the agent, in one arm.

    ``seed`` is the instance: both arms play the same seeds (see ``spadework.seeding``).
    ``status`` is one of :data:`EPISODE_STATUSES`; ``error`` says why when it is not a normal end.
    ``opening`` is the first message the agent saw: the instance's first observation, with the
    hint in the hinted arm (empty when the episode ended before it, or was archived before
    schema v4 kept it). ``level`` is the difficulty level the instance was built at (1 for an
    environment without levels).
    """

    env_id: str
    arm: str
    play_index: int
    seed: int
    turns: tuple[Turn, ...]
    rewards: tuple[float, ...]
    terminated: bool
    truncated: bool
    status: str
    error: str = ""
    seconds: float = 0.0
    opening: str = ""
    level: int = 1

    @property
    def format_share(self) -> float:
        """The share of the episode's replies that held a well-formed action (``Turn.parsed``;
        0 for no replies). It says nothing about whether a move was legal or good; it is what a
        model too small to win can still learn first.

        >>> t = lambda ok: Turn((1,), (2,), (-0.1,), "", "", "", 0.0, "stop", None, ok)
        >>> Episode("e", "no_hint", 0, 0, (t(True), t(False)), (0.0,), True, False, "completed").format_share
        0.5
        """
        if not self.turns:
            return 0.0
        return sum(1 for t in self.turns if t.parsed) / len(self.turns)
