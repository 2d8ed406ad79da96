"""Timing and engine settings shared by the benchmarks (run as scripts, so this folder is on
sys.path)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


def flash_attn_settings(value: str) -> list[str]:
    """The ``--flash-attn`` argument (``on``, ``off`` or both, comma-separated, measured in that
    order) as a list; exits with a one-line message on anything else."""
    settings = value.split(",")
    if not settings or any(f not in ("on", "off") for f in settings):
        raise SystemExit(f"--flash-attn: each setting is on or off, got {value!r}")
    return settings


@contextmanager
def engine_steps(engine: Any) -> Iterator[list[tuple[int, int, float]]]:
    """Time each ``llama_decode`` step of a ``LlamaCppPolicy`` while the block runs: yields a list
    that gets (tokens fed, rows whose logits are read, seconds) per step. A step that feeds more
    tokens than it samples prefills a prompt; the others only decode."""
    steps: list[tuple[int, int, float]] = []
    submit = engine._submit

    def timed(batch: Any, entries: list) -> None:
        start = time.perf_counter()
        submit(batch, entries)
        steps.append((len(entries), sum(1 for e in entries if e[3]), time.perf_counter() - start))

    engine._submit = timed
    try:
        yield steps
    finally:
        engine._submit = submit


def timed_stream(inner: Any, requests: Any, params: Any, on_done: Callable[[Any, Any], Any],
                 record: Callable[[float], None], seen: Callable[[Any, Any], None] | None = None,
                 **kwargs: Any) -> None:
    """Run ``inner.stream(requests, params, on_done)`` and ``record`` its seconds less those spent
    in ``on_done`` (the caller's own work between results: checking a design, scoring a move),
    so that the figure is the engine's alone; recorded even when the stream raises. ``seen``,
    when given, is called on each result before ``on_done``, inside the engine's time."""
    outside, start = 0.0, time.monotonic()

    def timed(request: Any, result: Any) -> Any:
        nonlocal outside
        if seen is not None:
            seen(request, result)
        t = time.monotonic()
        try:
            return on_done(request, result)
        finally:
            outside += time.monotonic() - t

    try:
        inner.stream(requests, params, timed, **kwargs)
    finally:
        record(time.monotonic() - start - outside)
