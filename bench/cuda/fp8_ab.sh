#!/usr/bin/env bash
# fp8 against bf16 generated CUDA programs on one H100/H200 (docs/fp8.md): the same model and
# micro-batch planned with --precision bf16 and fp8, built on one shared runtime, run alternately
# from the same seed (and data), printing each program's tokens/s, the fp8/bf16 ratio and the
# largest relative gap between their per-step losses.
#
#   bash bench/cuda/fp8_ab.sh stage AUTODDL DIR [MODEL=MICRO ...]   # here (default gpt2-xl=8)
#   bash bench/cuda/fp8_ab.sh device DIR [STEPS] [DATA]                # GPU machine
#
# stage plans each MODEL on dgx-h100-ndr (1 GPU, global batch = MICRO, no recomputation unless
# memory needs it) in both precisions and generates DIR/<model>-{bf16,fp8} (DIR inside the
# checkout, ignored by git, named in the device tool's carry). device builds them on one runtime
# (bench/cuda/shared_runtime_cmake.sh, DIR/build) and runs each for STEPS
# (default 60) steps, bf16 then fp8, ROUNDS times (default 1); with FP8_ALL=1 the fp8 programs also
# run with AUTODDL_FP8=all (every aligned block linear in FP8, labelled fp8all: for gpt2 124M,
# whose size rule picks none).
# DATA: a .bin token file (uint16, nanoGPT/llm.c) for the loss comparison on real text; without
# it, synthetic tokens. Logs and metrics go to $OUT (or DIR/results).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
mode=${1:?usage: fp8_ab.sh stage AUTODDL DIR [MODEL=MICRO ...] | device DIR [STEPS] [DATA]}
case $mode in
stage)
  autoddl=${2:?autoddl} dir=${3:?DIR}
  shift 3
  models=("$@")
  [ ${#models[@]} -gt 0 ] || models=(gpt2-xl=8)
  mkdir -p "$dir"
  projects=()
  for mm in "${models[@]}"; do
    model=${mm%%=*} micro=${mm#*=}
    for prec in bf16 fp8; do
      p=$dir/$model-$prec
      "$autoddl" plan "$model" --cluster dgx-h100-ndr --gpus 1 --global-batch "$micro" \
        --fix "microbatch=$micro" --precision "$prec" --no-why -o "$dir/$model-$prec.json" |
        sed -n '1,5p'
      "$autoddl" codegen "$dir/$model-$prec.json" --backend cuda -o "$p" >/dev/null
      projects+=("$p")
    done
  done
  echo "staged ${#projects[@]} projects in $dir"
  ;;
device)
  dir=$(cd "${2:?DIR}" && pwd) steps=${3:-60} data=${4:-} out=${OUT:-$dir/results}
  mkdir -p "$out"
  export NCCL_NVLS_ENABLE=0
  source "$root/bench/cuda/cudnn_env.sh"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$out/device.txt" || true
  # Absolute paths of this machine: made here, not at stage.
  bash "$root/bench/cuda/shared_runtime_cmake.sh" "$dir"/*-bf16 "$dir"/*-fp8 >"$dir/CMakeLists.txt"
  cmake -S "$dir" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release $(command -v ninja >/dev/null && echo -G Ninja) \
    >"$out/configure.log" 2>&1
  cmake --build "$dir/build" -j "$(nproc)" >"$out/build.log" 2>&1 ||
    { tail -30 "$out/build.log"; exit 1; }
  dataArgs=()
  [ -n "$data" ] && dataArgs=(--data "$data")
  run() { # label project [env...]
    local label=$1 p=$2
    shift 2
    env "$@" "$dir/build/train_$(basename "$p")" --steps "$steps" --out "$out/$label" \
      "${dataArgs[@]}" >"$out/$label.log" 2>&1 || { tail -20 "$out/$label.log"; exit 1; }
  }
  labels=()
  for r in $(seq 1 "${ROUNDS:-1}"); do
    for plan in "$dir"/*-bf16.json; do
      m=$(basename "$plan" -bf16.json)
      run "$m-bf16-$r" "$dir/$m-bf16"
      run "$m-fp8-$r" "$dir/$m-fp8"
      labels+=("$m-bf16-$r" "$m-fp8-$r")
      if [ "${FP8_ALL:-0}" = 1 ]; then
        run "$m-fp8all-$r" "$dir/$m-fp8" AUTODDL_FP8=all
        labels+=("$m-fp8all-$r")
      fi
    done
  done
  python3 - "$out" "$steps" "${labels[@]}" <<'PY'
import json, re, statistics, sys
out, steps, labels = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
warm = min(10, steps // 2)
runs = {}
for lab in labels:
    losses, ms = [], []
    for line in open(f"{out}/{lab}.log"):
        m = re.match(r"step\s+\d+/\d+: loss ([-\d.einfa]+) .*\(([\d.]+) ms\)", line)
        if m:
            losses.append(float(m.group(1)))
            ms.append(float(m.group(2)))
    model, prec, r = lab.rsplit("-", 2)
    runs.setdefault(model, {}).setdefault(prec, []).append((losses, ms))
for model, d in sorted(runs.items()):
    base = d["bf16"][0][0]
    def step_ms(prec):  # the median over rounds of each run's median step after warm-up
        return statistics.median(statistics.median(ms[warm:]) for _, ms in d[prec])
    t16 = step_ms("bf16")
    for prec in d:
        t = step_ms(prec)
        losses = d[prec][0][0]
        gap = max(abs(a - b) / abs(b) for a, b in zip(losses, base)) if losses else float("nan")
        print(f"{model:12s} {prec:7s} median step {t:8.2f} ms  speed vs bf16 {t16 / t:6.3f}x  "
              f"final loss {losses[-1]:.4f}  max |loss - bf16|/bf16 {gap:.4f}")
PY
  ;;
*) echo "fp8_ab.sh: unknown mode $mode (stage or device)" >&2; exit 2 ;;
esac
