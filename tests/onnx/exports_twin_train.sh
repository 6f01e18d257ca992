#!/usr/bin/env bash
# An export made by PyTorch trains as its built-in twin (issue 25): the ONNX file and the twin
# (examples/models/NAME.json) planned with the same --fix (dp x tp x pp) and run by the generated
# CPU+MPI programs from the same values (the export's, `--weights onnx`; the twin reads them with
# the program's --init, which works because the parameter names and shapes are the same) on the
# same synthetic tokens: every step's loss agrees within 1e-5 relative. (The seeded
# initialisations differ: the GPT-2 twin scales its projections' std as transformers does.)
# With UNFUSED=PASSES (sbp-fuse pass flags, comma-separated) the twin is the export itself
# imported with those passes left out (AUTODDL_FUSE_SKIP), so what they fuse runs as ONNX
# primitives (docs/model-format.md): the same check holds the primitives' kernels to the fused ops.
# Usage: [UNFUSED=PASSES] exports_twin_train.sh AUTODDL EXPORTS_DIR WORK FIX RANKS NAME...
set -euo pipefail
autoddl=$1 dir=$2 w=$3 fix=$4 ranks=$5
shift 5
rm -rf "$w" && mkdir -p "$w"
for name in "$@"; do
  for side in onnx twin; do
    model=$name from=(-- --init "$w/$name.onnx/weights.safetensors") skip=
    [ $side = onnx ] && model=$dir/$name.onnx from=(--weights onnx)
    [ $side = twin ] && [ -n "${UNFUSED:-}" ] &&
      model=$dir/$name.onnx from=(--weights onnx) skip=$UNFUSED
    seq=(); case $name in tiny-gpt | tiny-llama) seq=(--seq 16) ;; esac
    AUTODDL_FUSE_SKIP=$skip "$autoddl" run "$model" --ranks "$ranks" --fix "$fix" --global-batch 8 \
      "${seq[@]}" --steps 4 --out "$w/$name.$side" "${from[@]}" >"$w/$name.$side.log" 2>&1 ||
      { tail -5 "$w/$name.$side.log"; echo "FAIL: $name ($side): the run failed"; exit 1; }
  done
  # The plan of either side lowers to a verified sbp module (not only a listing).
  ! grep -h "is a listing, not an sbp module" "$w/$name".*.log ||
    { echo "FAIL: $name: a plan does not lower to an sbp module"; exit 1; }
  if [ -n "${UNFUSED:-}" ]; then # the program built (or found cached) runs primitives
    built=$(grep -oE "autoddl: (building|using the cached build) [^ ]+" "$w/$name.twin.log" |
      awk '{print $NF}' | sed "s|/build/train$||")
    grep -qs primitive_forward "$built/train.cpp" ||
      { echo "FAIL: $name: with $UNFUSED left out, the program runs no primitive"; exit 1; }
    # The cuda backend generates the plan too, its primitives through kernels/Primitive.h
    # (trained on the GPU by bench/onnx/cuda_primitives.sh).
    AUTODDL_FUSE_SKIP=$UNFUSED "$autoddl" codegen "$w/$name.twin/plan.json" --backend cuda \
      -o "$w/$name.cuda" >/dev/null || { echo "FAIL: $name: cuda refused the plan"; exit 1; }
    grep -qs "autoddl::rt::primitive_forward" "$w/$name.cuda/train.cpp" ||
      { echo "FAIL: $name: the cuda program runs no primitive"; exit 1; }
    echo "$name: cuda: generated with primitives"
    # The plan records the passes left out: the model read without them is refused.
    out=$("$autoddl" codegen "$w/$name.twin/plan.json" --backend cpu -o "$w/$name.fused" 2>&1) &&
      { echo "FAIL: $name: a plan made with $UNFUSED left out generated the fused graph"; exit 1; }
    case "$out" in
    *"the plan was made with AUTODDL_FUSE_SKIP="*) echo "$name: without the skip: $out" ;;
    *) echo "FAIL: $name: without the skip: $out"; exit 1 ;;
    esac
  fi
  python3 - "$w/$name" <<'PY' || exit 1
import json, sys
a = json.load(open(sys.argv[1] + ".onnx/metrics.json"))["loss"]
b = json.load(open(sys.argv[1] + ".twin/metrics.json"))["loss"]
worst = max(abs(x - y) / abs(y) for x, y in zip(a, b))
name = sys.argv[1].rsplit("/", 1)[1]
print("%s: export %s, twin %s, worst relative error %.1e" % (
    name, " ".join("%.6f" % x for x in a), " ".join("%.6f" % x for x in b), worst))
if len(a) != len(b) or worst > 1e-5:
    print("FAIL: %s: the export does not train as its twin" % name)
    sys.exit(1)
PY
done
