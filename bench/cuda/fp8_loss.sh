#!/usr/bin/env bash
# FP8 loss curves on real text, and the bisect of where FP8 costs loss (issue 48 item 3,
# docs/fp8.md "Knobs"): one model's bf16 and fp8 programs run STEPS steps each on the same text,
# the fp8 one once per VARIANT (the program's AUTODDL_FP8* variables), each compared with bf16 by
# bench/cuda/fp8_loss_curves.py (100-step means).
#
#   bash bench/cuda/fp8_loss.sh stage AUTODDL DIR [MODEL=MICRO]    # here (default gpt2=8)
#   bash bench/cuda/fp8_loss.sh device DIR DATA [STEPS] [LR]          # GPU machine (2000, 6e-4)
#
# stage: fp8_ab.sh's stage (plans for dgx-h100-ndr, one GPU, micro-batch MICRO). device: builds
# them on one runtime and runs bf16, then each variant in VARIANTS (default below: 124M all
# linears FP8 as measured on 2026-12-07, then one knob at a time), results to $OUT (or
# DIR/results). A variant is LABEL:VAR=VALUE[;VAR=VALUE...]; a LABEL starting with bf16 runs the
# bf16 program again (e.g. "bf16-2:X=1": two bf16 runs give the spread an fp8 gap is read against). About 40 s a run for GPT-2 124M on
# an H100 at 2,000 steps of micro-batch 8; the run stops starting variants when LEFT seconds
# (default 600) are spent. TRAIN_FLAGS adds flags to every run, e.g. "--warmup 100 --lr-decay
# cosine" for the schedule a user would set (docs/codegen.md "Running the program").
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
mode=${1:?usage: fp8_loss.sh stage AUTODDL DIR [MODEL=MICRO] | device DIR DATA [STEPS] [LR]}
default_variants=(
  "all:AUTODDL_FP8=all"
  "all-exact-accum:AUTODDL_FP8=all;AUTODDL_FP8_FAST_ACCUM=0"
  "all-forward:AUTODDL_FP8=all;AUTODDL_FP8_GEMMS=forward"
  "all-fwd-dgrad:AUTODDL_FP8=all;AUTODDL_FP8_GEMMS=forward,dgrad"
  "all-fwd-wgrad:AUTODDL_FP8=all;AUTODDL_FP8_GEMMS=forward,wgrad"
  "all-grads:AUTODDL_FP8=all;AUTODDL_FP8_GEMMS=dgrad,wgrad"
  "no-attn-proj:AUTODDL_FP8_MIN_INTENSITY=500"
)
case $mode in
stage)
  bash "$root/bench/cuda/fp8_ab.sh" stage "${2:?AUTODDL}" "${3:?DIR}" "${4:-gpt2=8}"
  ;;
device)
  dir=$(cd "${2:?DIR}" && pwd) data=$(realpath "${3:?DATA}") steps=${4:-2000} lr=${5:-6e-4}
  out=${OUT:-$dir/results} t0=$(date +%s)
  mkdir -p "$out"
  export NCCL_NVLS_ENABLE=0
  source "$root/bench/cuda/cudnn_env.sh"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$out/device.txt" || true
  bash "$root/bench/cuda/build_projects.sh" "$dir/build" "$out/build.log" "$dir"/*-bf16 "$dir"/*-fp8
  m=$(basename "$(ls -d "$dir"/*-bf16 | head -1)" -bf16)
  read -ra train_flags <<<"${TRAIN_FLAGS:-}"
  run() { # LABEL PROJECT [VAR=VALUE...]
    local label=$1 p=$2
    shift 2
    env "$@" "$dir/build/train_$p" --steps "$steps" --quiet --data "$data" --lr "$lr" "${train_flags[@]}" \
      --out "$out/$label" --overwrite >"$out/$label.log" 2>&1 || { echo "$label failed:"; tail -3 "$out/$label.log"; }
    echo "[$(($(date +%s) - t0)) s] $label done"
  }
  run "$m-bf16" "$m-bf16"
  pairs=()
  variants=("${default_variants[@]}")
  [ -n "${VARIANTS:-}" ] && read -r -a variants <<<"$VARIANTS"
  for v in "${variants[@]}"; do
    [ $(($(date +%s) - t0)) -lt "${LEFT:-600}" ] || { echo "out of time before $v"; break; }
    label=$m-fp8-${v%%:*} prog=$m-fp8
    # a label starting with bf16 reruns the bf16 program: the run-to-run spread beside fp8's gap
    [[ ${v%%:*} == bf16* ]] && label=$m-${v%%:*} prog=$m-bf16
    IFS=';' read -r -a vars <<<"${v#*:}"
    run "$label" "$prog" "${vars[@]}"
    [ -f "$out/$label/metrics.json" ] && pairs+=("$m-bf16:$label")
  done
  if [ ${#pairs[@]} -eq 0 ]; then
    echo "fp8_loss.sh: no fp8 run finished (logs in $out)" >&2
    exit 1
  fi
  python3 "$root/bench/cuda/fp8_loss_curves.py" "$out" "${pairs[@]}" | tee "$out/loss_curves.md"
  ;;
*) echo "fp8_loss.sh: unknown mode $mode (stage or device)" >&2; exit 2 ;;
esac
