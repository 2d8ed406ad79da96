"""Eval presets: how many items and samples each suite plays, and how it samples.

Distinct from the run presets. ``paper`` is the reference's settings where the facts file gives
them (reasoning-gym: 8 episodes per task, T 0.6, top-p 0.8, top-k 20, 8192 tokens; AIME: 64
samples, T 1.0, top-p 0.95, top-k 20, 32768 tokens, which we apply to the whole math suite);
``paper-inloop`` is the reference's in-run evaluation (32 samples, T 0.7, top-p 0.8) for math;
``cpu`` is sized so ``rg-hard`` and ``math`` each finish in about 30 minutes on a 2-core machine
with the 135M default model through the transformers backend (measured: docs/results.md, "spadework
eval"); ``smoke`` is a handful of items for tests. A backend cuts ``max_tokens`` to what the
model's context leaves after the prompt.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from spadework.errors import ConfigError
from spadework.settings.eval import PRESETS


@dataclass(frozen=True)
class SuiteSettings:
    """How one suite is played under one preset.

    ``items``: items per task for reasoning-gym (its episodes), items in all for the others
    (``None``: every item). ``tasks_per_bucket``: reasoning-gym tasks per bucket (``None``: all).
    ``samples``: samples per item. ``batch_items``: items per ``Policy.chat`` call, at most.
    ``batch_tokens``: at most this many padded tokens per call (rows times the longest prompt
    plus ``max_tokens``; an item over it goes alone), or None for no bound: on a CPU a long
    prompt padded into a full batch costs many times its own compute.
    ``item_seconds``: deadline of generating or scoring one item in the judge worker.
    ``max_turns``: replies per episode (multi-turn suites only).
    """

    samples: int = 1
    max_tokens: int = 1024
    temperature: float = 0.6
    top_p: float = 0.8
    top_k: int = 20
    items: int | None = None
    tasks_per_bucket: int | None = None
    batch_items: int = 16
    batch_tokens: int | None = None
    item_seconds: float = 30.0
    max_turns: int = 8

    def __post_init__(self) -> None:
        checks = [
            (self.samples >= 1, f"samples must be >= 1, got {self.samples}"),
            (self.max_tokens >= 1, f"max_tokens must be >= 1, got {self.max_tokens}"),
            (self.temperature >= 0, f"temperature must be >= 0, got {self.temperature}"),
            (0 < self.top_p <= 1, f"top_p must lie in (0, 1], got {self.top_p}"),
            (self.top_k >= 0, f"top_k must be >= 0, got {self.top_k}"),
            (self.items is None or self.items >= 1, f"items must be >= 1 or None, got {self.items}"),
            (self.tasks_per_bucket is None or self.tasks_per_bucket >= 1,
             f"tasks_per_bucket must be >= 1 or None, got {self.tasks_per_bucket}"),
            (self.batch_items >= 1, f"batch_items must be >= 1, got {self.batch_items}"),
            (self.batch_tokens is None or self.batch_tokens >= 1,
             f"batch_tokens must be >= 1 or None, got {self.batch_tokens}"),
            (self.item_seconds > 0, f"item_seconds must be > 0, got {self.item_seconds}"),
            (self.max_turns >= 1, f"max_turns must be >= 1, got {self.max_turns}"),
        ]
        for ok, reason in checks:
            if not ok:
                raise ConfigError(f"SuiteSettings: {reason}")


def _paper() -> dict[str, SuiteSettings]:
    rg = SuiteSettings(samples=1, max_tokens=8192, temperature=0.6, top_p=0.8, top_k=20, items=8)
    return {
        "rg": rg,
        "math": SuiteSettings(samples=64, max_tokens=32768, temperature=1.0, top_p=0.95, top_k=20),
        "library": SuiteSettings(samples=1, max_tokens=1024, items=8, temperature=0.6),
        "bfcl": SuiteSettings(samples=1, max_tokens=2048, temperature=0.0, top_p=1.0, top_k=0),
        "code": SuiteSettings(samples=1, max_tokens=4096, temperature=0.2, top_p=0.95, top_k=0),
        "choice": SuiteSettings(samples=8, max_tokens=8192, temperature=0.7, top_p=0.8),
    }


def preset_settings(preset: str, kind: str) -> SuiteSettings:
    """The settings of suite kind ``kind`` (rg, math, library, bfcl, code, choice) in ``preset``.

    >>> preset_settings("paper", "rg").items, preset_settings("cpu", "rg").items
    (8, 2)
    >>> preset_settings("fast", "rg")
    Traceback (most recent call last):
    ...
    spadework.errors.ConfigError: unknown eval preset 'fast'; use one of paper, paper-inloop, cpu, smoke
    """
    if preset not in PRESETS:
        raise ConfigError(f"unknown eval preset {preset!r}; use one of {', '.join(PRESETS)}")
    table = _paper()
    if preset == "paper-inloop":
        table["math"] = replace(table["math"], samples=32, temperature=0.7, top_p=0.8)
    elif preset == "cpu":
        table = {
            "rg": replace(table["rg"], items=2, max_tokens=192, batch_tokens=12288),
            "math": replace(table["math"], samples=1, items=120, max_tokens=256, temperature=0.6,
                            top_p=0.8, batch_tokens=12288),
            "library": replace(table["library"], items=2, max_tokens=128, max_turns=4),
            "bfcl": replace(table["bfcl"], items=60, max_tokens=192),
            "code": replace(table["code"], items=40, max_tokens=256),
            "choice": replace(table["choice"], samples=1, items=60, max_tokens=256),
        }
    elif preset == "smoke":
        small = SuiteSettings(samples=1, max_tokens=12, items=2, tasks_per_bucket=1,
                              item_seconds=60.0, max_turns=2)
        table = {k: replace(small, temperature=v.temperature, top_p=v.top_p, top_k=v.top_k,
                            items=1 if k == "rg" else 2)
                 for k, v in table.items()}
    if kind not in table:
        raise ConfigError(f"no settings for suite kind {kind!r}; kinds: {', '.join(table)}")
    return table[kind]
