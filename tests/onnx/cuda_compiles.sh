#!/usr/bin/env bash
# ONNX exports on the CUDA backend where there is no GPU (issue 45 items 1-3): codegen --backend
# cuda accepts an unfused export (its attention, rotary embeddings, norms and activations left as
# ONNX primitives: kernels/Primitive.h), MLP classifiers (cross_entropy, squared_error, a
# train-mode Dropout) and CNNs (conv2d, pool2d: kernels/Conv.h; resnet-mini's batch norms and
# padded pools: kernels/PrimitiveImage.cuh), also under tp x pp x dp; one
# generated train.cpp of each kind compiles against the runtime headers (bf16 and --fp32,
# -Werror), and the project's kernels/Primitive.cu, Conv.cu and ConvCudnn.cu compile with nvcc in both
# precisions. ~1 min on two cores, no GPU; exits 77 without the CUDA headers, nvcc or MPI.
# A primitive the CUDA kernels do not run (models/rank9.txtpb: a rank-9 Sin) is refused in one
# line naming the op, and generated for the CPU.
# Usage: cuda_compiles.sh AUTODDL EXPORTS_DIR WORK_DIR PROTOC ONNX_INCLUDE_DIR
set -euo pipefail
autoddl=$1 dir=$2 work=$3 protoc=$4 inc=$5
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../e2e/cuda_syntax.sh"
require_cuda nvcc
rm -rf "$work" && mkdir -p "$work"
unfused=sbp-fuse-attention,sbp-fuse-rotary,sbp-fuse-norms,sbp-fuse-activations
cases=(
  # name compile? model skip gpus fix extra-plan-args... (compile 0: generated only, which
  # keeps the test near a minute on CI's two cores)
  "gpt-unfused 1 tiny-gpt.onnx $unfused 1 tp=1 --seq 16"
  "llama-unfused 1 tiny-llama.onnx $unfused 1 tp=1 --seq 16"
  "gpt-unfused-tp2-pp2 0 tiny-gpt.onnx $unfused 4 tp=2,pp=2,dp=1,microbatch=2,schedule=1f1b --seq 16"
  "mlp-ce 1 static-mlp-ts.onnx - 1 tp=1"
  "mlp-se 0 tiny-mlp.onnx - 1 tp=1 --loss squared_error"
  # Megatron's linears and the vocab-parallel loss of a classifier (its accuracy gathered).
  "mlp-ce-tp2-dp2 1 tiny-mlp.onnx - 4 tp=2,pp=1,dp=2"
  "mlp-dropout 0 train-mlp-ts.onnx - 1 tp=1"
  # CNNs: conv2d and pool2d (kernels/Conv.h), dynamo's and TorchScript's exports, dp=2.
  "cnn 1 static-cnn-dynamo.onnx - 1 tp=1"
  "vgg-dp2 0 tiny-vgg.onnx - 2 tp=1,pp=1,dp=2"
)
for c in "${cases[@]}"; do
  read -r name compile model skip gpus fix extra <<<"$c"
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
  if [ "$compile" = 1 ]; then
    compile_train_cuda "$w"
    echo "ok: $name: cuda train.cpp compiles (bf16, fp32), $n primitives"
  else
    echo "ok: $name: cuda train.cpp generated, $n primitives"
  fi
done
# The primitive and convolution kernels as a project carries them, both precisions.
rt=$work/gpt-unfused/runtime
for k in Primitive Conv ConvCudnn; do
  for def in "" "-DAUTODDL_FP32=1"; do
    "$cuda/bin/nvcc" -std=c++17 $def --expt-relaxed-constexpr -arch=sm_90 -I "$rt" \
      -Xcompiler=-Wall,-Wextra,-Werror,-Wno-unused-parameter \
      -c "$rt/backends/cuda/kernels/$k.cu" -o "$work/$k$def.o"
  done
  echo "ok: kernels/$k.cu compiles (bf16, fp32)"
done
# A ResNet in miniature: BatchNormalization, a padded MaxPool and the global pool as
# primitives (kernels/PrimitiveImage.cuh) beside conv2d; under dp=2 x 2 micro-batches the three
# norms' forwards also write their moments, and update_buffers updates the running statistics
# (docs/checkpoints.md "Buffers").
"$protoc" --encode=onnx.ModelProto -I"$inc" onnx/onnx.proto <"$here/models/resnet-mini.txtpb" \
  >"$work/resnet-mini.onnx" 2>/dev/null
"$autoddl" plan "$work/resnet-mini.onnx" --cluster dgx-h100-ndr --gpus 2 --global-batch 8 \
  --fix tp=1,pp=1,dp=2,microbatch=2 --no-why -o "$work/resnet-mini.json" >/dev/null 2>&1
