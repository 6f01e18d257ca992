#!/usr/bin/env bash
# FP8 casts made once a step (docs/fp8.md "Cast once a step") on one H100/H200: bf16 against fp8
# programs of the LLaMA-2-7B 4-layer stack (micro-batch 8, global batch 16, sequence 2048) and of
# gpt2-xl (micro-batch 8, global batch 16), planned as bench/results/cuda/2026-12-07-h100-
# microbatch-fp8-7b was; each fp8 binary runs three ways, AUTODDL_FP8_CAST_ONCE=0 (every GEMM
# casts its operands, the runtime before), weights, all (the default).
#
#   bash bench/cuda/fp8_cast_once.sh stage AUTODDL DIR   # here: plans and projects into DIR
#   bash bench/cuda/fp8_cast_once.sh device DIR [STEPS]  # GPU machine (default 12 steps)
#
# DIR: inside the checkout and ignored by git (build-*), named in the device tool's carry. device
# builds the four projects on one runtime (build_projects.sh), runs each, and prints per run the
# median step of steps 4 to STEPS, its speed against bf16, the predicted step and the measured
# peak memory; logs and metrics in $OUT (or DIR/results).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
mode=${1:?usage: fp8_cast_once.sh stage AUTODDL DIR | device DIR [STEPS]}
case $mode in
stage)
  autoddl=${2:?AUTODDL} dir=${3:?DIR}
  mkdir -p "$dir"
  fix=tp=1,pp=1,dp=1,microbatch=8,recompute=none,zero=0
  stack=$root/bench/results/cuda/2026-12-07-h100-microbatch-fp8-7b/llama-2-7b-4l.json
  for prec in bf16 fp8; do
    "$autoddl" plan "$stack" --cluster dgx-h100-ndr --gpus 1 --global-batch 16 --seq 2048 \
      --precision "$prec" --fix "$fix" --no-why -o "$dir/l7b4-$prec.json" | grep 'predicted:'
    "$autoddl" plan gpt2-xl --cluster dgx-h100-ndr --gpus 1 --global-batch 16 \
      --precision "$prec" --fix "$fix" --no-why -o "$dir/xl-$prec.json" | grep 'predicted:'
    for m in l7b4 xl; do
      "$autoddl" codegen "$dir/$m-$prec.json" --backend cuda -o "$dir/$m-$prec" >/dev/null
    done
  done
  echo "staged 4 projects in $dir"
  ;;
device)
  dir=$(cd "${2:?DIR}" && pwd) steps=${3:-12} out=${OUT:-$dir/results}
  mkdir -p "$out"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$out/device.txt" || true
  bash "$root/bench/cuda/build_projects.sh" "$dir/build" "$out/build.log" \
    "$dir"/l7b4-bf16 "$dir"/l7b4-fp8 "$dir"/xl-bf16 "$dir"/xl-fp8
  runs=()
  run() { # label project [env...]
    local label=$1 p=$2
    shift 2
    env "$@" "$dir/build/train_$p" --steps "$steps" --out "$out/$label" --overwrite \
      >"$out/$label.log" 2>&1 || { tail -20 "$out/$label.log"; exit 1; }
    runs+=("$label")
  }
  for m in l7b4 xl; do
    run "$m-bf16" "$m-bf16"
    for once in 0 weights all; do
      run "$m-fp8-$once" "$m-fp8" AUTODDL_FP8_CAST_ONCE=$once
    done
  done
  python3 - "$out" "$dir" "${runs[@]}" <<'PY'
import json, re, statistics, sys
out, d, runs = sys.argv[1], sys.argv[2], sys.argv[3:]
base = {}
for lab in runs:
    ms = [float(m.group(1)) for m in (re.match(r"step\s+\d+/\d+: .*\(([\d.]+) ms\)", l)
                                      for l in open(f"{out}/{lab}.log")) if m]
    step = statistics.median(ms[3:]) / 1e3
    model, prec = lab.split("-")[0], lab.split("-")[1]
    base.setdefault(model, step)
    plan = json.load(open(f"{d}/{model}-{prec}.json"))["predicted"]["step_time_s"]
    peak = max(json.load(open(f"{out}/{lab}/metrics.json")).get("peak_memory_bytes", [0]))
    print(f"{lab:16s} step {step:.4f} s  vs bf16 {base[model] / step:.3f}x  "
          f"predicted {plan:.4f} s ({plan / step:.3f})  peak {peak / 2**30:.2f} GiB")
PY
  ;;
*) echo "fp8_cast_once.sh: unknown mode $mode (stage or device)" >&2; exit 2 ;;
esac
