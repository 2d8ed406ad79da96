"""The chaos soak's short form (benchmarks/soak.py): a training smoke run killed, its sandbox
children killed, its disk filled and its latest checkpoint truncated, resumed after each (from the
checkpoint before the truncated one), ends with every iteration once, an intact archive, every
episode once, every checkpoint loadable, no traceback, and the same metrics as the undisturbed run
wherever no fault touched the iteration (up to the fallback, after which the learner is behind)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_a_short_soak_loses_nothing(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "soak.py"), "--iterations", "5", "--seed", "3",
         "--faults", "kill_run,kill_sandbox_child,kill_run,disk_full,truncated_checkpoint,kill_run",
         "--keep", str(tmp_path)], capture_output=True, text=True, timeout=1200, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    checks = out["checks"]
    assert checks["iterations_once"] and checks["integrity_check"] == "ok"
    assert checks["episodes_unique"] and checks["episodes"][0] == checks["episodes"][1]
    assert set(checks["checkpoints"].values()) == {"ok"}
    assert out["tracebacks"] == 0 and "traceback" not in json.dumps(out["outcomes"])
    table = json.dumps(out["attempts"])[-3000:]
    truncated = out["outcomes"].get("truncated_checkpoint")  # the one before used, or none
    assert truncated in ({"fell_back": 1}, {"refused_clearly": 1}), table  # and refused clearly
    assert len(checks["damaged_kept"]) == truncated.get("fell_back", 0)
    # an iteration differs from the undisturbed run only where a killed sandbox child failed a
    # check or an episode
    for changes in checks["iterations_differing"].values():
        assert any(k.startswith(("failed_plays", "validity_funnel", "statuses.env_error"))
                   for k in changes), changes