"$autoddl" codegen "$work/resnet-mini.json" --backend cuda -o "$work/resnet-mini" >/dev/null
n=$(grep -c "autoddl::rt::primitive_forward" "$work/resnet-mini/train.cpp" || true)
# Two norms run the ReLU after them in their passes (writing their moments too), the third
# (before the residual add) runs the add and its ReLU in its normalise pass, at the add's step
# (batchnorm_add_forward, its moments too): no norm alone, no add kernel.
m=$(grep -c "autoddl::rt::batchnorm_forward_moments" "$work/resnet-mini/train.cpp" || true)
r=$(grep -c "autoddl::rt::batchnorm_relu_forward(prim_.*primitive_buffer(" "$work/resnet-mini/train.cpp" || true)
a=$(grep -c "autoddl::rt::batchnorm_add_forward(prim_.*, a\.m\.data(), a\.r3\.data(), .*primitive_buffer(.*, true); }" "$work/resnet-mini/train.cpp" || true)
f=$(grep -c -e " add_relu_forward(" -e " add_forward(" "$work/resnet-mini/train.cpp" || true)
u=$(grep -c "update_running_stats(" "$work/resnet-mini/train.cpp" || true)
[ "$n/$m/$r/$a/$f/$u" = 2/0/2/1/0/3 ] ||
  { echo "FAIL: resnet-mini: $n primitives, $m norms alone with moments, $r norms with their ReLU, $a norms with the add and its ReLU, $f add kernels, $u updates on cuda, expected 2/0/2/1/0/3"; exit 1; }
# First writers store their input gradients (docs/codegen.md "Stored gradients"): the residual
# add the pool's (read last by the add; the fused last norm reads its gradient there, so the add
# writes no other), the second convolution its input's (the first norm's ReLU, its one reader);
# the first convolution adds to the pool's after the add.
s=$(grep -c " add_relu_backward(nullptr, a\.d_m\.data(), .*, false, false); }" "$work/resnet-mini/train.cpp" || true)
k=$(grep -c " conv2d_backward(a\.d_r2\.data(), .*, false); }" "$work/resnet-mini/train.cpp" || true)
o=$(grep -c " conv2d_backward(a\.d_m\.data(), .*/\*channelsLast=\*/true}); }" "$work/resnet-mini/train.cpp" || true)
[ "$s/$k/$o" = 1/1/1 ] ||
  { echo "FAIL: resnet-mini: $s/$k/$o stored add/stored convolution/adding convolution gradients, expected 1/1/1"; exit 1; }
grep -q "program.update_buffers = update_buffers;" "$work/resnet-mini/train.cpp" ||
  { echo "FAIL: resnet-mini: no update_buffers hook"; exit 1; }
# Channels-last (docs/onnx-lowering.md): its three norms, two pools and three convolutions
# (forward, backward) on NHWC tensors, the images drawn so (no transpose); AUTODDL_LAYOUT=nchw
# none.
c=$(grep -c "onnx_prim::channelsLastPrimitive(" "$work/resnet-mini/train.cpp" || true)
v=$(grep -c "/\*channelsLast=\*/true" "$work/resnet-mini/train.cpp" || true)
t=$(grep -c "transpose_forward(" "$work/resnet-mini/train.cpp" || true)
i=$(grep -c "s.images_channels_last = 3;" "$work/resnet-mini/train.cpp" || true)
[ "$c/$v/$t/$i" = 5/8/0/1 ] ||
  { echo "FAIL: resnet-mini: $c/$v/$t/$i channels-last primitives/convolution calls/transposes/drawn images, expected 5/8/0/1"; exit 1; }
AUTODDL_LAYOUT=nchw "$autoddl" codegen "$work/resnet-mini.json" --backend cuda -o "$work/resnet-mini-nchw" >/dev/null
! grep -q -e channelsLast -e transpose_forward -e images_channels_last "$work/resnet-mini-nchw/train.cpp" ||
  { echo "FAIL: resnet-mini: AUTODDL_LAYOUT=nchw still channels-last"; exit 1; }
compile_train_cuda "$work/resnet-mini"
echo "ok: resnet-mini: cuda train.cpp compiles (bf16, fp32), $((n + m)) primitives, $u running-statistics updates"
# The CUDA kernels' refusal (OnnxPrimitive.h primitiveCudaRefusal): one line, exit 1-123.
"$protoc" --encode=onnx.ModelProto -I"$inc" onnx/onnx.proto <"$here/models/rank9.txtpb" \
  >"$work/rank9.onnx" 2>/dev/null # as onnx_import.sh: protoc's own include path holds it
"$autoddl" plan "$work/rank9.onnx" --cluster dgx-h100-ndr --gpus 1 --global-batch 8 --no-why \
  -o "$work/rank9.json" >/dev/null
"$autoddl" codegen "$work/rank9.json" --backend cpu -o "$work/rank9-cpu" >/dev/null
rc=0
out=$("$autoddl" codegen "$work/rank9.json" --backend cuda -o "$work/rank9" 2>&1 >/dev/null) || rc=$?
if [ "$rc" -lt 1 ] || [ "$rc" -gt 123 ] || [ "$(printf '%s\n' "$out" | wc -l)" -ne 1 ] ||
  [[ "$out" != *"op /s (ONNX Sin, position 0): a rank above 8"* ]]; then
  echo "FAIL: rank9: exit $rc: $out"
  exit 1
fi
echo "ok: refused: $out"
echo "cuda_compiles: all passed"
