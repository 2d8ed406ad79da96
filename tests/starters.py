"""The starter library checked once per test session, the way a run checks it at its start."""

from __future__ import annotations

from functools import cache

from spadework.archive.records import EnvRecord
from spadework.env.checker import CheckConfig
from spadework.library import checked_starters
from spadework.sandbox import Limits, Sandbox


@cache
def starter_records(max_turns: int = 8) -> tuple[EnvRecord, ...]:
    """Every starter as checked in a real sandbox under ``max_turns`` (about 3 s, then cached)."""
    with Sandbox(Limits()) as sb:
        return tuple(checked_starters(sb, CheckConfig(max_turns=max_turns)))
