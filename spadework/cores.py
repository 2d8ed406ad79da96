"""How many of this process's cores are free now: what a stage's thread count is chosen from.

Why: the engines and the learner spin their threads at every barrier, so a thread per core on a
machine where another process holds a core runs far slower than one thread fewer (llama.cpp's
two threads 8x slower under a busy neighbour, the learner's about 7x; docs/engine.md). A run
with ``threads = "auto"`` asks :func:`free_cores` at the start of each play, design and train
stage instead of fixing a count for the whole run.

The measure: the busy time of the CPUs this process may run on (``/proc/stat``) over a short
window, less this process's own CPU time over it (``os.times``), is what other processes use;
the free cores are the rest, rounded, at least one. Where ``/proc/stat`` cannot be read (not
Linux) every core counts as free.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

#: How long :func:`free_cores` watches the CPUs: long enough for a busy neighbour to show (the
#: kernel counts in 10 ms ticks), short beside a stage of minutes.
WINDOW_SECONDS = 0.25

_STAT = Path("/proc/stat")
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def allowed_cores() -> list[int]:
    """The CPUs this process may run on."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
        else list(range(os.cpu_count() or 1))


def _busy_seconds(cpus: list[int], stat: Path = _STAT) -> float | None:
    """Seconds the ``cpus`` have spent busy since boot (all but idle and iowait), or None."""
    try:
        lines = stat.read_text().splitlines()
    except OSError:
        return None
    wanted, busy = {f"cpu{c}" for c in cpus}, 0
    seen = 0
    for line in lines:
        name, *fields = line.split()
        if name in wanted:
            ticks = [int(f) for f in fields]
            busy += sum(ticks) - ticks[3] - (ticks[4] if len(ticks) > 4 else 0)
            seen += 1
    return busy / _TICKS if seen else None


def _own_seconds() -> float:
    t = os.times()
    return t.user + t.system


def busy_elsewhere(window: float = WINDOW_SECONDS, stat: Path = _STAT) -> float | None:
    """Cores' worth of CPU time that other processes used over the next ``window`` seconds, on
    the CPUs this process may run on (0.0 to their count), or None where it cannot be read."""
    cpus = allowed_cores()
    busy0, own0, t0 = _busy_seconds(cpus, stat), _own_seconds(), time.monotonic()
    if busy0 is None:
        return None
    time.sleep(window)
    busy1, own1, t1 = _busy_seconds(cpus, stat), _own_seconds(), time.monotonic()
    if busy1 is None:
        return None
    others = (busy1 - busy0) - (own1 - own0)
    return min(float(len(cpus)), max(0.0, others / max(t1 - t0, 1e-6)))


def free_cores(window: float = WINDOW_SECONDS, stat: Path = _STAT) -> int:
    """The cores this process may use less those other processes keep busy now (rounded), at
    least 1: a stage's thread count under ``threads = "auto"``.

    >>> 1 <= free_cores(window=0.05) <= len(allowed_cores())
    True
    """
    total = len(allowed_cores())
    others = busy_elsewhere(window, stat)
    if others is None:
        return total
    return max(1, total - round(others))
