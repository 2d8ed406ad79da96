# `make run` and `make test` are the README's two commands; both set up .venv first (idempotent).
export OMP_NUM_THREADS ?= 1
export PYTHONHASHSEED ?= 0

.PHONY: setup run test test-slow test-interop bench

setup:
	@bash scripts/setup.sh

# The main job: the cpu-qwen preset (a frozen Qwen2.5-Coder-1.5B designer, a 0.5B agent trained
# with LoRA, the level controller), about 50 minutes on two cores. Run again to resume it.
# `spadework run --preset cpu` is the quick one with the 135M default model.
RUN_DIR ?= runs/main
run: setup
	.venv/bin/spadework models pull qwen2.5-coder-0.5b-instruct >/dev/null
	.venv/bin/spadework models pull qwen2.5-coder-1.5b-instruct >/dev/null
	.venv/bin/spadework run --preset cpu-qwen --run-dir $(RUN_DIR) $(if $(wildcard $(RUN_DIR)/archive.sqlite),--resume)

test: setup
	.venv/bin/python -m pytest -q

test-slow: setup
	.venv/bin/python -m pytest -q -m slow

# The MCP, OpenEnv, verifiers and Harbor integrations against the real packages, in their own
# venvs (.venv-interop; .venv-harbor on Python 3.12): about 3 minutes to set up the first time,
# 1.5 to run. The verifiers test samples from `spadework serve` in .venv (run `make setup` first).
test-interop:
	@bash scripts/setup-interop.sh
	.venv-interop/bin/python -m pytest -q tests/test_integrations.py spadework/integrations

bench: setup
	@for b in benchmarks/*.py; do echo "== $$b"; .venv/bin/python $$b; done
