#!/usr/bin/env bash
# The CUDA programs of K-FAC plans (plan --optimizer kfac, docs/kfac.md "Generated programs") compile
# where there is no GPU (CI): for tiny-GPT plans on one GPU, dp=2 (with a factor stride), Megatron tp=2 and a dp=2 x pp=2
# Chimera plan, generate the CUDA project and compile its train.cpp with the host compiler, bf16
# and --fp32, -Wall -Wextra -Werror, and the project's copies of the K-FAC kernels
# (backends/cuda/kfac/*.cu) with nvcc; the project's CMakeLists links cuSOLVER. With FULL_BUILD=1 the first project is built whole with CMake (the device run uses it).
# Exits 77 (skipped) without the CUDA headers, nvcc or MPI.
# Usage: cuda_kfac_compiles.sh AUTODDL WORKDIR
set -euo pipefail
autoddl=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/cuda_syntax.sh"
require_cuda cusolverDn.h nvcc
nvcc=$cuda/bin/nvcc
rm -rf "$work" && mkdir -p "$work"
cases=(
  "one tiny-gpt 1 tp=1,pp=1,dp=1 0 sgd"
  "dp2 tiny-gpt 2 tp=1,pp=1,dp=2 0 lamb --kfac-factor-stride 2"
  "dp2_zero1 tiny-gpt 2 tp=1,pp=1,dp=2,zero=1 0 lamb"
  "tp2 tiny-gpt 2 tp=2,pp=1,dp=1 1 lamb"
  "dp2_pp2_chimera tiny-gpt 4 tp=1,pp=2,dp=2,microbatch=2,schedule=chimera 0 sgd"
)
for c in "${cases[@]}"; do
  read -r name model gpus fix mega rule extra <<<"$c"
  w=$work/$name
  # shellcheck disable=SC2086 # EXTRA: plan flags, words
  plan_cuda_case "$autoddl" "$w" "$model" "$gpus" "$fix" "$mega" --optimizer kfac --kfac-rule "$rule" \
    ${extra:-}
  codegen_cuda "$autoddl" "$w" "$model"
  [ -z "${extra:-}" ] || grep -q 'k.factor_stride = 2;' "$w/p/train.cpp" # the plan's stride
  grep -q 'backends/cuda/harness/KfacRun.h' "$w/p/train.cpp"
  grep -q 'kfac_curvature_G(' "$w/p/train.cpp"
  grep -q 'CUDA::cusolver' "$w/p/runtime/backends/cuda/StandaloneRuntime.cmake"
  compile_train_cuda "$w/p"
  echo "$name: train.cpp compiles (bf16, fp32)"
done
# (The harness, KfacRun.cpp among it, is compiled by e2e.cuda_codegen_compiles.)
rt=$work/one/p/runtime
for f in "$rt"/backends/cuda/kfac/*.cu; do
  "$nvcc" -std=c++17 -arch=sm_90 --expt-relaxed-constexpr -c -I "$rt" -o "$work/$(basename "$f").o" \
    "$f"
done
echo "the project's K-FAC kernels compile (nvcc, sm_90)"
if [ "${FULL_BUILD:-0}" = 1 ]; then
  cmake -S "$work/one/p" -B "$work/one/p/build" >"$work/one/cmake.log" 2>&1 &&
    cmake --build "$work/one/p/build" -j "$(nproc)" >>"$work/one/cmake.log" 2>&1 ||
    { tail -30 "$work/one/cmake.log"; exit 1; }
  echo "the K-FAC project builds and links (cuSOLVER): $work/one/p/build/train"
fi
