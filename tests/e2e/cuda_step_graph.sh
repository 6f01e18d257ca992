#!/usr/bin/env bash
# The CUDA program's step graph (backends/cuda/StepGraph.h), on a machine with a GPU (exit 77,
# skipped, elsewhere). tiny-gpt on one GPU with 2 micro-batches, --fp32 build:
#  - 6 steps replayed from a graph (captured at the second step) against 6 steps with
#    --no-cuda-graph: every loss within 1e-6 relative (the same kernels in the same order; only
#    the norm backward's atomic adds may round differently), and metrics.json says which ran;
#  - a run resumed from the graph run's step-3 checkpoint (eager, captured, replayed) repeats
#    steps 3..5 within 1e-6;
#  - --trace turns the graph off (it times each op).
# Usage: cuda_step_graph.sh AUTODDL WORKDIR
#    or: cuda_step_graph.sh PROJECT WORKDIR  (a project generated elsewhere, as the ctest case
#        makes it: GPU machines have no autoddl; see tests/gpu/verify_gpu.sh)
set -uo pipefail
autoddl=$1 w=$2
. "$(dirname "$0")/gpu_lib.sh"
require_gpus 1
rm -rf "$w" && mkdir -p "$w"
if [ -f "$autoddl/CMakeLists.txt" ]; then
  cp -r "$autoddl" "$w/p"
  rm -rf "$w/p/build"
else
  "$autoddl" plan tiny-gpt --cluster h200x2-nvlink --gpus 1 --global-batch 8 --seq 64 \
    --fix tp=1,pp=1,dp=1,microbatch=2 --no-why -o "$w/plan.json" > /dev/null || fail plan
  "$autoddl" codegen "$w/plan.json" --backend cuda --fp32 -o "$w/p" > /dev/null || fail codegen
fi
grep -q 'constexpr bool kStepGraphable = true;' "$w/p/train.cpp" || fail "the plan should qualify"
cmake -S "$w/p" -B "$w/p/build" -DCMAKE_BUILD_TYPE=Release > "$w/cmake.log" 2>&1 &&
  cmake --build "$w/p/build" -j8 >> "$w/cmake.log" 2>&1 || fail "build (see $w/cmake.log)"
train() { mpirun -np 1 --oversubscribe --allow-run-as-root "$w/p/build/train" "$@"; }
train --steps 6 --save "$w/ck" --save-every 3 --out "$w/graph" --quiet || fail "graph run"
train --steps 6 --no-cuda-graph --out "$w/eager" --quiet || fail "eager run"
train --steps 6 --resume "$w/ck/step-3" --out "$w/resumed" --quiet || fail "resumed run"
train --steps 3 --trace --out "$w/traced" --quiet || fail "traced run"
python3 - "$w" <<'PY' || fail "graph against eager"
import json, sys
w = sys.argv[1]
m = {k: json.load(open(f"{w}/{k}/metrics.json")) for k in ("graph", "eager", "resumed", "traced")}
for k, v in m.items():
    print(f"{k:8s} cuda_graph: {v['info']['cuda_graph']}; loss {v['loss']}")
close = lambda a, b: len(a) == len(b) and all(abs(x - y) <= 1e-6 * abs(y) for x, y in zip(a, b))
ok = (m["graph"]["info"]["cuda_graph"].startswith("on:")
      and m["eager"]["info"]["cuda_graph"].startswith("off:")
      and m["traced"]["info"]["cuda_graph"].startswith("off:")
      and m["resumed"]["info"]["cuda_graph"].startswith("on:")
      and close(m["graph"]["loss"], m["eager"]["loss"])
      and close(m["resumed"]["loss"], m["graph"]["loss"][3:])
      and m["graph"]["loss"][-1] < m["graph"]["loss"][0])
sys.exit(0 if ok else 1)
PY
echo "ok: the replayed step graph matches the eager step"
