#!/usr/bin/env bash
# The W8 variant decider (issue 50 item 3, docs/sparse-kernels.md "The decider") measured on a
# GPU: both format variants timed per case on the suite and on graphs kept apart from it, each
# graph's features (SpmmDecider.h's spmmFeatures, what the runtime computes) and the shipped
# decider's pick recorded per case, then the fit's report on that data.
#
#   bash bench/spmm/decider.sh stage DIR    # the held-out graph files into DIR/graphs
#                                           # (bench/spmm/held_out_graphs.py, seconds; 160 MB)
#   bash bench/spmm/decider.sh device DIR   # GPU machine (sm_90): held-out graphs, then the suite
#
# device writes DIR/graphs itself where it is missing (too large to carry). Results:
# DIR/held-out and DIR/suite (sparse_h200.json, bench.log: run.sh's), DIR/fit.txt: the shipped
# decider's recorded picks on both files (the fraction within 5 % of the faster variant) and a
# refit on the new suite, judged on the new held-out file. Nothing is rewritten: to ship a refit, run
#   bench/spmm/fit_decider.py --suite DIR/suite/sparse_h200.json \
#     --held-out DIR/held-out/sparse_h200.json
# and commit the two result folders with the header it writes. Env: TIME_MS (timed work per
# measurement, default 25: both runs and their builds fit one 10-minute call on an H200).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
mode=${1:?usage: decider.sh stage DIR | device DIR}
dir=$(mkdir -p "${2:?DIR}" && cd "$2" && pwd)
case $mode in
stage)
  python3 "$root/bench/spmm/held_out_graphs.py" "$dir/graphs"
  ls -l "$dir/graphs"
  ;;
device)
  [ -d "$dir/graphs" ] || python3 "$root/bench/spmm/held_out_graphs.py" "$dir/graphs"
  files=$(ls "$dir"/graphs/*.txt "$dir"/graphs/*.mtx | paste -sd, -)
  cd "$root"
  OUT="$dir/held-out" bash bench/spmm/run.sh --time-ms "${TIME_MS:-25}" --graph "$files"
  OUT="$dir/suite" bash bench/spmm/run.sh --time-ms "${TIME_MS:-25}"
  python3 bench/spmm/fit_decider.py --suite "$dir/suite/sparse_h200.json" \
    --held-out "$dir/held-out/sparse_h200.json" --dry-run | tee "$dir/fit.txt"
  ;;
*)
  echo "decider.sh: unknown mode $mode (stage or device)" >&2
  exit 2
  ;;
esac
