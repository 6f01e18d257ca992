#!/usr/bin/env bash
# --loss (docs/model-format.md "The loss"): the refusals, one line and exit 1
# each; then the committed tiny-mlp export trained with --loss squared_error
# under dp=2 and under tp=2, each against its single-rank run (autoddl verify).
# With REFUSALS_ONLY=1 the checks before the training (seconds, no compiler).
# Usage: [REFUSALS_ONLY=1] onnx_loss.sh <autoddl> <protoc> <onnx include dir> <work dir>
set -euo pipefail
autoddl=$1 protoc=$2 inc=$3 work=$4
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"
mlp=$here/exports/tiny-mlp.onnx
"$protoc" --encode=onnx.ModelProto -I"$inc" onnx/onnx.proto <"$here/models/cnn.txtpb" >"$work/cnn.onnx"

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
# Agreeing with the export, or today's default by name: accepted.
"$autoddl" import "$work/cnn.onnx" --loss cross_entropy >/dev/null
"$autoddl" import "$mlp" --loss cross_entropy | grep -q "sbp.cross_entropy"
"$autoddl" import "$mlp" --loss squared_error | grep -q "sbp.squared_error"
[ -n "${REFUSALS_ONLY:-}" ] && { echo "onnx_loss: refusals ok"; exit 0; }

for fix in tp=1,pp=1,dp=2 tp=2,pp=1,dp=1; do
  d=$work/${fix//[,=]/_}
  mkdir -p "$d"
  "$autoddl" plan "$mlp" --loss squared_error --cluster dgx-a100-hdr --gpus 2 \
    --global-batch 8 --fix "$fix" --no-why -o "$d/plan.json" >/dev/null
  python3 -c 'import json,sys; l=json.load(open(sys.argv[1]))["model"].get("loss"); sys.exit(0 if l=="squared_error" else f"plan records loss {l!r}")' "$d/plan.json"
  refuse "apply when planning a model" "$autoddl" run "$d/plan.json" --loss squared_error
  "$autoddl" verify "$d/plan.json" --model "$mlp" --steps 3 --keep "$d/run"
done
echo "onnx_loss: ok"
