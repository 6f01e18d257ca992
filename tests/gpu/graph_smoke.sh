#!/usr/bin/env bash
# Step graphs of full-size multi-rank programs (backends/cuda/StepGraph.h), on a device: each given
# project (e.g. bench/cuda/make_projects.sh's gpt2-dp2, -tp2, -pp2) built on one shared runtime,
# then run for STEPS steps with its step graph and again with --no-cuda-graph. A program of more
# ranks than the device has GPUs runs them on shared GPUs (AUTODDL_SHARE_GPU, Comm.cu): this checks
# that the capture of its collectives, gradient buckets and pipeline transfers works at that size
# and gives the eager step's losses; with ranks sharing a GPU the times say nothing.
#
#   bash tests/gpu/graph_smoke.sh [--steps N] OUT_DIR PROJECT...
#
# Prints one line per project: the graph's state (metrics.json info.cuda_graph), the largest
# relative loss difference between the two runs, and the collectives counted by each; exits 1
# when a run fails, the graph is not on, the counts differ, or the losses differ by more than 1e-2
# relative (bf16 builds: the same kernels, but fp32 atomics in a few backward kernels round in
# run-dependent order, and AdamW amplifies that over the steps).
set -uo pipefail
steps=6
[ "${1:-}" = --steps ] && { steps=$2; shift 2; }
out=${1:?usage: graph_smoke.sh [--steps N] OUT_DIR PROJECT...}
shift
[ $# -ge 1 ] || { echo "graph_smoke.sh: give at least one project" >&2; exit 2; }
mkdir -p "$out"
out=$(realpath "$out")
export NCCL_NVLS_ENABLE=0
have=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
[ "${have:-0}" -ge 1 ] || { echo "skipped: no GPU"; exit 77; }
top=/tmp/graph-smoke
rm -rf "$top" && mkdir -p "$top/src"
bash "$(dirname "$0")/../../bench/cuda/shared_runtime_cmake.sh" "$@" >"$top/src/CMakeLists.txt"
t0=$(date +%s)
cmake -S "$top/src" -B "$top/build" -DCMAKE_BUILD_TYPE=Release >"$out/build.log" 2>&1 &&
  cmake --build "$top/build" -j "$(nproc)" >>"$out/build.log" 2>&1 ||
  { tail -20 "$out/build.log"; exit 1; }
echo "build: $(($(date +%s) - t0)) s"
bad=0
for d in "$@"; do
  n=$(basename "$d")
  ranks=$(python3 -c "import json,sys; m=json.load(open(sys.argv[1]))['mesh']; print(m['dp']*m['tp']*m['pp'])" "$d/plan.json")
  share=() && [ "$ranks" -gt "$have" ] && share=(-x AUTODDL_SHARE_GPU=1)
  for mode in graph eager; do
    flag=() && [ $mode = eager ] && flag=(--no-cuda-graph)
    t1=$(date +%s)
    timeout 240 mpirun --allow-run-as-root --oversubscribe -np "$ranks" -x NCCL_NVLS_ENABLE \
      -x LD_LIBRARY_PATH "${share[@]}" "$top/build/train_$n" --steps "$steps" --quiet \
      "${flag[@]}" --out "$out/$n.$mode" </dev/null >"$out/$n.$mode.log" 2>&1 ||
      { echo "$n $mode: FAILED (rc $?)"; tail -5 "$out/$n.$mode.log"; bad=1; }
    echo "$n $mode: $(($(date +%s) - t1)) s"
  done
  python3 - "$out" "$n" "$ranks" "${#share[@]}" <<'PY' || bad=1
import json, os, sys
out, n, ranks, shared = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] != "0"
def load(mode):
    p = os.path.join(out, f"{n}.{mode}", "metrics.json")
    return json.load(open(p)) if os.path.exists(p) else None
g, e = load("graph"), load("eager")
if not g or not e:
    print(f"{n}: no metrics"); sys.exit(1)
count = lambda m: {k: (v["calls"], v["bytes"]) for k, v in m.get("collectives", {}).items()}
rel = max(abs(a - b) / abs(b) for a, b in zip(g["loss"], e["loss"]))
ok = (g["info"]["cuda_graph"].startswith("on:") and count(g) == count(e) and rel <= 1e-2
      and len(g["loss"]) == len(e["loss"]))
print(f"{n}: {'ok' if ok else 'BAD'}; {ranks} ranks{' sharing the GPU' if shared else ''}; "
      f"graph {g['info']['cuda_graph']}; losses {g['loss'][0]:.4f} -> {g['loss'][-1]:.4f}, "
      f"max rel diff vs eager {rel:.2e}; collectives {count(g)}"
      f"{'' if count(g) == count(e) else ' (eager: ' + str(count(e)) + ')'}")
sys.exit(0 if ok else 1)
PY
done
exit $bad
