#!/usr/bin/env bash
# The whole test suite: installs missing packages, builds, runs every ctest test
# (unit, lit, end-to-end), then the importer's tests under ASan/UBSan and a short
# fuzz run. CI (.ci/run) calls this.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
./scripts/sanitize.sh
