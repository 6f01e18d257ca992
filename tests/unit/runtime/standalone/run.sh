#!/usr/bin/env bash
# Copies the runtime (backends/common, backends/host, backends/cpu) and this project into an empty directory,
# builds it with CMake alone, and runs it under mpirun on 2 ranks: the runtime is self-contained.
# Usage: run.sh AUTODDL_SOURCE_DIR WORK_DIR
set -euo pipefail
src=$1
work=$2
rm -rf "$work"
# Laid out as codegen lays out a project (runtime/backends/, the build in build/) and built through
# ccache based at the project, so the runtime's objects are those of the e2e tests' projects.
project=$work/project
mkdir -p "$project/runtime/backends"
cp -r "$src/backends/common" "$src/backends/host" "$src/backends/cpu" "$project/runtime/backends/"
cp "$src/tests/unit/runtime/standalone/CMakeLists.txt" "$src/tests/unit/runtime/standalone/main.cpp" "$project/"
launcher=()
command -v ccache >/dev/null && launcher=("-DCMAKE_CXX_COMPILER_LAUNCHER=env;CCACHE_BASEDIR=$project;ccache")
cmake -S "$project" -B "$project/build" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" > "$work/configure.log"
cmake --build "$project/build" -j 2 > "$work/build.log"
cd "$work"
mpirun --oversubscribe --allow-run-as-root -np 2 "$project/build/train" "$work/out"
test -s "$work/out/metrics.json"
test -s "$work/out/model.safetensors"
