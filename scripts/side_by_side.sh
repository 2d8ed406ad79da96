#!/usr/bin/env bash
# The mechanism beside its two comparisons, with held-out evaluation before and after each:
#   1. the cpu-qwen preset (designer with feedback, level controller),
#   2. configs/cpu-qwen-fixed-pool.toml (the starter pool under the same controller, no designer),
#   3. configs/cpu-qwen-no-feedback.toml (the designer without feedback or mutations),
# then `spadework runs compare` of the three. Each run has the same budget (the preset's
# iterations); the base model is evaluated once and that evaluation is every run's "before".
#
#   bash scripts/side_by_side.sh [ROOT] [SUITES...]     (default: runs/side-by-side library-heldout)
#
# Each run takes about 50 minutes on two cores (eight iterations), each library-heldout
# evaluation under 3 minutes, rg-default about half an hour (add it to SUITES to measure it).
# Progress goes to the terminal; an interrupted script can be started again: finished runs are
# resumed (nothing is redone), finished evaluations are kept.
set -euo pipefail
cd "$(dirname "$0")/.."
root=${1:-runs/side-by-side}
shift || true
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(library-heldout)
sw=.venv/bin/spadework
agent=qwen2.5-coder-0.5b-instruct
mkdir -p "$root"

run() {  # name, then the run's arguments
  local dir="$root/$1"; shift
  if [ -f "$dir/archive.sqlite" ]; then
    "$sw" run "$@" --run-dir "$dir" --resume
  else
    "$sw" run "$@" --run-dir "$dir"
  fi
}

evaluate() {  # out folder, then how to load the model
  local out=$1; shift
  for suite in "${suites[@]}"; do
    [ -f "$out/$suite/summary.json" ] || "$sw" eval --suite "$suite" "$@" --backend llamacpp --out "$out"
  done
}

evaluate "$root/eval-base" --model "$agent"
run mechanism --preset cpu-qwen
run fixed-pool --config configs/cpu-qwen-fixed-pool.toml
run no-feedback --config configs/cpu-qwen-no-feedback.toml
for name in mechanism fixed-pool no-feedback; do
  mkdir -p "$root/$name/eval"
  [ -d "$root/$name/eval/before" ] || cp -r "$root/eval-base" "$root/$name/eval/before"
  evaluate "$root/$name/eval/after" --checkpoint "$root/$name"
done
"$sw" runs compare "$root/mechanism" "$root/fixed-pool" "$root/no-feedback"
