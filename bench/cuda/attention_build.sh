#!/usr/bin/env bash
# Builds the attention check and benchmark without CMake or MLIR (the GPU machine has
# neither the autoddl tree's dependencies nor OpenBLAS): nvcc only, sm_90, the bf16 and the
# AUTODDL_FP32 variants of AttentionCheck, and attention_bench. The CPU reference's
# cblas_sgemm comes from tests/unit/cuda/AttentionRefBlas (plain loops).
# usage: bench/cuda/attention_build.sh BUILD_DIR   (run from the repository root)
set -euo pipefail
out=${1:?usage: attention_build.sh BUILD_DIR}
mkdir -p "$out"
nv=(nvcc -std=c++17 -O3 -arch=sm_90 -I. -Xcompiler=-Wall,-Wextra)
ref=(-Itests/unit/cuda/AttentionRefBlas)
pids=()
for mode in bf16 fp32; do
  def=(); [ "$mode" = fp32 ] && def=(-DAUTODDL_FP32)
  "${nv[@]}" "${def[@]}" -c backends/cuda/Runtime.cu -o "$out/Runtime_$mode.o" & pids+=($!)
  "${nv[@]}" "${def[@]}" -Xptxas -v -c backends/cuda/kernels/Attention.cu \
    -o "$out/Attention_$mode.o" 2>"$out/ptxas_$mode.txt" & pids+=($!)
  "${nv[@]}" "${def[@]}" "${ref[@]}" -x cu -c tests/unit/cuda/AttentionCheck.cpp \
    -o "$out/AttentionCheck_$mode.o" & pids+=($!)
done
"${nv[@]}" -c bench/cuda/attention_bench.cu -o "$out/attention_bench.o" & pids+=($!)
for p in "${pids[@]}"; do wait "$p"; done
for mode in bf16 fp32; do
  nvcc -arch=sm_90 "$out/AttentionCheck_$mode.o" "$out/Attention_$mode.o" \
    "$out/Runtime_$mode.o" -lcublasLt -o "$out/AttentionCheck_$mode"
done
nvcc -arch=sm_90 "$out/attention_bench.o" "$out/Attention_bf16.o" "$out/Runtime_bf16.o" \
  -lcublasLt -o "$out/attention_bench"
grep -E "registers|spill" "$out/ptxas_bf16.txt" | paste - - | grep -v "0 bytes spill stores" || true
# Tile alternatives (Attention.cu's knobs), checked and timed in the same run:
#   v1: D=128 forward 128 queries x 64 keys a block, Q from shared memory; backward 8 warps
#   v2: D=128 forward 128 queries x 32 keys a block, Q from shared memory; backward 8 warps
for v in "v1 1" "v2 2"; do
  set -- $v
  "${nv[@]}" -DAUTODDL_ATTENTION_D128_FWD=$2 -DAUTODDL_ATTENTION_BWD_WARPS=8 \
    -c backends/cuda/kernels/Attention.cu -o "$out/Attention_bf16_$1.o" &
done
wait
for v in v1 v2; do
  nvcc -arch=sm_90 "$out/AttentionCheck_bf16.o" "$out/Attention_bf16_$v.o" "$out/Runtime_bf16.o" \
    -lcublasLt -o "$out/AttentionCheck_bf16_$v"
  nvcc -arch=sm_90 "$out/attention_bench.o" "$out/Attention_bf16_$v.o" "$out/Runtime_bf16.o" \
    -lcublasLt -o "$out/attention_bench_$v"
done
