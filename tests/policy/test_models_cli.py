"""`spadework models` and `spadework generate`, through a subprocess on a toy budget."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _run(*args: str, home: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", **({"SPADEWORK_HOME": home} if home else {})}
    return subprocess.run([sys.executable, "-m", "spadework.cli", *args], capture_output=True,
                          text=True, env=env, timeout=240)


def test_models_list_shows_licences(default_model_dir):
    r = _run("models", "list")
    assert r.returncode == 0, r.stderr
    assert "* smollm2-135m-instruct" in r.stdout and "pulled" in r.stdout
    assert r.stdout.count("licence: Apache-2.0") == 3 and "none stated" not in r.stdout


def test_models_pull_is_idempotent_and_refuses_unknown(default_model_dir, tmp_path):
    r = _run("models", "pull", "smollm2-135m-instruct")
    assert r.returncode == 0 and str(default_model_dir) in r.stdout
    r = _run("models", "pull", "llama-9000")
    assert r.returncode == 1 and "known models: smollm2-135m-instruct" in r.stderr


def test_generate_prints_a_completion_and_its_speed(default_model_dir):
    r = _run("generate", "What is the capital of France?", "--max-tokens", "8")
    assert r.returncode == 0, r.stderr
    assert "Paris" in r.stdout
    assert "tokens/s" in r.stderr


def test_generate_with_the_llamacpp_backend_runs_n_completions_at_once(default_model_dir):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is installed by `make setup`")
    r = _run("generate", "Name a colour.", "--backend", "llamacpp", "--n", "3",
             "--temperature", "1", "--max-tokens", "8", "--threads", "1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("--- completion") == 3
    assert "llamacpp: 3 completion(s)" in r.stderr and "tokens/s aggregate" in r.stderr
    assert r.stderr.count("\n") == 1  # nothing but our figure: no llama.cpp log leaks


def test_generate_refuses_an_unknown_backend(default_model_dir):
    r = _run("generate", "hi", "--backend", "vllm-please")
    assert r.returncode == 1 and "unknown backend 'vllm-please'; choose one of hf, llamacpp" in r.stderr
