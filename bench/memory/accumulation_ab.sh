#!/usr/bin/env bash
# Issue 44's accumulation check on one GPU: GPT-2 1.5B at global batch 64 (seq 1024), the plan
# the planner picks now that the programs keep one activation set per in-flight micro-batch
# (8 micro-batches of 8, no recomputation) against the plan it picked before (one micro-batch of
# 64, every layer recomputed). Each generated CUDA program is built and run for STEPS steps; the
# step time (median after the first), the tokens/s and the peak memory come from its metrics.json,
# beside the plan's prediction.
#
#   here:       bash bench/memory/accumulation_ab.sh stage AUTODDL DIR
#   on the GPU: bash bench/memory/accumulation_ab.sh run DIR [STEPS]   ($OUT/accumulation_ab.json)
set -euo pipefail
mode=${1:?usage: accumulation_ab.sh stage AUTODDL DIR | run DIR [STEPS]}
case $mode in
stage)
  autoddl=$2 dir=$3
  rm -rf "$dir" && mkdir -p "$dir"
  for c in "accum:" "full:microbatch=64,recompute=full"; do
    name=${c%%:*} fix=${c#*:}
    "$autoddl" plan gpt2-xl --cluster dgx-h100-ndr --gpus 1 --global-batch 64 --seq 1024 \
      --no-why ${fix:+--fix "$fix"} -o "$dir/$name.json" >"$dir/$name.txt"
    "$autoddl" codegen "$dir/$name.json" --backend cuda -o "$dir/gpt2-xl-$name" >/dev/null
  done
  ;;
run)
  dir=$2 steps=${3:-6}
  out=${OUT:-/tmp/out}
  mkdir -p "$out"
  export NCCL_NVLS_ENABLE=0
  inc=$(dirname "$(find /usr/include /usr/local/cuda/include /usr/local/lib /usr/lib/python3* \
    -name nccl.h 2>/dev/null | head -1)")
  lib=$(dirname "$(find /usr/lib /usr/local/cuda /usr/local/lib -name 'libnccl.so*' 2>/dev/null |
    head -1)")
  export LD_LIBRARY_PATH=$lib:${LD_LIBRARY_PATH:-}
  ncclArgs=()
  [ -n "$inc" ] && [ "$inc" != . ] && ncclArgs+=(-DAUTODDL_NCCL_INCLUDE="$inc")
  for name in accum full; do # built side by side, run one at a time
    cmake -S "$dir/gpt2-xl-$name" -B "/tmp/xl-$name" -G Ninja "${ncclArgs[@]}" >/dev/null &&
      cmake --build "/tmp/xl-$name" -j 8 >"$out/build-$name.log" 2>&1 &
  done
  wait
  for name in accum full; do
    rm -rf "/tmp/xl-run-$name"
    "/tmp/xl-$name/train" --steps "$steps" --out "/tmp/xl-run-$name" --quiet \
      >"$out/run-$name.log" 2>&1 || echo "$name: exit $?" >>"$out/run-$name.log"
  done
  python3 - "$dir" "$out/accumulation_ab.json" "$steps" <<'PY'
import json, statistics, subprocess, sys
d, out, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = {}
for name in ("accum", "full"):
    plan = json.load(open(f"{d}/{name}.json"))
    try:
        m = json.load(open(f"/tmp/xl-run-{name}/metrics.json"))
    except OSError as e:
        rows[name] = {"error": str(e)}
        continue
    times = m.get("step_seconds") or []
    rows[name] = {"microbatch": plan["microbatch"], "microbatches": plan["microbatches"],
                  "predicted_step_s": plan["predicted"]["step_time_s"],
                  "measured_step_s_median": statistics.median(times[1:]) if len(times) > 1 else None,
                  "step_seconds": times, "peak_memory_bytes": m.get("peak_memory_bytes"),
                  "peak_device_used_bytes": m.get("peak_device_used_bytes"),
                  "loss": m.get("loss")}
gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                     capture_output=True, text=True).stdout.strip()
json.dump({"device": gpu, "steps": steps, "plans": rows}, open(out, "w"), indent=1)
print(json.dumps(rows, indent=1))
PY
  ;;
esac
