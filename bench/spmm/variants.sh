#!/usr/bin/env bash
# A/B of the sparse kernels' build-time knobs in one GPU run: builds the bench once per
# variant (run.sh with SPMM_FLAGS, all builds in parallel), then runs every variant on the same
# arguments, one after another, each writing OUT/NAME/{sparse_h200.json,bench.log}.
#
#   bench/spmm/variants.sh OUT NAME='FLAGS' [NAME='FLAGS' ...] -- [bench args]
#   e.g. bench/spmm/variants.sh /tmp/v base='-DAUTODDL_SDDMM_X_DEDUPE=0' new='' \
#          -- --only chunglu-reddit --widths 64
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: variants.sh OUT NAME=FLAGS... -- [bench args]}
shift
names=() flags=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
  names+=("${1%%=*}") flags+=("${1#*=}")
  shift
done
[ "${1:-}" = -- ] && shift
pids=()
for i in "${!names[@]}"; do
  mkdir -p "$out/${names[$i]}"
  SKIP_BENCH=1 SPMM_BUILD="/tmp/spmm-variant-${names[$i]}" SPMM_FLAGS="${flags[$i]}" \
    OUT="$out/${names[$i]}" bash bench/spmm/run.sh >"$out/${names[$i]}/build.log" 2>&1 &
  pids+=($!)
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || { echo "build of ${names[$i]} failed:"; tail -20 "$out/${names[$i]}/build.log"; exit 1; }
done
status=0
for i in "${!names[@]}"; do
  echo "== variant ${names[$i]} (${flags[$i]:-defaults})"
  "/tmp/spmm-variant-${names[$i]}/spmm_bench" --data bench/spmm/data \
    --out "$out/${names[$i]}/sparse_h200.json" "$@" >"$out/${names[$i]}/bench.log" 2>&1 ||
    status=1
  grep -E "^  (spmm|sddmm)|min speedup" "$out/${names[$i]}/bench.log" | cut -c1-150 || true
done
exit $status
