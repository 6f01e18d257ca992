#!/usr/bin/env bash
# --loss (docs/model-format.md "The loss"): the refusals, one line and exit 1
# each; then the committed tiny-mlp export trained with --loss squared_error
# under dp=2 and under tp=2 (two ways), each against its single-rank run
# (autoddl verify).
# With REFUSALS_ONLY=1 the checks before the training (seconds, no compiler).
# Usage: [REFUSALS_ONLY=1] onnx_loss.sh <autoddl> <protoc> <onnx include dir> <work dir>
set -euo pipefail
autoddl=$1 protoc=$2 inc=$3 work=$4
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"
mlp=$here/exports/tiny-mlp.onnx
for m in cnn decoder; do
  "$protoc" --encode=onnx.ModelProto -I"$inc" onnx/onnx.proto <"$here/models/$m.txtpb" >"$work/$m.onnx"
done

# refuse WANT CMD...: exit status 1, one line on stderr containing WANT.
refuse() {
  local want=$1 rc=0
  shift
  "$@" >"$work/out" 2>"$work/err" || rc=$?
  if [ "$rc" != 1 ] || [ "$(wc -l <"$work/err")" != 1 ] || ! grep -qF -- "$want" "$work/err"; then
    echo "FAIL: $* -> exit $rc, expected one line with '$want':"; cat "$work/err"; exit 1
  fi
}
refuse "expected cross_entropy, causal_lm or squared_error, got \"hinge\"" \
  "$autoddl" import "$mlp" --loss hinge
refuse "is not logits [batch, seq, vocab]" "$autoddl" import "$mlp" --loss causal_lm
refuse "disagrees with the exported SoftmaxCrossEntropyLoss" \
  "$autoddl" import "$work/cnn.onnx" --loss squared_error
refuse "applies to ONNX models only" "$autoddl" import tiny-mlp --loss squared_error
refuse "applies to ONNX models only" "$autoddl" plan tiny-mlp --loss cross_entropy \
  --cluster dgx-a100-hdr --gpus 2 --global-batch 8 -o "$work/x.json"
refuse "is not scores [batch, classes]" \
  "$autoddl" import "$work/decoder.onnx" --seq 4 --loss squared_error
# has KIND CMD...: the command succeeds and its IR holds sbp.KIND (captured
# first: grep -q on a pipe can end the writer early under pipefail).
has() {
  local kind=$1
  shift
  "$@" >"$work/ir.mlir" && grep -q "sbp.$kind " "$work/ir.mlir" ||
    { echo "FAIL: $* -> no sbp.$kind"; exit 1; }
}
# Agreeing with the export, or today's default by name: accepted.
has cross_entropy "$autoddl" import "$work/decoder.onnx" --seq 4 --loss causal_lm
"$autoddl" import "$work/cnn.onnx" --loss cross_entropy >/dev/null
has cross_entropy "$autoddl" import "$mlp" --loss cross_entropy
has squared_error "$autoddl" import "$mlp" --loss squared_error
[ -n "${REFUSALS_ONLY:-}" ] && { echo "onnx_loss: refusals ok"; exit 0; }

# dp=2; tp=2 with the linears Megatron's (the scores column-split, gathered
# for the loss); tp=2 with every op on split rows (the loss too: each rank's
# rows, a partial sum). tests/lit/codegen/megatron.py rewrites the plan (the
# planner keeps so tiny a model replicated).
for case in tp=1,pp=1,dp=2:0 tp=2,pp=1,dp=1:1 tp=2,pp=1,dp=1:batch; do
  fix=${case%:*} level=${case#*:}
  d=$work/${fix//[,=]/_}_$level
  mkdir -p "$d"
  "$autoddl" plan "$mlp" --loss squared_error --cluster dgx-a100-hdr --gpus 2 \
    --global-batch 8 --fix "$fix" --no-why -o "$d/plan.json" >/dev/null
  python3 "$here/../lit/codegen/megatron.py" "$d/plan.json" --level "$level"
  python3 - "$d/plan.json" "$level" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
if doc["model"].get("loss") != "squared_error":
    sys.exit(f"plan records loss {doc['model'].get('loss')!r}")
sig = [o["signature"] for o in doc["ops"] if o["kind"] == "squared_error"]
if sys.argv[2] == "batch" and sig != ["batch"]:
    sys.exit(f"squared_error signature {sig}, expected batch")
PY
  refuse "apply when planning a model" "$autoddl" run "$d/plan.json" --loss squared_error
  "$autoddl" verify "$d/plan.json" --model "$mlp" --steps 3 --keep "$d/run"
done
# Closed form: valued.txtpb's weights are zeros and its biases ones, so with
# --weights onnx every score is 1 and every row's loss (1/C)(C-1) = 2/3 for its
# C = 3 classes, whatever the data; the cross-entropy would be ln 3.
"$protoc" --encode=onnx.ModelProto -I"$inc" onnx/onnx.proto <"$here/models/valued.txtpb" >"$work/valued.onnx"
"$autoddl" run "$work/valued.onnx" --loss squared_error --ranks 2 --fix tp=1,pp=1,dp=2 \
  --global-batch 8 --steps 1 --weights onnx --out "$work/valued" >"$work/valued.log" 2>&1 ||
  { tail -5 "$work/valued.log"; echo "FAIL: run valued.onnx --loss squared_error"; exit 1; }
python3 - "$work/valued/metrics.json" <<'PY'
import json, sys
loss = json.load(open(sys.argv[1]))["loss"][0]
if abs(loss - 2 / 3) > 1e-6:
    sys.exit(f"first loss {loss}, expected 2/3 (squared error of all-one scores)")
print(f"first loss {loss} = 2/3")
PY
echo "onnx_loss: ok"
