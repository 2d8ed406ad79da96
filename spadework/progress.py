"""The run's progress display: the stage and its counts, through rich.

Each stage prints one line with the seconds since the start; counts ("3/8 episodes") print when
they pass another tenth of their total, so a log stays short on a terminal and in CI alike.
"""

from __future__ import annotations

import time
from typing import Any


class StageDisplay:
    """``show(stage, text)`` for :func:`spadework.loop.run`."""

    def __init__(self, console: Any = None) -> None:
        from rich.console import Console

        self.console = console or Console(highlight=False)
        self.t0 = time.monotonic()
        self._last: tuple[str, int] = ("", -1)

    def __call__(self, stage: str, text: str) -> None:
        done, total = _counts(text)
        if done is not None and total:
            tenth = done * 10 // total
            if (stage, tenth) == self._last and done != total:
                return
            self._last = (stage, tenth)
        elapsed = time.monotonic() - self.t0
        self.console.print(f"[dim]{elapsed:7.1f}s[/dim] [bold]{stage:>7}[/bold]  {text}")


def _counts(text: str) -> tuple[int | None, int | None]:
    """``"3/8 episodes"`` -> (3, 8); anything else -> (None, None).

    >>> _counts("3/8 episodes"), _counts("iteration 2")
    ((3, 8), (None, None))
    """
    head = text.split(" ", 1)[0]
    a, sep, b = head.partition("/")
    if sep and a.isdigit() and b.isdigit():
        return int(a), int(b)
    return None, None
