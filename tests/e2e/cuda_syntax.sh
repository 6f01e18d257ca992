#!/usr/bin/env bash
# Sourced by the e2e scripts that compile generated CUDA programs where there is no GPU (CI).
#   require_cuda [tool|header...]: exits 77 (skipped) unless the CUDA runtime and NCCL headers, MPI's
#     headers and each named header (in $cuda_inc) or tool (in $cuda/bin) are there.
#   compile_train_cuda DIR: the project's train.cpp against its runtime headers with the host
#     compiler, bf16 and --fp32, -Wall -Wextra -Werror.
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
