"""spadework.rss: the peak resident memory of a stretch of work, reset between stretches."""

from __future__ import annotations

import pytest

from spadework import rss


def test_the_peak_counts_what_a_stretch_touched_and_a_reset_forgets_it():
    if not rss.reset_peak():
        pytest.skip("this system cannot reset the peak resident set (/proc/self/clear_refs)")
    before = rss.peak_mib()
    block = bytearray(256 * 1024 * 1024)  # zeroed: not resident until written
    block[:: 4096] = b"\x01" * len(block[:: 4096])  # one write a page: 256 MiB resident
    during = rss.peak_mib()
    del block
    assert during - before >= 200  # the stretch's own peak, not the process's since it began
    assert rss.reset_peak()
    assert rss.peak_mib() < during - 200  # the next stretch starts from what is resident now
