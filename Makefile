# `make run` and `make test` are the README's two commands; both set up .venv first (idempotent).
export OMP_NUM_THREADS ?= 1
export PYTHONHASHSEED ?= 0

.PHONY: setup run test test-slow bench

setup:
	@bash scripts/setup.sh

run: setup
	.venv/bin/spadework run

test: setup
	.venv/bin/python -m pytest -q

test-slow: setup
	.venv/bin/python -m pytest -q -m slow

bench: setup
	@for b in benchmarks/*.py; do echo "== $$b"; .venv/bin/python $$b; done
