#!/usr/bin/env bash
# Planning time at scale (issue 4) and the Megatron-LM Table 1 comparison.
# Builds autoddl_plan_bench, runs it on ONE core (taskset -c 0), and writes into OUT (default
# bench/results/planner/<date>-plan-time; bench/results/README.md says how results are kept)
#   results.json   wall/CPU seconds of plan() per case + chosen plan
#   megatron.json  published vs predicted per-GPU throughput
#   machine.txt    date, host and CPU
# CPU seconds are the number to read when the machine is shared (wall includes
# waiting for the core).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${AUTODDL_BUILD_DIR:-build}
out=${OUT:-bench/results/planner/$(date -u +%F)-plan-time}
mkdir -p "$out"
AUTODDL_BUILD_DIR=$build ./scripts/build.sh --target autoddl_plan_bench >/dev/null
{
  echo "# date: $(date -u +%FT%TZ)  host: $(uname -n)  cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
} >"$out/machine.txt"
taskset -c 0 "$build/planner/autoddl_plan_bench" "$out/results.json" "$out/megatron.json"
