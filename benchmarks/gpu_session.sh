#!/usr/bin/env bash
# The GPU measurements of issue 19, in phases that each aim to fit one 10-minute call of a lent GPU machine (a bare
# machine each time: the compile cache starts empty). Run from the repository root:
#
#   bash benchmarks/gpu_session.sh check         # the GPU tests -> results/gpu-check.json; MLP step costs
#   bash benchmarks/gpu_session.sh steps-cnn     # CIFAR CNN step costs -> results/compile-costs-cifar_cnn-cuda.json
#   bash benchmarks/gpu_session.sh steps-resnet  # ResNet-18 step costs -> results/compile-costs-resnet18-cuda.json
#   bash benchmarks/gpu_session.sh grids         # Permuted MNIST and CIFAR-100 grids with --compile on
#   bash benchmarks/gpu_session.sh profile       # where a CUB run's time goes: operators by GPU time
#   bash benchmarks/gpu_session.sh cub           # the CUB grid (one seed of five), compiled
#   bash benchmarks/gpu_session.sh cub-tf32      # the same grid eager with --precision tf32 (other numbers)
#   bash benchmarks/gpu_session.sh cub-mps       # the CUB grid eager in float32 under NVIDIA MPS (the same numbers)
#   bash benchmarks/gpu_session.sh memory        # the memory family's Permuted MNIST grid (M = 1), each method beside
#                                                # the one it adds the memory to -> results/bench-pmnist-cuda-memory-M1.json
#
# Every file is written in results/ of the checkout (so the command it records is the one that regenerates it there)
# and copied to OUT (default $OUT, else ./gpu-out) every 10 s and at the end, so a phase cut off at its time limit
# still brings back what it had written: commit those files into results/ as they are. The compiled and TF32 grid
# files are variants beside results/bench-<suite>-cuda.json; they replace it only by a decision (faster, GPU tests
# passing). results/compile-costs-*-cuda.json give compiled.CUDA_COSTS (compile_s "filled cache", step_ms saving).
#
# A session's device time (30 min, each cold start a few minutes of it) holds about three of these phases. In order
# of what they settle: `check` first (whether the GPU code written since the last check -- compiled steps, CUDA graphs
# on all three networks, ResNet-18's included, TF32, no GPU->CPU wait per step -- is right: the README lists its GPU
# tests as not yet run on a GPU until then), then `cub-mps` (CUB's 30-min grid target, missed eager: without MPS the eight workers' kernels take turns on the card,
# each too small to fill it; under MPS they run side by side, with the same numbers), then `cub-tf32` and `cub`, then
# `steps-resnet`/`steps-cnn` (compiled.CUDA_COSTS, without which --compile auto stays eager on a GPU), then `grids`
# and `profile`. Every bench file now records each unit's peak GPU memory (BenchmarkSpec.gpu_unit_gb's estimates
# can then be replaced by measurements) and whether MPS ran.
#
# On this project's lent machine (nothing installable; pytest may be missing): the device tool's run with carry
# [".whl"] and the command `OUT=$OUT bash benchmarks/gpu_session.sh PHASE`; .whl/ holds pytest and its dependencies
# as wheels, made where the package index can be reached (`pip download pytest -d .whl`).
set -u -o pipefail
PHASE=${1:?"usage: bash benchmarks/gpu_session.sh check|steps-cnn|steps-resnet|grids|profile|cub|cub-tf32|cub-mps|memory"}
OUT=${OUT:-${2:-gpu-out}}
mkdir -p "$OUT" results
if ! python3 -c "import pytest" 2>/dev/null; then
  WHL=$(ls "$PWD"/.whl/*.whl 2>/dev/null | tr '\n' ':')
  export PYTHONPATH="${WHL}${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}" METACL_LITE_PROGRESS=0 PYTHONUNBUFFERED=1
PY=${PY:-python3}
log() { echo "=== $* ($(date -u +%H:%M:%S))" | tee -a "$OUT/session.log"; }
run() { log "$*"; "$@" 2>&1 | tee -a "$OUT/session.log" || log "FAILED (exit $?): $*"; }
mirror() { cp -f results/gpu-check.json results/compile-costs-*-cuda.json results/bench-*-cuda*.json \
             results/profile-*-cuda*.txt "$OUT"/ 2>/dev/null; true; }
( while true; do mirror; sleep 10; done ) &
MIRROR=$!
trap 'mirror; kill $MIRROR 2>/dev/null' EXIT

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/nvidia-smi.csv" 2>&1
case "$PHASE" in
  check)
    run $PY -m metacl_lite.tools gpu-check
    run $PY benchmarks/speed.py steps mlp --device cuda --json results/compile-costs-mlp-cuda.json
    ;;
  steps-cnn)
    run $PY benchmarks/speed.py steps cifar_cnn --device cuda --json results/compile-costs-cifar_cnn-cuda.json
    ;;
  steps-resnet)
    run $PY benchmarks/speed.py steps resnet18 --device cuda --repeats 5 \
        --json results/compile-costs-resnet18-cuda.json
    ;;
  grids)
    run $PY -m metacl_lite.tools bench --suite pmnist --device cuda --compile on \
        --out results/bench-pmnist-cuda-compile-on.json
    run $PY -m metacl_lite.tools bench --suite cifar100 --device cuda --compile on --measured-seeds 1 \
        --out results/bench-cifar100-cuda-compile-on.json
    ;;
  profile)
    for m in finetune metacl; do
      run $PY benchmarks/speed.py profile --suite cub --method $m --device cuda --json results/profile-cub-$m-cuda.txt
    done
    run $PY benchmarks/speed.py profile --suite cub --method metacl --device cuda --precision tf32 \
        --json results/profile-cub-metacl-cuda-tf32.txt
    ;;
  memory)
    # issue 44, point 6: one more gradient per outer step; the bench adds each memory method's base method (MetaCL-
    # lambda for the two-reference ones) and prints the ratio of their mean run-unit times with the 1.5x target
    run $PY -m metacl_lite.tools bench --suite pmnist --device cuda \
        --methods "$($PY -m metacl_lite.vocab memory-methods)" --out results/bench-pmnist-cuda-memory-M1.json
    ;;
  cub)
    run $PY -m metacl_lite.tools bench --suite cub --device cuda --compile on --measured-seeds 1 \
        --out results/bench-cub-cuda-compile-on.json
    ;;
  cub-tf32)
    run $PY -m metacl_lite.tools bench --suite cub --device cuda --precision tf32 --measured-seeds 1 \
        --out results/bench-cub-cuda-tf32.json
    ;;
  cub-mps)
    # NVIDIA's Multi-Process Service: started here as root if its control program exists, stopped at the end. First
    # the grid-sharing GPU test under it (workers' numbers equal one process's), then the CUB grid (eager, float32).
    if ! command -v nvidia-cuda-mps-control >/dev/null; then
      log "no nvidia-cuda-mps-control on this machine: MPS cannot be tried"; exit 1
    fi
    nvidia-cuda-mps-control -d 2>&1 | tee -a "$OUT/session.log"
    sleep 2
    if ! $PY -c "import sys; from metacl_lite.accel.device import mps_active; sys.exit(0 if mps_active() else 1)"; then
      log "the MPS daemon did not start: nothing measured"; exit 1
    fi
    trap 'echo quit | nvidia-cuda-mps-control; mirror; kill $MIRROR 2>/dev/null' EXIT
    run $PY -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "grid_shares_the_gpu and off"
    run $PY -m metacl_lite.tools bench --suite cub --device cuda --measured-seeds 1 --out results/bench-cub-cuda-mps.json
    ;;
  *) echo "unknown phase $PHASE: check, steps-cnn, steps-resnet, grids, profile, cub, cub-tf32, cub-mps or memory" >&2; exit 2 ;;
esac
log "done $PHASE"
