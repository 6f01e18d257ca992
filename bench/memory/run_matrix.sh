#!/usr/bin/env bash
# Runs the memory matrix staged by bench/memory/make_matrix.sh on the GPU machine (no autoddl
# there): builds every project's train.cpp on one shared runtime build, runs each for a few steps
# (two ranks sharing the GPU under AUTODDL_SHARE_GPU for the two-rank plans) and keeps each run's
# metrics.json and log; bench/memory/collect.py turns them into the predicted-vs-measured table.
# A time guard stops starting builds and runs at DEADLINE seconds (default 430) after the start:
# what is left is recorded as skipped, so the call ends well within 450 s.
#
#   bash bench/memory/run_matrix.sh STAGED_DIR [--deadline S] [--steps N]
#
# Results go to $OUT (the device tool's folder) when set, else STAGED_DIR/results: runs/<project>/
# (metrics.json, log), status.json (per project: ok, oom, failed, skipped, refused, shared),
# build.log, info.txt, and the table (collect.py's matrix.json) when python3 is there.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { echo "usage: run_matrix.sh STAGED_DIR [--deadline S] [--steps N]" >&2; exit 2; }
staged=$(realpath "$1")
shift
deadline=430 steps=3
while [ $# -gt 0 ]; do
  case "$1" in
  --deadline) deadline=$2; shift 2 ;;
  --steps) steps=$2; shift 2 ;;
  *) echo "run_matrix.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
t0=$(date +%s)
left() { echo $((deadline - ($(date +%s) - t0))); }
res=${OUT:-$staged/results}
mkdir -p "$res/runs"
[ -f "$here/../cuda/cudnn_env.sh" ] && source "$here/../cuda/cudnn_env.sh"
export NCCL_NVLS_ENABLE=0
src=/tmp/autoddl-memory/src build=/tmp/autoddl-memory/build
rm -rf /tmp/autoddl-memory && mkdir -p "$src" "$build"
tar -C "$src" -xzf "$staged/matrix.tar.gz"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
  nvcc --version 2>&1 | tail -2
  echo "staged from commit $(cat "$src/commit" 2>/dev/null)"
} >"$res/info.txt"

# One CMake build: the runtime once, then one executable per distinct train.cpp.
built=()
for p in "$src"/projects/*/; do
  [ -f "$p/train.cpp" ] && built+=("$(basename "$p")")
done
{
  echo 'cmake_minimum_required(VERSION 3.18)'
  echo 'set(CMAKE_CUDA_ARCHITECTURES 90)'
  echo 'project(autoddl_memory LANGUAGES C CXX CUDA)'
  echo 'set(CMAKE_CXX_STANDARD 17)'
  echo "set(AUTODDL_RUNTIME_ROOT $src/runtime)"
  echo "include($src/runtime/backends/cuda/StandaloneRuntime.cmake)"
  for n in "${built[@]}"; do
    echo "add_executable(train_$n $src/projects/$n/train.cpp)"
    echo "target_link_libraries(train_$n PRIVATE autoddl_cuda_runtime)"
  done
} >"$src/CMakeLists.txt"
echo "[$(date -u +%T)] building ${#built[@]} programs on one runtime ($(left) s left)"
# Keep going past a program that fails to build: ninja's -k takes a count, make's none.
keep_going="-k"
command -v ninja >/dev/null && keep_going="-k 0" && gen="-G Ninja"
timeout "$(($(left) - 60))" bash -c "cmake -S '$src' -B '$build' ${gen:-} -DCMAKE_BUILD_TYPE=Release >'$res/build.log' 2>&1 &&
  cmake --build '$build' -j $(nproc) -- $keep_going >>'$res/build.log' 2>&1"
echo "[$(date -u +%T)] build done ($(left) s left)"

# Runs, smallest first within each model so a guard stops on the big ones.
declare -A status
order=$(python3 - "$src/projects" <<'P' 2>/dev/null || ls "$src/projects"
import json, os, sys
d = sys.argv[1]
rows = [json.load(open(os.path.join(d, n, "bench.json"))) for n in os.listdir(d)]
size = {"gpt2": 0, "gpt2-medium": 1, "gpt2-large": 2, "gpt2-xl": 3}
rows.sort(key=lambda r: (r["ranks"] > 1, r["global_batch"] * (1 + size.get(r["model"], 0)), r["name"]))
print("\n".join(r["name"] for r in rows))
P
)
for n in $order; do
  bj=$src/projects/$n/bench.json
  st=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' "$bj" 2>/dev/null || echo planned)
  same=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("same_program_as",""))' "$bj" 2>/dev/null)
  ranks=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ranks"])' "$bj" 2>/dev/null || echo 1)
  if [ "$st" = refused ]; then status[$n]=refused; continue; fi
  if [ -n "$same" ]; then status[$n]="shared:$same"; continue; fi
  if [ "$(left)" -lt 40 ]; then status[$n]=skipped; continue; fi
  exe=$build/train_$n out=$res/runs/$n
  mkdir -p "$out"
  if [ ! -x "$exe" ]; then status[$n]=build_failed; continue; fi
  echo "[$(date -u +%T)] $n: $ranks rank(s) ($(left) s left)"
  limit=$(($(left) - 10))
  [ "$limit" -gt 90 ] && limit=90
  AUTODDL_SHARE_GPU=1 timeout "$limit" mpirun --allow-run-as-root --oversubscribe -np "$ranks" \
    -x AUTODDL_SHARE_GPU -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH \
    "$exe" --steps "$steps" --out "$out" --quiet >"$out/log" 2>&1
  rc=$?
  if [ $rc = 0 ] && [ -f "$out/metrics.json" ]; then
    status[$n]=ok
  elif grep -q "out of device memory" "$out/log"; then
    status[$n]=oom
  elif [ $rc = 124 ]; then
    status[$n]=timeout
  else
    status[$n]="failed:$rc"
  fi
done
{
  echo "{"
  first=1
  for n in "${!status[@]}"; do
    [ $first = 1 ] || echo ","
    first=0
    printf '  "%s": "%s"' "$n" "${status[$n]}"
  done
  echo
  echo "}"
} >"$res/status.json"
cp "$staged/index.json" "$res/index.json" 2>/dev/null
python3 "$here/collect.py" "$src/projects" "$res" -o "$res/matrix.json" || true
echo "[$(date -u +%T)] done in $(($(date +%s) - t0)) s: $res"
