#!/usr/bin/env bash
# ONNX exports on the CUDA backend where there is no GPU (issue 45 items 1-3): codegen --backend
# cuda accepts an unfused export (its attention, rotary embeddings, norms and activations left as
# ONNX primitives: kernels/Primitive.h), MLP classifiers (cross_entropy, squared_error, a
# train-mode Dropout) and CNNs (conv2d, pool2d: kernels/Conv.h), also under tp x pp x dp; each
# generated train.cpp compiles against the runtime headers (bf16 and --fp32, -Werror), and the
# project's kernels/Primitive.cu and Conv.cu compile with nvcc in both precisions. ~25 s of CPU,
# no GPU; exits 77 without the CUDA headers, nvcc or MPI.
# Usage: cuda_compiles.sh AUTODDL EXPORTS_DIR WORK_DIR
set -euo pipefail
autoddl=$1 dir=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../e2e/cuda_syntax.sh"
require_cuda nvcc
rm -rf "$work" && mkdir -p "$work"
unfused=sbp-fuse-attention,sbp-fuse-rotary,sbp-fuse-norms,sbp-fuse-activations
cases=(
  # name model skip gpus fix extra-plan-args...
  "gpt-unfused tiny-gpt.onnx $unfused 1 tp=1 --seq 16"
  "llama-unfused tiny-llama.onnx $unfused 1 tp=1 --seq 16"
  "gpt-unfused-tp2-pp2 tiny-gpt.onnx $unfused 4 tp=2,pp=2,dp=1,microbatch=2,schedule=1f1b --seq 16"
  "mlp-ce static-mlp-ts.onnx - 1 tp=1"
  "mlp-se tiny-mlp.onnx - 1 tp=1 --loss squared_error"
  # Megatron's linears and the vocab-parallel loss of a classifier (its accuracy gathered).
  "mlp-ce-tp2-dp2 tiny-mlp.onnx - 4 tp=2,pp=1,dp=2"
  "mlp-dropout train-mlp-ts.onnx - 1 tp=1"
  # CNNs: conv2d and pool2d (kernels/Conv.h), dynamo's and TorchScript's exports, dp=2.
  "cnn static-cnn-dynamo.onnx - 1 tp=1"
  "vgg-dp2 tiny-vgg.onnx - 2 tp=1,pp=1,dp=2"
)
for c in "${cases[@]}"; do
  read -r name model skip gpus fix extra <<<"$c"
  [ "$skip" = - ] && skip=
  w=$work/$name
  # shellcheck disable=SC2086 # extra: plan flags
  AUTODDL_FUSE_SKIP=$skip "$autoddl" plan "$dir/$model" --cluster dgx-h100-ndr --gpus "$gpus" \
    --global-batch 8 --fix "$fix" $extra --no-why -o "$w.json" >/dev/null
  AUTODDL_FUSE_SKIP=$skip "$autoddl" codegen "$w.json" --backend cuda -o "$w" >/dev/null
  n=$(grep -c "autoddl::rt::primitive_forward" "$w/train.cpp" || true)
  case $name in
  *-unfused*) [ "$n" -gt 0 ] || { echo "FAIL: $name runs no primitive on cuda"; exit 1; } ;;
  esac
  compile_train_cuda "$w"
  echo "ok: $name: cuda train.cpp compiles (bf16, fp32), $n primitives"
done
# The primitive and convolution kernels as a project carries them, both precisions.
rt=$work/gpt-unfused/runtime
for k in Primitive Conv; do
  for def in "" "-DAUTODDL_FP32=1"; do
    "$cuda/bin/nvcc" -std=c++17 $def --expt-relaxed-constexpr -arch=sm_90 -I "$rt" \
      -Xcompiler=-Wall,-Wextra,-Werror,-Wno-unused-parameter \
      -c "$rt/backends/cuda/kernels/$k.cu" -o "$work/$k$def.o"
  done
  echo "ok: kernels/$k.cu compiles (bf16, fp32)"
done
echo "cuda_compiles: all passed"
