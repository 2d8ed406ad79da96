"""Memory figures shared by the benchmarks (run as scripts, so this folder is on sys.path)."""

from __future__ import annotations

import resource


def rss_mib() -> float:
    """The process's resident set size now, in MiB (0 where /proc is missing)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def peak_rss_mib() -> float:
    """The process's peak resident set size so far (``ru_maxrss``, KiB on Linux), in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
