#!/usr/bin/env bash
# On a GPU machine: runs the CUDA kernel checks (bf16 and fp32, every kernel against the CPU
# kernel) and then the kernel benchmark, writing logs under OUT_DIR. Uses prebuilt binaries from
# PREBUILT (made by `tests/gpu/check_kernels.sh --prebuild DIR` on a machine with nvcc) when
# they load there, else builds tests/unit/cuda/standalone with CMake on all cores.
# usage: tests/gpu/check_kernels.sh OUT_DIR [PREBUILT]
#        tests/gpu/check_kernels.sh --prebuild DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
configure() { # build dir, extra cmake args...
  local b=$1
  shift
  cmake -S "$root/tests/unit/cuda/standalone" -B "$b" $(command -v ninja >/dev/null && echo -G Ninja) -DCMAKE_BUILD_TYPE=Release \
    -DAUTODDL_CUDA_ATTENTION=OFF "$@" >"$b.configure.log" 2>&1 &&
    cmake --build "$b" -j "$(nproc)" --target KernelCheck KernelCheckFp32
}
if [ "${1:-}" = "--prebuild" ]; then
  dir=${2:?usage: check_kernels.sh --prebuild DIR}
  mkdir -p "$dir"
  # No OpenBLAS dependency: the GPU machine may lack it.
  configure "$dir/build" -DAUTODDL_REF_BLAS_FALLBACK=ON || exit 1
  cp "$dir/build/KernelCheck" "$dir/build/KernelCheckFp32" "$dir/"
  exit 0
fi
out=${1:?usage: check_kernels.sh OUT_DIR [PREBUILT]}
bin=${2:-}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total \
  --format=csv >"$out/device.txt" 2>&1
if [ -z "$bin" ] || ! [ -x "$bin/KernelCheck" ] || ldd "$bin/KernelCheck" | grep -q "not found" ||
  ! "$bin/KernelCheck" --help >/dev/null 2>&1; then
  echo "check_kernels: building on this machine"
  bin=/tmp/autoddl-kernel-checks
  mkdir -p "$bin"
  start=$(date +%s)
  configure "$bin" >"$out/build.log" 2>&1 || {
    tail -30 "$out/build.log"
    exit 1
  }
  echo "check_kernels: built in $(($(date +%s) - start)) s"
fi
status=0
# The two precisions in parallel: one GPU is plenty for both, the CPU references dominate.
"$bin/KernelCheck" >"$out/check_bf16.txt" 2>&1 &
p1=$!
"$bin/KernelCheckFp32" >"$out/check_fp32.txt" 2>&1 &
p2=$!
wait $p1 || status=1
wait $p2 || status=1
grep -h -E "FAIL|PASS|seed" "$out/check_bf16.txt" "$out/check_fp32.txt"
"$bin/KernelCheck" --bench 2>&1 | tee "$out/kernels_h200.txt" || status=1
exit $status
