#!/usr/bin/env bash
# Idempotent: .venv-interop, spadework's core (no torch, no models) with the [mcp] and [openenv]
# extras, for `make test-interop`. Apart from .venv because OpenEnv's gradio cannot share its pins.
# Re-runs only when pyproject.toml or constraints-interop.txt changed since the last setup.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
stamp=.venv-interop/.setup-stamp
want=$(cat pyproject.toml constraints-interop.txt | sha256sum | cut -d' ' -f1)
if ! { [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; }; then
  [ -x .venv-interop/bin/python ] || "$PY" -m venv .venv-interop
  .venv-interop/bin/python -m pip install -q -c constraints-interop.txt -e ".[mcp,openenv]" \
    pytest pytest-timeout
  echo "$want" > "$stamp"
  echo "setup-interop: .venv-interop ready ($(.venv-interop/bin/python -c 'import importlib.metadata as m; print(", ".join(f"{p} {m.version(p)}" for p in ("mcp", "openenv-core")))'))"
fi
