#!/usr/bin/env bash
# Builds, checks and times the W8 sparse kernels against cuSPARSE in one run, on a machine with
# an sm_90 GPU and CUDA (no MLIR needed: a plain nvcc build of backends/cuda/sparse,
# backends/cpu/sparse and bench/spmm).
#
#   bench/spmm/run.sh [bench args...]      e.g. --quick, --threshold 1.25, --only astro-ph,
#                                          --time-ms 25 (timed work per measurement),
#                                          --part-blocks 16 (blocks per part; 0: the format's rule),
#                                          --graph a.mtx,b.txt (these graphs instead of the suite:
#                                          Matrix Market files or edge lists, GraphFile.h)
#
# Env: OUT (result folder, default bench/results/spmm/<date>-run), SPMM_BUILD (object folder), SPMM_FLAGS
#      (extra nvcc flags, e.g. the kernels' -D knobs: bench/spmm/variants.sh),
#      GTEST_SRC (googletest source with include/ and src/: also builds and runs the GPU
#      unit tests of tests/unit/sparse first), SKIP_BENCH=1 (tests only).
# Writes $OUT/sparse_h200.json and $OUT/bench.log; exits non-zero if a check fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-bench/results/spmm/$(date -u +%F)-run}
build=${SPMM_BUILD:-/tmp/spmm-build}
mkdir -p "$out" "$build"
nvccVersion=$(nvcc --version | grep -o 'release [0-9.]*, V[0-9.]*' || echo unknown)
flags=(-std=c++17 -O3 -arch=sm_90 -I. -lineinfo -Xcompiler -fopenmp,-Wall ${SPMM_FLAGS:-})

compile() { # source object [extra flags]
  local src=$1 obj=$2
  shift 2
  nvcc "${flags[@]}" "$@" -c "$src" -o "$obj"
}

srcs=(backends/cuda/sparse/WindowFormat.cu backends/cuda/sparse/SpmmKernels.cu
      backends/cuda/sparse/SddmmKernels.cu backends/cpu/sparse/SparseReference.cpp
      bench/spmm/Graphs.cu backends/common/GraphFile.cpp bench/spmm/CusparseBaseline.cu)
pids=()
for s in "${srcs[@]}"; do
  compile "$s" "$build/$(basename "$s").o" & pids+=($!)
done
compile bench/spmm/SpmmBench.cu "$build/SpmmBench.o" \
  -DAUTODDL_NVCC_VERSION="\"$nvccVersion\"" & pids+=($!)
if [ -n "${GTEST_SRC:-}" ]; then
  g++ -std=c++17 -O2 -I"$GTEST_SRC/include" -I"$GTEST_SRC" -c "$GTEST_SRC/src/gtest-all.cc" \
    -o "$build/gtest-all.o" & pids+=($!)
  g++ -std=c++17 -O2 -I"$GTEST_SRC/include" -c "$GTEST_SRC/src/gtest_main.cc" \
    -o "$build/gtest_main.o" & pids+=($!)
  g++ -std=c++17 -O2 -I. -I"$GTEST_SRC/include" -I/usr/local/cuda/include \
    -c tests/unit/sparse/SparseCudaTest.cpp -o "$build/SparseCudaTest.o" & pids+=($!)
fi
for p in "${pids[@]}"; do wait "$p"; done
echo "build: ${SECONDS} s"
lib=("$build"/WindowFormat.cu.o "$build"/SpmmKernels.cu.o "$build"/SddmmKernels.cu.o
     "$build"/SparseReference.cpp.o)
nvcc -arch=sm_90 -Xcompiler -fopenmp "${lib[@]}" "$build"/Graphs.cu.o "$build"/GraphFile.cpp.o \
  "$build"/CusparseBaseline.cu.o "$build"/SpmmBench.o -lcusparse -o "$build/spmm_bench"

status=0
if [ -n "${GTEST_SRC:-}" ]; then
  nvcc -arch=sm_90 "${lib[@]}" "$build"/SparseCudaTest.o "$build"/gtest-all.o \
    "$build"/gtest_main.o -lpthread -o "$build/sparse_cuda_test"
  "$build/sparse_cuda_test" 2>&1 | tee "$out/tests.log" | grep -E '^\[ *(OK|FAILED|PASSED|SKIPPED) ' |
    head -40 || true
  grep -q '^\[  PASSED  \]' "$out/tests.log" && ! grep -q '^\[  FAILED  \]' "$out/tests.log" ||
    { echo "GPU unit tests FAILED"; grep -m 20 -B2 -A6 'Failure' "$out/tests.log" || true; status=1; }
fi
echo "build and tests: ${SECONDS} s"
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  set +e
  "$build/spmm_bench" --data bench/spmm/data --out "$out/sparse_h200.json" "$@" 2>&1 |
    tee "$out/bench.log"
  benchStatus=${PIPESTATUS[0]}
  set -e
  [ "$benchStatus" = 0 ] || status=$benchStatus
fi
exit $status
