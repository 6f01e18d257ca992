#!/usr/bin/env bash
# One CUDA case of the e2e matrix: plan MODEL for RANKS GPUs with the knobs pinned by FIX, then
# `autoddl verify --backend cuda` runs the plan on its GPUs and the model on one GPU and compares
# every step's loss and the final parameters (bf16: 2e-2 / 5e-2; with FP32=1 the --fp32 build,
# 1e-4 / 1e-3). Token models plan global batch 8, sequence 64; graph models (gcn*, gat*, sage*) train on
# their whole graph (global batch 1). Exits 77 (skipped) on a machine with fewer than RANKS GPUs.
# Usage: [FP32=1] [MEGATRON=1|2|3|batch|sequence] [GRAD_CLIP="C [FLAGS...]"] verify_cuda.sh AUTODDL WORKDIR MODEL RANKS FIX [STEPS]
set -euo pipefail
autoddl=$1 work=$2 model=$3 ranks=$4 fix=$5 steps=${6:-5}
. "$(dirname "$0")/gpu_lib.sh"
require_gpus "$ranks"
rm -rf "$work" && mkdir -p "$work"
batchArgs=(--global-batch 8 --seq 64)
case "$(basename "$model")" in gcn* | gat* | transformer_conv* | sage*) batchArgs=(--global-batch 1) ;; esac
"$autoddl" plan "$model" --cluster h200x2-nvlink --gpus "$ranks" "${batchArgs[@]}" \
  --fix "$fix" --no-why -o "$work/plan.json" >"$work/plan.txt"
# MEGATRON: 1-3, batch or sequence (tests/lit/codegen/megatron.py --level)
python3 "$(dirname "$0")/../lit/codegen/megatron.py" "$work/plan.json" --level "${MEGATRON:-0}"
fp32=()
[ "${FP32:-0}" = 1 ] && fp32=(--fp32)
modelArg=()
[ -f "$model" ] && modelArg=(--model "$model")
"$autoddl" verify "$work/plan.json" --backend cuda "${fp32[@]}" --steps "$steps" --keep "$work/run" \
  "${modelArg[@]}"
# GRAD_CLIP="C [FLAGS...]": verified again under --grad-clip C (grad_clip_check.sh), the norms and the
# clip's effect within the backend's bounds (FP32=1: verify's 1e-4).
if [ -n "${GRAD_CLIP:-}" ]; then
  NORM_TOL=${NORM_TOL:-1e-4} EFFECT=${EFFECT:-1e-3} "$(dirname "$0")/grad_clip_check.sh" \
    "$autoddl" "$work" "$steps" "$GRAD_CLIP" --backend cuda "${fp32[@]}" "${modelArg[@]}"
fi
