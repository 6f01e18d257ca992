#!/usr/bin/env bash
# Sourced by the e2e scripts that compile generated CUDA programs where there is no GPU (CI).
#   require_cuda [tool|header...]: exits 77 (skipped) unless the CUDA runtime and NCCL headers, MPI's
#     headers and each named header (in $cuda_inc) or tool (in $cuda/bin) are there.
#   compile_train_cuda DIR: the project's train.cpp against its runtime headers with the host
#     compiler, bf16 and --fp32, -Wall -Wextra -Werror.
#   plan_cuda_case AUTODDL DIR MODEL GPUS FIX MEGA [plan flags...]: DIR/plan.json of MODEL on GPUS of
#     h200x2-nvlink with FIX pinned (token models: global batch 8, sequence 16; graph models: their
#     whole graph), Megatron's level MEGA applied (tests/lit/codegen/megatron.py).
#   codegen_cuda AUTODDL DIR MODEL: DIR/p, the CUDA project of DIR/plan.json (--model MODEL where
#     MODEL is a file).
cuda=${CUDA_HOME:-/usr/local/cuda}
cuda_inc=$cuda/include
mpi_inc=$(mpicc --showme:incdirs 2>/dev/null | cut -d' ' -f1 || true)

require_cuda() {
  local missing=()
  for f in cuda_runtime.h nccl.h "$@"; do
    case "$f" in
    *.h) [ -f "$cuda_inc/$f" ] || missing+=("$cuda_inc/$f") ;;
    *) [ -x "$cuda/bin/$f" ] || missing+=("$cuda/bin/$f") ;;
    esac
  done
  [ -n "$mpi_inc" ] || missing+=("MPI (mpicc)")
  if [ ${#missing[@]} -gt 0 ]; then
    echo "skipped: no ${missing[*]}"
    exit 77
  fi
}

compile_train_cuda() {
  local p=$1
  for def in "" "-DAUTODDL_FP32=1"; do
    c++ -std=c++17 -fsyntax-only -Wall -Wextra -Werror -Wno-unused-parameter $def \
      -DOMPI_SKIP_MPICXX=1 -I "$p/runtime" -I "$cuda_inc" -I "$mpi_inc" "$p/train.cpp"
  done
}

plan_cuda_case() {
  local autoddl=$1 w=$2 model=$3 gpus=$4 fix=$5 mega=$6
  shift 6
  local batchArgs=(--global-batch 8 --seq 16)
  case "$(basename "$model")" in gcn* | gat* | transformer_conv* | sage*) batchArgs=(--global-batch 1) ;; esac
  mkdir -p "$w"
  "$autoddl" plan "$model" --cluster h200x2-nvlink --gpus "$gpus" "${batchArgs[@]}" \
    --fix "$fix" "$@" --no-why -o "$w/plan.json" >/dev/null
  python3 "$(dirname "${BASH_SOURCE[0]}")/../lit/codegen/megatron.py" "$w/plan.json" --level "$mega"
}

codegen_cuda() {
  local autoddl=$1 w=$2 model=$3 modelArg=()
  [ -f "$model" ] && modelArg=(--model "$model")
  "$autoddl" codegen "$w/plan.json" --backend cuda -o "$w/p" "${modelArg[@]}" >/dev/null
}
