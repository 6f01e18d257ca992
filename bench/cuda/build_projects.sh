#!/usr/bin/env bash
# Builds generated CUDA projects on one shared runtime (shared_runtime_cmake.sh) into BUILD, as
# BUILD/train_<project folder name>, or, where AUTODDL_PREBUILT names a folder that already holds
# every train_<name>, links those instead: one device call then compiles the runtime once for all
# of its benchmark scripts (bench/cuda/README.md, the build_projects.sh row).
#
#   bash bench/cuda/build_projects.sh BUILD LOG PROJECT...
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -ge 3 ] || { echo "usage: build_projects.sh BUILD LOG PROJECT..." >&2; exit 2; }
build=$1 log=$2
shift 2
mkdir -p "$build"
if [ -n "${AUTODDL_PREBUILT:-}" ]; then
  for p in "$@"; do
    bin=$AUTODDL_PREBUILT/train_$(basename "$p")
    [ -x "$bin" ] || { echo "build_projects.sh: AUTODDL_PREBUILT has no $bin" >&2; exit 1; }
    ln -sf "$(realpath "$bin")" "$build/train_$(basename "$p")"
  done
  echo "prebuilt: $AUTODDL_PREBUILT" >"$log"
  exit 0
fi
mkdir -p "$build/src"
bash "$root/bench/cuda/shared_runtime_cmake.sh" "$@" >"$build/src/CMakeLists.txt"
{ cmake -S "$build/src" -B "$build" -DCMAKE_BUILD_TYPE=Release &&
  nice cmake --build "$build" -j "$(nproc)"; } >"$log" 2>&1 || { tail -30 "$log" >&2; exit 1; }
