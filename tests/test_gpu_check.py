"""scripts/gpu_check.sh on the CPU with tiny sizes: the same code paths the GPU run takes (random
weights on the default model's architecture, HFPolicy, Learner, weight sync, one smoke iteration
of the loop), through the shell script, as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu_check.sh"


def _run(*args: str, timeout: float = 170) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"}
    env.pop("OUT", None)
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          env=env, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def staged(tmp_path_factory) -> Path:
    """The default model's small files, staged as for a GPU machine (pulled here if missing)."""
    from spadework.policy.registry import DEFAULT_MODEL, pull

    pull(DEFAULT_MODEL)
    into = tmp_path_factory.mktemp("gpu-check")
    done = _run("--stage", "--stage-dir", str(into), timeout=60)
    assert done.returncode == 0, done.stderr
    return into


def test_stage_copies_the_small_files_and_no_weights(staged):
    files = {p.name for p in (staged / "model").iterdir()}
    assert {"config.json", "tokenizer.json", "tokenizer_config.json"} <= files
    assert not [f for f in files if f.endswith((".safetensors", ".bin", ".gguf"))]
    size = sum(p.stat().st_size for p in staged.rglob("*") if p.is_file())
    assert size < 16 * 2**20  # well inside what a GPU machine carries (64 MiB)
    assert json.loads((staged / "staged.json").read_text())["pyseccomp"] == "staged"
    assert (staged / "site" / "pyseccomp.py").is_file()


@pytest.mark.slow
def test_quick_cpu_check_prints_the_figures(staged):
    done = _run("--device", "cpu", "--quick", "--budget-s", "150", "--model-dir",
                str(staged / "model"))
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    assert {"environment", "model", "generation", "learner", "smoke", "vllm", "summary",
            "warnings"} <= set(out)
    assert out["model"]["weights"].startswith("random") and out["model"]["layers"] == 2
    s = out["summary"]
    assert s["generation_tokens_per_s"] > 0 and s["learner_tokens_per_s"] > 0
    # fp32, first step on policy: the learner scores the sampled tokens as the sampler did
    assert abs(s["sampler_to_learner_ratio"] - 1) < 1e-3, out["learner"]
    assert s["sync_seconds"] is not None and out["learner"]["sync"] == "InProcessSync"
    assert out["learner"]["weights_moved"]
    smoke = out["smoke"]
    if "skipped" in smoke:  # a machine without the sandbox's required layers says which
        assert "sandbox" in smoke["skipped"] and "sandbox" in smoke
    else:
        assert smoke["episodes"] > 0 and sum(smoke["statuses"].values()) == smoke["episodes"]
        assert smoke["sync"] == "InProcessSync"
        assert "note" in smoke["train"] or "importance_ratio" in smoke["train"]
    assert "skipped" in out["vllm"] or out["vllm"]["tokens_per_s"] > 0
    assert out["warnings"] == [] and "Warning" not in done.stderr
    assert out["seconds"] < 150


def test_cuda_without_a_gpu_says_what_to_do(staged):
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    done = _run("--device", "cuda", "--quick", "--model-dir", str(staged / "model"), timeout=60)
    assert done.returncode != 0 and "--device cpu" in done.stderr
    assert done.stdout == ""
