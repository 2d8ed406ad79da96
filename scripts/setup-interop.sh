#!/usr/bin/env bash
# Idempotent: .venv-interop, spadework's core (no torch, no models) with the [mcp], [openenv] and
# [verifiers] extras, for `make test-interop` (apart from .venv, whose pins they cannot share:
# gradio wants pillow<13, verifiers openai<3); and .venv-harbor, Harbor itself, whose loader reads the exported tasks (Harbor needs
# Python >= 3.12: built when such an interpreter is found, else that one test skips and says so).
# Each re-runs only when its pins changed since its last setup.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
stamp=.venv-interop/.setup-stamp
want=$(cat pyproject.toml constraints-interop.txt | sha256sum | cut -d' ' -f1)
if ! { [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; }; then
  [ -x .venv-interop/bin/python ] || "$PY" -m venv .venv-interop
  .venv-interop/bin/python -m pip install -q -c constraints-interop.txt -e ".[mcp,openenv,verifiers]" \
    pytest pytest-timeout
  echo "$want" > "$stamp"
  echo "setup-interop: .venv-interop ready ($(.venv-interop/bin/python -c 'import importlib.metadata as m; print(", ".join(f"{p} {m.version(p)}" for p in ("mcp", "openenv-core", "verifiers")))'))"
fi

py312=""
for c in python3.12 python3.13 "${HOME}"/.pyenv/versions/3.1[23]*/bin/python3; do
  if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
    py312=$c; break
  fi
done
hstamp=.venv-harbor/.setup-stamp
hwant=$(sha256sum constraints-harbor.txt | cut -d' ' -f1)
if [ -n "$py312" ] && ! { [ -f "$hstamp" ] && [ "$(cat "$hstamp")" = "$hwant" ]; }; then
  [ -x .venv-harbor/bin/python ] || "$py312" -m venv .venv-harbor
  .venv-harbor/bin/python -m pip install -q -c constraints-harbor.txt "harbor==0.25.0"
  echo "$hwant" > "$hstamp"
  echo "setup-interop: .venv-harbor ready (harbor 0.25.0 on $("$py312" --version))"
elif [ -z "$py312" ]; then
  echo "setup-interop: no Python >= 3.12 here; Harbor's loader test will skip"
fi
