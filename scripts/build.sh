#!/usr/bin/env bash
# Configures and builds autoddl into build/ (Ninja, ccache). Extra args go to `cmake --build`
# (e.g. `--target autoddl`). Set AUTODDL_BUILD_DIR to build elsewhere, AUTODDL_BUILD_TYPE
# (default Release: no debug info keeps the MLIR-heavy build small and fast on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${AUTODDL_BUILD_DIR:-build}
jobs=${AUTODDL_JOBS:-$(nproc)}
export CCACHE_DIR=${CCACHE_DIR:-$PWD/.cache/ccache}
# Paths relative to the checkout: build dirs side by side (build-<name>) share cache hits.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${AUTODDL_BUILD_TYPE:-Release} ${AUTODDL_CMAKE_ARGS:-}
fi
cmake --build "$build" -j "$jobs" "$@"
