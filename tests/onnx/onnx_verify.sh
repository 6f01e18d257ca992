#!/usr/bin/env bash
# An ONNX model planned (with --fix) and trained: the distributed run of the
# generated CPU+MPI program matches the single-rank run step by step
# (autoddl verify). Usage: onnx_verify.sh <autoddl> <protoc> <onnx include
# dir> <work dir> <model stem> <ranks> <fix> [--seq T]; VERIFY_EXPECT: see below
set -euo pipefail
autoddl=$1 protoc=$2 inc=$3 work=$4 stem=$5 ranks=$6 fix=$7
shift 7
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"
"$protoc" --encode=onnx.ModelProto -I"$inc" onnx/onnx.proto <"$here/models/$stem.txtpb" >"$work/$stem.onnx"
"$autoddl" plan "$work/$stem.onnx" --cluster dgx-a100-hdr --gpus "$ranks" --global-batch 8 \
  --fix "$fix" -o "$work/plan.json" "$@" >/dev/null
"$autoddl" verify "$work/plan.json" --model "$work/$stem.onnx" --keep "$work/run" | tee "$work/verify.out"
# VERIFY_EXPECT: a line verify must print (e.g. how many tensors it compared).
if [ -n "${VERIFY_EXPECT:-}" ] && ! grep -qF "$VERIFY_EXPECT" "$work/verify.out"; then
  echo "FAIL: verify did not print: $VERIFY_EXPECT"
  exit 1
fi
