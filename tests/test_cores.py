"""spadework.cores: the cores free now, from /proc/stat less this process's own time, and the
run's stages setting their engines' threads from it when ``threads`` is unset."""

import multiprocessing
import os
import time
from types import SimpleNamespace

import pytest

from spadework import cores
from spadework.loop import _fit_threads, _with_threads

STAT = """cpu  900 0 300 5000 100 0 0 0 0 0
cpu0 500 0 100 2000 50 0 0 0 0 0
cpu1 400 0 200 3000 50 0 0 0 0 0
intr 12345
"""


def test_busy_seconds_reads_the_allowed_cpus_and_leaves_idle_and_iowait_out(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text(STAT)
    tick = cores._TICKS
    assert cores._busy_seconds([0], stat) == pytest.approx(600 / tick)
    assert cores._busy_seconds([0, 1], stat) == pytest.approx(1200 / tick)
    assert cores._busy_seconds([7], stat) is None  # no such cpu line
    assert cores._busy_seconds([0], tmp_path / "missing") is None


def test_where_proc_stat_cannot_be_read_every_core_is_free(tmp_path):
    assert cores.busy_elsewhere(0.01, tmp_path / "missing") is None
    assert cores.free_cores(0.01, tmp_path / "missing") == len(cores.allowed_cores())


def _spin(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="reads /proc/stat (Linux)")
def test_a_process_spinning_a_core_is_busy_elsewhere_and_this_ones_own_time_is_not():
    # this process's own work in the window is left out: a thread of ours spinning is not "others"
    import threading

    spinner = threading.Thread(target=_spin, args=(0.6,))
    spinner.start()
    mine = cores.busy_elsewhere(0.4)
    spinner.join()
    child = multiprocessing.get_context("spawn").Process(target=_spin, args=(2.0,))
    child.start()
    try:
        time.sleep(0.3)  # the child is running
        others = cores.busy_elsewhere(0.5)
    finally:
        child.join()
    # a child holding a core shows as most of one (whatever else the machine runs adds to it)
    assert others is not None and others >= 0.6
    assert mine is not None and mine < others
    assert cores.free_cores(0.01) >= 1


class _Engine:
    def __init__(self):
        self.threads = None

    def set_threads(self, n):
        self.threads = n


def test_a_stage_sets_its_engines_threads_to_the_free_cores_only_when_the_run_asks_for_auto(
        monkeypatch):
    monkeypatch.setattr("spadework.loop.free_cores", lambda: 1)
    engine = _Engine()
    assert _fit_threads(SimpleNamespace(cfg=SimpleNamespace(threads="auto")), engine) == 1
    assert engine.threads == 1
    for fixed in (2, None):  # a number, or the engine's own default: left alone
        engine = _Engine()
        assert _fit_threads(SimpleNamespace(cfg=SimpleNamespace(threads=fixed)), engine) is None
        assert engine.threads is None
    assert _fit_threads(SimpleNamespace(cfg=SimpleNamespace(threads="auto")), object()) is None
    assert _with_threads({"decode_steps": 3}, 1) == {"decode_steps": 3, "threads": 1}
    assert _with_threads(None, 1) is None and _with_threads({"rows": 2}, None) == {"rows": 2}


def test_threads_settings_take_a_number_auto_or_nothing_and_name_what_else_is_wrong():
    from spadework.config import override, preset
    from spadework.errors import ConfigError
    from spadework.settings.learner import TrainConfig

    cfg = preset("cpu-qwen")
    assert cfg.threads == "auto" and cfg.learner.threads == "auto" and cfg.engine_threads is None
    assert override(cfg, {"threads": 2}).engine_threads == 2
    for bad in ("all", 0, True):
        with pytest.raises(ConfigError, match="threads"):
            override(cfg, {"threads": bad})
        with pytest.raises(ConfigError, match="threads"):
            TrainConfig(threads=bad)
