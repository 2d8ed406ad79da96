#!/usr/bin/env bash
# The prepared GPU check (scripts/gpu_check.py says what it measures): on one GPU, within a
# budget (8 minutes by default), generation and learner steps in bf16 with the transformers
# backend, one smoke iteration of the loop, and vLLM only where it is importable; one JSON object
# on stdout (and in $OUT/gpu_check.json when $OUT is set), progress on stderr.
#
# A GPU machine here has no network, carries at most 64 MiB of the working tree, and has torch
# and transformers but neither spadework installed nor the model's weights. So:
#
# 1. Here, where the default model is pulled, stage what the check needs (about 4 MiB):
#        scripts/gpu_check.sh --stage
#    copies the default model's small files (config, generation config, tokenizer, chat template;
#    never the weights) into .gpu-check/model/ and the pure-Python pyseccomp module (the sandbox
#    compiles its seccomp filter with it) into .gpu-check/site/. The check builds the model's
#    architecture from the config with random weights: a speed and correctness check, not a
#    quality one.
# 2. On the GPU machine, with .gpu-check carried beside the working tree:
#        scripts/gpu_check.sh [--device cuda|cpu] [--model-dir DIR] [--budget-s 480] [--quick]
#    runs the repository from source (PYTHONPATH, nothing is pip-installed from it). Pure-Python
#    wheels put in .gpu-check/wheels/ (e.g. `pip download pyseccomp --no-deps -d
#    .gpu-check/wheels`, in place of the staged module) are unpacked first into a temporary
#    folder on the PYTHONPATH (a wheel is a zip; no pip or network needed there). Without
#    .gpu-check/model the pulled default model's folder is used (how it runs on a CPU machine:
#    --device cpu).
#
# The sandbox needs libseccomp.so.2 on the machine as well; where it is missing the smoke
# iteration is reported as skipped, with the sandbox's reason, and the other parts still run.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${PYTHON:-}"
if [[ -z "$py" ]]; then
    if [[ -x "$root/.venv/bin/python" ]]; then py="$root/.venv/bin/python"; else py=python3; fi
fi

extra=""
if [[ -d "$root/.gpu-check/site" ]]; then extra="$root/.gpu-check/site"; fi
shopt -s nullglob
wheels=("$root"/.gpu-check/wheels/*.whl)
if (( ${#wheels[@]} )); then
    site="$(mktemp -d /tmp/gpu-check-site.XXXXXX)"
    trap 'rm -rf "$site"' EXIT
    "$py" -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]' \
        "$site" "${wheels[@]}"
    extra="$site${extra:+:$extra}"
fi

export PYTHONPATH="$root${extra:+:$extra}${PYTHONPATH:+:$PYTHONPATH}"
export TOKENIZERS_PARALLELISM="${TOKENIZERS_PARALLELISM:-false}"  # the sandbox forks
export PYTHONHASHSEED="${PYTHONHASHSEED:-0}"
"$py" "$root/scripts/gpu_check.py" "$@"
