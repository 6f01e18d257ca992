#!/usr/bin/env bash
# The plan-program contract (DESIGN.md §5b, planner/Runnable.h) as a property: every plan the
# planner returns on a grid of models (built-in, HF-style, graph, an ONNX export) x GPU counts x
# the H100 and A100 presets x optimizers x batches generates for both backends, unless codegen
# says the backend does not run the model at all (a CNN on cuda: no plan changes that). A
# case may fail to plan only with "no plan fits" (memory) or "no parallel configuration applies";
# then a few small free plans are built and run for 2 steps on the CPU under mpirun.
# Usage: plans_generate.sh AUTODDL WORKDIR
set -euo pipefail
autoddl=$1 work=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$work" && mkdir -p "$work"
onnx=$root/tests/onnx/exports/tiny-gpt.onnx

# name model cluster gpus batch optimizer [extra plan flags...]
cases() {
  local i=0 cl
  for m in gpt2 llama-2-7b bert-base-uncased gcn-cora gat-cora mlp-mnist "$onnx"; do
    for g in 1 8 64; do
      for opt in adamw kfac; do
        # Alternate the presets and batches over the grid instead of multiplying them.
        cl=dgx-h100-ndr b=64 extra=""
        [ $((i % 2)) = 1 ] && cl=dgx-a100-hdr
        # 512 sequences only first-order: K-FAC's packing of 128 micro-batches per step takes
        # minutes of planning (docs/planner.md "What the programs run").
        [ $((i % 3)) = 2 ] && [ "$opt" = adamw ] && b=512
        case "$m" in gcn-*|gat-*|transformer_conv-*) b=1 ;; *.onnx) extra="--seq 64" ;; esac
        echo "c$i $m $cl $g $b $opt${extra:+ $extra}" # no trailing blank: xargs -L
        i=$((i + 1))
      done
    done
  done
}

one() { # one grid case: prints "name outcome"; the outcome is ok, skip:<why> or FAIL:<why>
  local name=$1 model=$2 cl=$3 g=$4 b=$5 opt=$6
  shift 6
  local d=$work/$name
  mkdir -p "$d"
  if ! "$autoddl" plan "$model" --cluster "$cl" --gpus "$g" --global-batch "$b" --optimizer "$opt" \
    --no-why "$@" -o "$d/plan.json" >"$d/plan.log" 2>&1; then
    if grep -q "no plan fits\|no parallel configuration applies" "$d/plan.log"; then
      echo "$name skip:plan"
    else
      echo "$name FAIL:plan: $(tail -1 "$d/plan.log")"
    fi
    return
  fi
  local be out=""
  for be in cpu cuda; do
    if "$autoddl" codegen "$d/plan.json" --backend "$be" -o "$d/$be" >"$d/$be.log" 2>&1; then
      out+=" $be:ok"
    elif grep -q "classification model\|is not supported by the $be backend" "$d/$be.log"; then
      out+=" $be:model" # the backend does not run the model (codegen::backendRefusal)
    else
      echo "$name FAIL:codegen $be ($model $cl $g $b $opt): $(tail -1 "$d/$be.log")"
      return
    fi
  done
  echo "$name ok$out"
}
export -f one
export autoddl work

cases | xargs -P "$(nproc)" -L 1 bash -c 'one "$@"' _ >"$work/grid.txt"
sort -V "$work/grid.txt"
generated=$(grep -c " ok" "$work/grid.txt" || true)
if grep -q FAIL "$work/grid.txt"; then
  echo "FAIL: a plan the planner returned does not generate (or planning failed unexpectedly)"
  exit 1
fi
[ "$generated" -ge 20 ] || { echo "FAIL: only $generated grid plans generated; the grid lost its point"; exit 1; }
echo "ok: all $generated plans the planner returned generate for every backend that runs the model"

# Small free plans (nothing pinned) built and run for 2 steps on the CPU: K-FAC and AdamW, so
# the search's own choices run, not only pinned ones.
for c in "tiny-gpt 4 8 kfac" "tiny-llama 2 8 adamw"; do
  set -- $c
  d=$work/run_$1_$4
  "$autoddl" plan "$1" --cluster dgx-h100-ndr --gpus "$2" --global-batch "$3" --seq 16 \
    --optimizer "$4" --no-why -o "$d.json" >/dev/null
  OPENBLAS_NUM_THREADS=1 "$autoddl" run "$d.json" --steps 2 --out "$d" >"$d.log" 2>&1 ||
    { cat "$d.log"; echo "FAIL: the free plan of $1 ($4) did not run"; exit 1; }
  python3 - "$d/metrics.json" "$1" <<'PY'
import json, math, sys
loss = json.load(open(sys.argv[1]))["loss"]
if len(loss) != 2 or not all(math.isfinite(x) for x in loss):
    sys.exit(f"FAIL: {sys.argv[2]}: losses {loss}")
print(f"ok: {sys.argv[2]} free plan ran 2 steps, losses {loss}")
PY
done
