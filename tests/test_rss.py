"""spadework.rss: the peak resident memory of a stretch of work, leaving the process's own
high-water mark (what getrusage and /usr/bin/time report) as it is."""

from __future__ import annotations

import resource
import time

import pytest

from spadework import rss


def _touch(mib: int) -> bytearray:
    block = bytearray(mib * 1024 * 1024)  # zeroed: not resident until written
    block[::4096] = b"\x01" * len(block[::4096])  # one write a page
    return block


@pytest.fixture(autouse=True)
def linux_proc():
    if rss.resident_mib() is None or rss.high_water_mib() is None:
        pytest.skip("no /proc/self on this system")


def test_a_stretch_that_sets_a_new_high_reports_the_kernels_exact_figure():
    with rss.PeakMeter(interval=10.0) as meter:  # no sample taken: the high-water mark speaks
        block = _touch(rss.high_water_mib() - rss.resident_mib() + 256)
        del block
    assert meter.peak_mib == rss.high_water_mib()
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024 >= meter.peak_mib - 1


def test_a_stretch_below_the_high_reports_its_own_sampled_peak():
    with rss.PeakMeter():
        _touch(rss.high_water_mib() - rss.resident_mib() + 128)  # the process's high, earlier
    high = rss.high_water_mib()
    with rss.PeakMeter(interval=0.01) as meter:
        before = rss.resident_mib()
        block = _touch(64)
        time.sleep(0.2)  # the sampler reads the stretch's own peak
        del block
    assert rss.high_water_mib() == high  # nothing reset: the process's figure stays whole
    assert before + 48 <= meter.peak_mib < high
