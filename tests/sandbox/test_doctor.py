"""`spadework doctor` smoke test, through a subprocess like a user would run it."""

from __future__ import annotations

import subprocess
import sys

from spadework.sandbox.harden import LAYERS


def test_doctor_prints_every_layer():
    proc = subprocess.run([sys.executable, "-m", "spadework.cli", "doctor"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    for name in LAYERS:
        line = next(x for x in lines if x.startswith(name + " "))
        assert (" active " in line or " INACTIVE " in line) and len(line.split()) > 3
    assert any(x.startswith("runtime") for x in lines)
