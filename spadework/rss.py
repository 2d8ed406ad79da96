"""This process's peak resident memory over a stretch of work (Linux), without side effects.

:class:`PeakMeter` measures one stretch (the loop runs one around each stage, whose figures then
carry ``peak_rss_mib``), so a run's peak is placed in the stage that set it, not only measured
from outside. Two sources, both read from ``/proc/self``:

- the kernel's own high-water mark of the process (``VmHWM``), exact but cumulative since the
  process began: when it rose during the stretch, the stretch set a new high and its peak is that
  mark;
- otherwise a thread that reads the current resident set (``statm``) every ``interval`` seconds,
  whose largest reading is the stretch's peak (a spike shorter than the interval may be missed;
  it did not set the process's high either way).

Resetting the high-water mark between stages (``/proc/self/clear_refs``) would make every stage
exact, but it also resets what ``getrusage`` and ``/usr/bin/time -v`` report for the whole
process (measured: a run peaking at 7.57 GiB reported 6.03 GiB), so it is not done. The peak is
this process's: the engine, the learner and the models live in it; the sandbox's processes are
small and not counted. Where ``/proc`` is missing (not Linux) the peak is None.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

_STATUS = Path("/proc/self/status")
_STATM = Path("/proc/self/statm")
_PAGE_MIB = os.sysconf("SC_PAGE_SIZE") / 2**20 if hasattr(os, "sysconf") else 4096 / 2**20


def high_water_mib() -> int | None:
    """The process's peak resident set since it began (``VmHWM``), in MiB; None without /proc.

    >>> value = high_water_mib()
    >>> value is None or value > 0
    True
    """
    try:
        text = _STATUS.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024  # kB
    return None


def resident_mib() -> int | None:
    """The process's resident set now, in MiB; None without /proc."""
    try:
        return int(int(_STATM.read_text().split()[1]) * _PAGE_MIB)
    except (OSError, IndexError, ValueError):
        return None


class PeakMeter:
    """``with PeakMeter() as m: ...`` then ``m.peak_mib``: the stretch's peak resident memory
    in MiB (None where it cannot be read); see the module docstring."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.peak_mib: int | None = None
        self._sampled: int | None = None
        self._start_high: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> PeakMeter:
        self._start_high, self._sampled = high_water_mib(), resident_mib()
        if self._sampled is not None:
            self._thread = threading.Thread(target=self._sample, name="spadework-rss", daemon=True)
            self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            now = resident_mib()
            if now is not None and now > self._sampled:  # started only with a first reading
                self._sampled = now

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        now, high = resident_mib(), high_water_mib()
        sampled = max((v for v in (self._sampled, now) if v is not None), default=None)
        if high is not None and self._start_high is not None and high > self._start_high:
            self.peak_mib = high  # this stretch set the process's high: the exact figure
        else:
            self.peak_mib = sampled
