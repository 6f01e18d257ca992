#!/usr/bin/env bash
# Fits the cluster to one profiled run and checks the fit on the others (issue 6 part 6: the
# predicted step within 15% of the measured one after calibration). Runs here, without a GPU, on
# the metrics.json files of profiled runs (bench/cuda/run.sh --profile keeps them):
#
#   bash bench/cuda/fit_check.sh [--autoddl BIN] [--cluster C] [--fit NAME] [--fix K=V,..]
#                                [--graph-runs DIR] [--micro m=B,..] MEASURED_DIR OUT_DIR
#
# MEASURED_DIR/<project>/metrics.json: one profiled run per benchmark project (the names of
# bench/cuda/make_projects.sh: gpt2-single, gpt2-medium-dp2, ...). NAME (default
# gpt2-medium-single) is the run the cluster is fitted to: its plan, made on C (default
# h200-calibrated), goes through `autoddl validate --fit-cluster OUT_DIR/h200-fitted.json`; every
# benchmark plan is then made again on the fitted cluster and validated against its own run.
# --graph-runs DIR: DIR/<project>/metrics.json, the unprofiled (timed) runs (bench/cuda/run.sh
# --profile keeps them as run-<project>/); the fit then takes gpu.graph_op_overhead_us from
# NAME's, if its step ran as a CUDA graph, and a run whose step was graphed is compared on its
# own step time (the profiled run is always eager).
# --micro: the runs' other micro-batches (as make_projects.sh --micro made their projects).
# Writes OUT_DIR/h200-fitted.json and OUT_DIR/fit_check.txt (one line per run).
set -euo pipefail
cd "$(dirname "$0")/../.."
autoddl="" cluster=h200-calibrated fit=gpt2-medium-single fix_extra=partition=uniform graph_runs=""
micro=()
while [ $# -gt 2 ]; do
  case "$1" in
  --autoddl) autoddl=$2; shift 2 ;;
  --cluster) cluster=$2; shift 2 ;;
  --fit) fit=$2; shift 2 ;;
  --fix) fix_extra=$2; shift 2 ;;
  --graph-runs) graph_runs=$2; shift 2 ;;
  --micro) micro=(--micro "$2"); shift 2 ;;
  *) echo "fit_check.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ $# -eq 2 ] || { echo "usage: fit_check.sh [options] MEASURED_DIR OUT_DIR" >&2; exit 2; }
measured=$1 out=$2
autoddl=${autoddl:-build/tools/autoddl/autoddl}
mkdir -p "$out"
models=gpt2,gpt2-medium,gpt2-large,gpt2-xl
before=$(mktemp -d) after=$(mktemp -d)
trap 'rm -rf "$before" "$after"' EXIT
# The 2026-12-01 runs' pp=2 plans split GPT-2 6 + 6 (the planner's partition before 7 + 5 was
# possible): FIX (default partition=uniform) makes the plans those runs ran.
bash bench/cuda/make_projects.sh --autoddl "$autoddl" --cluster "$cluster" --models "$models" \
  --fix "$fix_extra" "${micro[@]}" "$before" >/dev/null
graphed() { # DIR: its metrics.json's step ran as a CUDA graph
  python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["info"].get("cuda_graph","").startswith("on") else 1)' "$1/metrics.json" 2>/dev/null
}
graph_arg=()
[ -n "$graph_runs" ] && graphed "$graph_runs/$fit" && graph_arg=(--graph-run "$graph_runs/$fit")
"$autoddl" validate "$before/.plans/$fit.json" --measured "$measured/$fit" --cluster "$cluster" \
  --fit-cluster "$out/h200-fitted.json" "${graph_arg[@]}" >/dev/null
bash bench/cuda/make_projects.sh --autoddl "$autoddl" --cluster "$out/h200-fitted.json" \
  --models "$models" --fix "$fix_extra" "${micro[@]}" "$after" >/dev/null
{
  echo "# predicted / measured step (profiled runs in $measured); fitted to $fit on $cluster"
  printf '%-22s %12s %12s %12s %10s %10s\n' run measured_ms before_ms after_ms before after
  for dir in "$measured"/*/; do
    n=$(basename "$dir")
    [ -f "$before/.plans/$n.json" ] || continue
    run=""
    [ -n "$graph_runs" ] && graphed "$graph_runs/$n" && run="$graph_runs/$n/metrics.json"
    python3 - "$n" "$fit" \
      <("$autoddl" validate "$before/.plans/$n.json" --measured "$dir" --json) \
      <("$autoddl" validate "$after/.plans/$n.json" --measured "$dir" --json) "$run" <<'PY'
import json, sys
name, fit, b, a = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3])), json.load(open(sys.argv[4]))
m, note = b["step"]["measured_s"], ""
if sys.argv[5]:  # the step ran as a CUDA graph: its own time
    m, note = json.load(open(sys.argv[5]))["mean_step_seconds"], "  (graphed step)"
pb, pa = b["step"]["predicted_s"], a["step"]["predicted_s"]
print("%-22s %12.3f %12.3f %12.3f %+9.1f%% %+9.1f%%%s%s" % (
    name, 1e3 * m, 1e3 * pb, 1e3 * pa, 100 * (pb - m) / m, 100 * (pa - m) / m,
    "  (fitted run)" if name == fit else "", note))
PY
  done
} | tee "$out/fit_check.txt"
