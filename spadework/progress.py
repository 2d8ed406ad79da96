"""Progress of a run: the :class:`Progress` protocol the loop reports to, and the terminal display.

The loop reports numbers, never text to parse back: ``stage(name, note)`` when a stage starts (or
is skipped after a restart) and ``advance(name, done, total)`` as its units (design attempts,
episodes) finish. :class:`StageDisplay` shows them through rich: on a terminal, one progress bar
per stage with its count, rate and elapsed time; elsewhere (CI logs, files), one line per stage
and one each time a count passes another tenth of its total, so a log stays short, and a line
saying the stage is still at work whenever it has printed nothing for ``heartbeat_s`` seconds (a
design stage of the ``cpu-qwen`` preset went 134 s between lines in a log file).
:class:`CheckDisplay` shows the progress of one environment check the same way (a bar on a
terminal, nothing elsewhere).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Protocol


class Progress(Protocol):
    """Where a run reports what it is doing."""

    def stage(self, name: str, note: str) -> None:
        """Stage ``name`` starts (``note`` says what it works on), or is skipped (and why)."""

    def advance(self, name: str, done: int, total: int) -> None:
        """``done`` of ``total`` units of stage ``name`` are finished."""


class Silent:
    """A :class:`Progress` that shows nothing (library use, tests)."""

    def stage(self, name: str, note: str) -> None:
        pass

    def advance(self, name: str, done: int, total: int) -> None:
        pass


class StageDisplay:
    """A :class:`Progress` on a rich console; close it (or use ``with``) to stop the bars and the
    heartbeat."""

    def __init__(self, console: Any = None, heartbeat_s: float = 30.0) -> None:
        from rich.console import Console

        self.console = console or Console(highlight=False)
        self.t0 = time.monotonic()
        self._bars: Any = None
        self._tasks: dict[str, Any] = {}
        self._tenth: dict[str, int] = {}
        self._lock = threading.Lock()  # the heartbeat thread prints too
        self._last_line = self.t0
        self._running: tuple[str, int, int] | None = None  # (stage, done, total) while at work
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        if self.console.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bars = Progress(TextColumn("[bold]{task.description:>7}"), BarColumn(),
                                  MofNCompleteColumn(), TimeElapsedColumn(), console=self.console,
                                  transient=True)
            self._bars.start()
        elif heartbeat_s > 0:  # off a terminal: the bars' running clock is missing
            self._beat = threading.Thread(target=self._heartbeat, args=(heartbeat_s,), daemon=True,
                                          name="spadework-progress")
            self._beat.start()

    def stage(self, name: str, note: str) -> None:
        self._tenth.pop(name, None)
        self._running = (name, 0, 0)
        if self._bars is not None and name in self._tasks:
            self._bars.remove_task(self._tasks.pop(name))
        self._line(name, note)

    def advance(self, name: str, done: int, total: int) -> None:
        self._running = (name, done, total) if done < total else None
        if self._bars is not None:
            if name not in self._tasks:
                self._tasks[name] = self._bars.add_task(name, total=total)
            self._bars.update(self._tasks[name], completed=done, total=total)
            if done >= total:
                self._bars.remove_task(self._tasks.pop(name))
                self._line(name, f"{done}/{total} done")
            return
        tenth = done * 10 // max(total, 1)  # 10 only once all are done
        if self._tenth.get(name) != tenth:
            self._tenth[name] = tenth
            self._line(name, f"{done}/{total}")

    def _line(self, name: str, text: str) -> None:
        with self._lock:
            now = time.monotonic()
            self._last_line = now
            self.console.print(f"[dim]{now - self.t0:7.1f}s[/dim] [bold]{name:>7}[/bold]  {text}")

    def _heartbeat(self, every: float) -> None:
        """Print a line for the stage at work whenever nothing was printed for ``every`` seconds."""
        while not self._stop.wait(min(every, 1.0)):
            running, quiet = self._running, time.monotonic() - self._last_line
            if running is not None and quiet >= every:
                name, done, total = running
                so_far = f"{done}/{total} so far, " if total else ""
                self._line(name, f"{so_far}still at work ({quiet:.0f}s since the last line)")

    def close(self) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
            self._beat = None
        if self._bars is not None:
            self._bars.stop()
            self._bars = None

    def __enter__(self) -> StageDisplay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CheckDisplay:
    """Progress of one ``spadework check`` on a terminal: a transient rich bar for the stage that
    runs (its units done of its total, the time used of the budget), which disappears when the
    check ends so that only the report remains. Elsewhere (a pipe, a file, CI) it shows nothing:
    the report says it all. Call it with each
    :class:`~spadework.env.budget.CheckProgress`; close it (or use ``with``) at the end.
    """

    def __init__(self, console: Any = None) -> None:
        from rich.console import Console

        self.console = console or Console(stderr=True, highlight=False)
        self._bars: Any = None
        self._task: Any = None
        if self.console.is_terminal:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._bars = Progress(TextColumn("[bold]{task.description:>11}"), BarColumn(),
                                  MofNCompleteColumn(), TextColumn("{task.fields[unit]}"),
                                  TimeElapsedColumn(), TextColumn("[dim]of {task.fields[budget]}"),
                                  console=self.console, transient=True)
            self._bars.start()

    def __call__(self, event: Any) -> None:
        if self._bars is None:
            return
        if self._task is None:  # one task for the whole check: its elapsed time is the check's
            self._task = self._bars.add_task(event.stage, total=None, unit="",
                                             budget=f"{event.budget:g} s budget")
        total = event.total or None
        self._bars.update(self._task, description=event.stage, total=total,
                          completed=event.done if total else 0, unit=event.unit)

    def close(self) -> None:
        if self._bars is not None:
            self._bars.stop()
            self._bars = None

    def __enter__(self) -> CheckDisplay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
