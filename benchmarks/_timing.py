"""Timing shared by the benchmarks (run as scripts, so this folder is on sys.path)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


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
