"""Records of an evaluation: the items a suite plays and one row per sample.

A sample's ``status`` says what happened: ``ok`` (played and scored), ``too_long`` (the prompt
does not fit the model's context: not played), ``gen_timeout`` / ``gen_error`` (the benchmark
could not produce the item: not played), ``policy_error`` (the backend failed on it),
``score_error`` / ``score_timeout`` (the scorer failed on the answer), ``env_error`` (a
multi-turn environment failed). Every status but ``ok`` is a loss: ``correct`` is False and the
summary counts each status, so nothing leaves the denominator silently (the reference drops
errored episodes from it).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from spadework.evaluate.judge import EvalError

STATUSES = ("ok", "too_long", "gen_timeout", "gen_error", "policy_error", "score_error",
            "score_timeout", "env_error")


@dataclass(frozen=True)
class EvalItem:
    """One benchmark item, ready to play (or with the reason it cannot be).

    ``messages``: the chat to continue (the benchmark's prompt). ``gold``: the reference answer
    as text, None where the benchmark has none (scored by a checker instead). ``index``: the
    item's index in its source (reasoning-gym's dataset index, a row number). ``tools``: JSON
    schemas for function-calling items. ``status`` is ``ok`` or why it cannot be played.
    """

    suite: str
    task: str
    bucket: str
    item_id: str
    index: int
    messages: tuple[Mapping[str, Any], ...] = ()
    gold: str | None = None
    tools: tuple[Mapping[str, Any], ...] = ()
    status: str = "ok"
    error: str = ""

    def prompt_hash(self) -> str:
        """sha256 of the prompt (messages and tools), so two runs can prove they asked the same."""
        blob = json.dumps([list(self.messages), list(self.tools)], sort_keys=True, default=str)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Scored:
    """What a scorer says about one response."""

    extracted: str | None
    reward: float
    correct: bool
    status: str = "ok"
    error: str = ""


@dataclass(frozen=True)
class Sample:
    """One row of ``samples.jsonl``: one sample of one item, played and scored (or not)."""

    suite: str
    task: str
    bucket: str
    item_id: str
    sample_index: int
    seed: int
    prompt_hash: str
    response: str = ""
    extracted: str | None = None
    gold: str | None = None
    reward: float = 0.0
    correct: bool = False
    status: str = "ok"
    finish_reason: str = ""
    prompt_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    error: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise EvalError(f"unknown sample status {self.status!r}; one of {', '.join(STATUSES)}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> Sample:
        """A row read back from ``samples.jsonl``; unknown keys are ignored, missing ones are an
        error naming the key."""
        names = {f.name for f in fields(cls)}
        required = ("suite", "task", "bucket", "item_id", "sample_index", "seed", "prompt_hash")
        missing = [k for k in required if k not in row]
        if missing:
            raise EvalError(f"sample row lacks {', '.join(missing)}: not a spadework samples.jsonl row")
        return cls(**{k: v for k, v in row.items() if k in names})

    @classmethod
    def unplayed(cls, item: EvalItem, sample_index: int, seed: int) -> Sample:
        """The row of an item that was not played (too long, not generated): a counted loss."""
        return cls(item.suite, item.task, item.bucket, item.item_id, sample_index, seed,
                   item.prompt_hash(), gold=item.gold, status=item.status, error=item.error)
