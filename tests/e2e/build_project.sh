#!/usr/bin/env bash
# Builds a generated CPU project as a user does, with CMake alone: no AUTODDL_PREBUILT_RUNTIME, so
# it compiles its own copy of the runtime (through ccache based at the project where installed,
# which shares the objects with every other build of the same sources). Output in DIR/cmake.log.
# Usage: build_project.sh DIR
set -euo pipefail
dir=$1
launcher=()
command -v ccache >/dev/null && launcher=("-DCMAKE_CXX_COMPILER_LAUNCHER=env;CCACHE_BASEDIR=$dir;ccache")
cmake -S "$dir" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" > "$dir/cmake.log" 2>&1
cmake --build "$dir/build" -j2 >> "$dir/cmake.log" 2>&1
