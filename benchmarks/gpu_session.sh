#!/usr/bin/env bash
# The GPU measurements of issue 19, in phases that each fit one 10-minute call of a lent GPU machine (where nothing
# can be installed: pytest comes from the wheels in .whl/, carried with the checkout). Every phase writes what it
# measured under OUT (default $OUT, else ./gpu-out) as it goes, so a phase cut off keeps what it finished; copy the
# files into results/ (or benchmarks/) and commit them. Run from the repository root:
#
#   bash benchmarks/gpu_session.sh check     # GPU tests -> gpu-check.json; MLP step costs (compile, CUDA graphs)
#   bash benchmarks/gpu_session.sh steps     # CIFAR CNN and ResNet-18 step costs -> steps-<arch>-cuda.json
#   bash benchmarks/gpu_session.sh grids     # Permuted MNIST and CIFAR-100 grids with --compile on (variant files)
#   bash benchmarks/gpu_session.sh profile   # where a CUB run's time goes: operators by GPU time, eager and compiled
#   bash benchmarks/gpu_session.sh cub       # the CUB grid (one seed of five), compiled
#   bash benchmarks/gpu_session.sh cub-tf32  # the same grid eager with --precision tf32 (other numbers: an option)
#
# On the lent machine of this project's sessions: the device tool's run with carry [".whl"] and the command
# `OUT=$OUT bash benchmarks/gpu_session.sh PHASE`; .whl/ holds pytest and its dependencies as wheels (made where
# the package index can be reached: `pip download pytest -d .whl`).
#
# The figures decide compiled.CUDA_COSTS (from steps-*.json: compile_s "filled cache", step_ms saving) and whether
# the compiled grid files replace results/bench-<suite>-cuda.json (when faster and the GPU tests pass).
set -u
PHASE=${1:?"usage: bash benchmarks/gpu_session.sh check|steps|grids|profile|cub|cub-tf32"}
OUT=${OUT:-${2:-gpu-out}}
mkdir -p "$OUT"
WHL=$(ls "$PWD"/.whl/*.whl 2>/dev/null | tr '\n' ':')
export PYTHONPATH="$PWD:${WHL}${PYTHONPATH:-}"
export METACL_LITE_PROGRESS=0
PY=${PY:-python3}
log() { echo "=== $* ($(date -u +%H:%M:%S))" | tee -a "$OUT/session.log"; }
run() { log "$*"; "$@" 2>&1 | tee -a "$OUT/session.log"; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/nvidia-smi.csv" 2>&1
case "$PHASE" in
  check)
    run $PY data_scripts/gpu_check.py --out "$OUT/gpu-check.json"
    run $PY benchmarks/speed.py steps mlp --device cuda --json "$OUT/steps-mlp-cuda.json"
    ;;
  steps)
    run $PY benchmarks/speed.py steps cifar_cnn --device cuda --json "$OUT/steps-cifar_cnn-cuda.json"
    run $PY benchmarks/speed.py steps resnet18 --device cuda --repeats 5 --json "$OUT/steps-resnet18-cuda.json"
    ;;
  grids)
    run $PY -m metacl_lite bench --suite pmnist --device cuda --compile on --out "$OUT/bench-pmnist-cuda-compile-on.json"
    run $PY -m metacl_lite bench --suite cifar100 --device cuda --compile on --measured-seeds 1 \
        --out "$OUT/bench-cifar100-cuda-compile-on.json"
    ;;
  profile)
    for m in finetune metacl; do
      run $PY benchmarks/speed.py profile --suite cub --method $m --device cuda --json "$OUT/profile-cub-$m-cuda.txt"
    done
    run $PY benchmarks/speed.py profile --suite cub --method metacl --device cuda --compile on \
        --json "$OUT/profile-cub-metacl-cuda-compile-on.txt"
    ;;
  cub)
    run $PY -m metacl_lite bench --suite cub --device cuda --compile on --measured-seeds 1 \
        --out "$OUT/bench-cub-cuda-compile-on.json"
    ;;
  cub-tf32)
    run $PY -m metacl_lite bench --suite cub --device cuda --precision tf32 --measured-seeds 1 \
        --out "$OUT/bench-cub-cuda-tf32.json"
    ;;
  *) echo "unknown phase $PHASE: check, steps, grids, profile, cub or cub-tf32" >&2; exit 2 ;;
esac
log "done $PHASE"
