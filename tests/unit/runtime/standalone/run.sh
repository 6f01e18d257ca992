#!/usr/bin/env bash
# Copies the runtime (backends/common, backends/cpu) and this project into an empty directory,
# builds it with CMake alone, and runs it under mpirun on 2 ranks: the runtime is self-contained.
# Usage: run.sh AUTODDL_SOURCE_DIR WORK_DIR
set -euo pipefail
src=$1
work=$2
rm -rf "$work"
mkdir -p "$work/project/backends"
cp -r "$src/backends/common" "$src/backends/cpu" "$work/project/backends/"
cp "$src/tests/unit/runtime/standalone/CMakeLists.txt" "$src/tests/unit/runtime/standalone/main.cpp" "$work/project/"
cmake -S "$work/project" -B "$work/build" -DCMAKE_BUILD_TYPE=Release > "$work/configure.log"
cmake --build "$work/build" -j 2 > "$work/build.log"
cd "$work"
mpirun --oversubscribe --allow-run-as-root -np 2 "$work/build/train" "$work/out"
test -s "$work/out/metrics.json"
test -s "$work/out/model.safetensors"
