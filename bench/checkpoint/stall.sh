#!/usr/bin/env bash
# The training stall of a checkpoint, synchronous (--save-sync) against asynchronous (the default),
# for GPT-2 355M and 1.5B on one GPU (issue 46 item 1; docs/codegen.md "Running the program").
#
#   bash bench/checkpoint/stall.sh stage DIR [AUTODDL]   # here: plans and CUDA projects into DIR
#   bash bench/checkpoint/stall.sh device DIR            # GPU machine: build, run, print the table
#
# stage plans gpt2-medium and gpt2-xl for one GPU (`autoddl plan MODEL --cluster dgx-h100-ndr
# --gpus 1 --global-batch 8 --seq 1024`, the planner picks micro-batch and recomputation to fit)
# and generates their CUDA projects into DIR/<model>/ (DIR ignored by git, named in the device
# tool's carry). device builds them on one shared runtime (bench/cuda/shared_runtime_cmake.sh)
# and runs each three times, STEPS steps (default 10): without --save, with --save-every EVERY
# (default 5) asynchronously and with --save-sync. MODELS="gpt2-xl" runs one model only (the build
# in DIR-build is kept, so a second call on a warm machine only runs: 10-minute calls). The first
# save's stall is the clean number; a later one may include waiting for the previous write
# (waited_ms), unless EVERY steps outlast a write (1.5B: 18 GB at the disk's speed). Checkpoints go to CKPT (default DIR/ck; a 1.5B
# checkpoint is 18 GB: two of them at a time at most, removed after each run). Results to $OUT
# (or DIR/results): each run's metrics.json and log, and the table:
#   stall_ms     the training loop blocked by the save (metrics.json checkpoints[].stall_seconds)
#   waited_ms    of it, waiting for the previous write (one write in flight at most)
#   write_s      the folder's write, snapshot to rename
#   next_step_ms the step after the save, against the median step without --save (async: the
#                next update waits for the device-to-host copy on its stream; sync: nothing)
#   after_ms     the median of the steps after that one up to the next save (async: the write is
#                in flight meanwhile, write_s says how long)
#   d2h_ms       the state's bytes / 25 GB/s (PCIe 5 x16 pinned, a lower bound of the copy)
# The goal (issue 46): async stall <= the device-to-host copy and < 1 step for 1.5B.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
mode=${1:?usage: stall.sh stage DIR [AUTODDL] | device DIR}
dir=${2:?DIR}
models=${MODELS:-gpt2-medium gpt2-xl}
. "$root/bench/checkpoint/lib.sh"
case $mode in
stage)
  stage_projects stall.sh "${3:-}"
  ;;
device)
  device_env 10
  # The projects copied there file by file where they changed: the carry rewrites DIR each call
  # (new times), the copies keep theirs, so CMake rebuilds only what changed.
  projects=()
  for m in gpt2-medium gpt2-xl; do
    (cd "$dir/$m" && find . -type f) | while read -r f; do
      cmp -s "$dir/$m/$f" "$build/projects/$m/$f" ||
        { mkdir -p "$(dirname "$build/projects/$m/$f")" && cp "$dir/$m/$f" "$build/projects/$m/$f"; }
    done
    projects+=("$build/projects/$m")
  done
  bash "$root/bench/cuda/shared_runtime_cmake.sh" "${projects[@]}" >"$build/src/CMakeLists.txt"
  echo "stall.sh: building ${projects[*]} (log $out/build.log)"
  { cmake -S "$build/src" -B "$build/build" -DCMAKE_BUILD_TYPE=Release &&
    nice cmake --build "$build/build" -j "$(nproc)"; } >"$out/build.log" 2>&1 ||
    { tail -20 "$out/build.log"; exit 1; }
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/gpu.txt"
  df -h "$ck" | tail -1 | tee "$out/disk.txt"
  for m in $models; do
    for run in nosave async sync; do
      args=(--steps "$steps" --out "$out/$m-$run" --overwrite --quiet)
      case $run in
      async) args+=(--save "$ck/$m" --save-every "$every") ;;
      sync) args+=(--save "$ck/$m" --save-every "$every" --save-sync) ;;
      esac
      rm -rf "${ck:?}/$m"
      echo "stall.sh: $m $run"
      mpirun --allow-run-as-root -np 1 -x NCCL_NVLS_ENABLE "$build/build/train_$m" "${args[@]}" \
        >"$out/$m-$run.log" 2>&1 || { tail -20 "$out/$m-$run.log"; exit 1; }
      # The state's size, for the copy's lower bound, before the folder goes.
      [ "$run" = async ] && du -sb "$ck/$m/step-$every" | cut -f1 >"$out/$m-bytes.txt"
      rm -rf "${ck:?}/$m"
    done
  done
  python3 - "$out" $models "$every" <<'PY' | tee "$out/stall.txt"
import json, statistics, sys
out, models = sys.argv[1], sys.argv[2:-1]
print(f"{'model':12s} {'mode':5s} {'step':>4s} {'stall_ms':>9s} {'waited_ms':>9s} {'write_s':>8s} "
      f"{'next_step_ms':>12s} {'after_ms':>9s} {'base_step_ms':>12s} {'d2h_ms':>7s}")
for m in models:
    base = json.load(open(f"{out}/{m}-nosave/metrics.json"))["step_seconds"]
    base_ms = statistics.median(base[1:]) * 1e3
    d2h_ms = int(open(f"{out}/{m}-bytes.txt").read()) / 25e9 * 1e3
    for mode in ("async", "sync"):
        r = json.load(open(f"{out}/{m}-{mode}/metrics.json"))
        steps = r["step_seconds"]
        for c in r["checkpoints"]:
            s = c["step"]  # the save follows step s-1 (0-based); the next step is index s
            nxt = f"{steps[s] * 1e3:12.1f}" if s < len(steps) else f"{'-':>12s}"
            rest = steps[s + 1:s + int(sys.argv[-1])]
            after = f"{statistics.median(rest) * 1e3:9.1f}" if rest else f"{'-':>9s}"
            print(f"{m:12s} {mode:5s} {s:4d} {c['stall_seconds'] * 1e3:9.1f} "
                  f"{c['waited_seconds'] * 1e3:9.1f} {c['write_seconds']:8.2f} {nxt} {after} "
                  f"{base_ms:12.1f} {d2h_ms:7.1f}")
PY
  ;;
*) echo "stall.sh: unknown mode $mode (stage or device)" >&2; exit 2 ;;
esac
