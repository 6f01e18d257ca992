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
# The measured alternatives to the default tiles (Attention.cu's knobs), checked and timed in
# the same run: "alt" = D=128 forward with 64 query rows a block, Q in registers;
# "bwd_wW_ktK_qQ" = one backward tile choice for every D >= 32 and both masks (W warps, K key
# m-tiles a warp, Q query rows an iteration; the default picks by D and mask);
# "bwd_three_barriers" = the next query tile prefetched before the iteration's first barrier.
# bwd_w4_kt1_q64 is the choice before 2026-12-01.
variants=(
  "alt:-DAUTODDL_ATTENTION_D128_FWD=0"
  "bwd_w4_kt1_q64:-DAUTODDL_ATTENTION_BWD_WARPS=4 -DAUTODDL_ATTENTION_BWD_KEY_TILES=1 -DAUTODDL_ATTENTION_BWD_QROWS=64"
  "bwd_w8_kt1_q64:-DAUTODDL_ATTENTION_BWD_WARPS=8 -DAUTODDL_ATTENTION_BWD_KEY_TILES=1 -DAUTODDL_ATTENTION_BWD_QROWS=64"
  "bwd_w4_kt2_q32:-DAUTODDL_ATTENTION_BWD_WARPS=4 -DAUTODDL_ATTENTION_BWD_KEY_TILES=2 -DAUTODDL_ATTENTION_BWD_QROWS=32"
  "bwd_three_barriers:-DAUTODDL_ATTENTION_BWD_LATE_PREFETCH=0"
)
[ -n "${ATTENTION_VARIANTS:-}" ] && read -r -a keep <<<"$ATTENTION_VARIANTS" || keep=()
pids=()
for spec in "${variants[@]}"; do
  name=${spec%%:*}
  if [ ${#keep[@]} -gt 0 ] && [[ ! " ${keep[*]} " == *" $name "* ]]; then continue; fi
  read -r -a defs <<<"${spec#*:}"
  ( "${nv[@]}" "${defs[@]}" -c backends/cuda/kernels/Attention.cu -o "$out/Attention_bf16_$name.o"
    nvcc -arch=sm_90 "$out/AttentionCheck_bf16.o" "$out/Attention_bf16_$name.o" \
      "$out/Runtime_bf16.o" -lcublasLt -o "$out/AttentionCheck_bf16_$name"
    nvcc -arch=sm_90 "$out/attention_bench.o" "$out/Attention_bf16_$name.o" \
      "$out/Runtime_bf16.o" -lcublasLt -o "$out/attention_bench_$name" ) & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
