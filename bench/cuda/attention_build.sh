#!/usr/bin/env bash
# Builds the attention check and benchmark without CMake or MLIR (the GPU machine has
# neither the autoddl tree's dependencies nor OpenBLAS): nvcc only, sm_90, the bf16 and the
# AUTODDL_FP32 variants of AttentionCheck, and attention_bench. The CPU reference's
# cblas_sgemm comes from tests/unit/cuda/AttentionRefBlas (plain loops). The cuDNN path
# (kernels/AttentionCudnn.cu) is built in where cudnn_graph.h is found: CUDNN_HOME, else the CUDA
# toolkit's, else the nvidia-cudnn wheel beside PyTorch (NO_CUDNN=1: never); it loads libcudnn.so.9
# when it runs (set LD_LIBRARY_PATH to the wheel's nvidia/cudnn/lib where the toolkit has none).
# usage: bench/cuda/attention_build.sh BUILD_DIR   (run from the repository root)
set -euo pipefail
out=${1:?usage: attention_build.sh BUILD_DIR}
mkdir -p "$out"
nv=(nvcc -std=c++17 -O3 -arch=sm_90 -I. -Xcompiler=-Wall,-Wextra)
ref=(-Itests/unit/cuda/AttentionRefBlas)
cudnn_home=${CUDNN_HOME:-}
if [ -z "$cudnn_home" ] && [ -f /usr/local/cuda/include/cudnn_graph.h ]; then
  for l in /usr/local/cuda/lib64 /usr/local/cuda/lib; do
    [ -e "$l/libcudnn.so.9" ] && cudnn_home=/usr/local/cuda && cudnn_lib=$l && break
  done
fi
if [ -z "$cudnn_home" ]; then
  cudnn_home=$(python3 -c 'import nvidia.cudnn, os; print(os.path.dirname(nvidia.cudnn.__file__) if nvidia.cudnn.__file__ else list(nvidia.cudnn.__path__)[0])' 2>/dev/null || true)
fi
cudnn_def=(); cudnn_link=()
if [ -z "${NO_CUDNN:-}" ] && [ -n "$cudnn_home" ] && [ -f "$cudnn_home/include/cudnn_graph.h" ]; then
  cudnn_lib=${cudnn_lib:-$cudnn_home/lib}
  # libcudnn is loaded at run time (AttentionCudnn.cu): from $cudnn_lib first, then the
  # library path (LD_LIBRARY_PATH); the binaries run without it (own kernels only).
  cudnn_def=(-DAUTODDL_HAVE_CUDNN -I"$cudnn_home/include" -DAUTODDL_CUDNN_DIR="\"$cudnn_lib\"")
  cudnn_link=(-ldl)
  echo "attention_build: cuDNN from $cudnn_home ($cudnn_lib)"
else
  echo "attention_build: no cuDNN: the own kernels only"
fi
pids=()
for mode in bf16 fp32; do
  def=(); [ "$mode" = fp32 ] && def=(-DAUTODDL_FP32)
  "${nv[@]}" "${def[@]}" -c backends/cuda/Runtime.cu -o "$out/Runtime_$mode.o" & pids+=($!)
  "${nv[@]}" "${def[@]}" "${cudnn_def[@]}" -c backends/cuda/kernels/AttentionCudnn.cu \
    -o "$out/AttentionCudnn_$mode.o" & pids+=($!)
  "${nv[@]}" "${def[@]}" "${cudnn_def[@]}" -c backends/cuda/kernels/CudnnGraph.cu \
    -o "$out/CudnnGraph_$mode.o" & pids+=($!)
  "${nv[@]}" "${def[@]}" -Xptxas -v -c backends/cuda/kernels/Attention.cu \
    -o "$out/Attention_$mode.o" 2>"$out/ptxas_$mode.txt" & pids+=($!)
  "${nv[@]}" "${def[@]}" "${ref[@]}" -x cu -c tests/unit/cuda/AttentionCheck.cpp \
    -o "$out/AttentionCheck_$mode.o" & pids+=($!)
done
"${nv[@]}" -c bench/cuda/attention_bench.cu -o "$out/attention_bench.o" & pids+=($!)
for p in "${pids[@]}"; do wait "$p"; done
for mode in bf16 fp32; do
  nvcc -arch=sm_90 "$out/AttentionCheck_$mode.o" "$out/Attention_$mode.o" \
    "$out/AttentionCudnn_$mode.o" "$out/CudnnGraph_$mode.o" "$out/Runtime_$mode.o" -lcublasLt \
    "${cudnn_link[@]}" -o "$out/AttentionCheck_$mode"
done
nvcc -arch=sm_90 "$out/attention_bench.o" "$out/Attention_bf16.o" "$out/AttentionCudnn_bf16.o" \
  "$out/CudnnGraph_bf16.o" "$out/Runtime_bf16.o" -lcublasLt "${cudnn_link[@]}" \
  -o "$out/attention_bench"
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
      "$out/AttentionCudnn_bf16.o" "$out/CudnnGraph_bf16.o" "$out/Runtime_bf16.o" -lcublasLt \
      "${cudnn_link[@]}" -o "$out/AttentionCheck_bf16_$name"
    nvcc -arch=sm_90 "$out/attention_bench.o" "$out/Attention_bf16_$name.o" \
      "$out/AttentionCudnn_bf16.o" "$out/CudnnGraph_bf16.o" "$out/Runtime_bf16.o" -lcublasLt \
      "${cudnn_link[@]}" -o "$out/attention_bench_$name" ) & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
