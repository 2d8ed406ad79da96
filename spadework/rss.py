"""This process's peak resident memory per stretch of work (Linux).

The kernel keeps a process's peak resident set (``VmHWM`` in ``/proc/self/status``) and lets the
process reset it to the current resident set (writing ``5`` to ``/proc/self/clear_refs``, Linux
4.0 on; it changes nothing else). The loop resets it as each stage starts and reads it as the
stage ends, so each stage's figures carry the peak of that stage alone (``peak_rss_mib``) and a
run's peak can be placed in the stage that set it, not only measured from outside
(``/usr/bin/time -v`` reports the whole run's). The peak is this process's: the engine, the
learner and the models live in it; the sandbox's processes are small and not counted.

Where the files are missing or not writable (not Linux, a locked-down ``/proc``) ``reset_peak``
returns False and ``peak_mib`` None, and the figures leave the peak out.
"""

from __future__ import annotations

from pathlib import Path

_STATUS = Path("/proc/self/status")
_CLEAR = Path("/proc/self/clear_refs")


def reset_peak() -> bool:
    """Set the peak to the current resident set; False where this system cannot."""
    try:
        _CLEAR.write_text("5")
    except OSError:
        return False
    return True


def peak_mib() -> int | None:
    """The peak resident set since the last reset (or since the process began), in MiB.

    >>> value = peak_mib()
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
