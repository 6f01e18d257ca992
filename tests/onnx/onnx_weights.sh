#!/usr/bin/env bash
# --weights onnx (issue 25): training starts from an ONNX model's exported values.
#  - valued.txtpb (W zeros, b ones: every logit equal) run on 2 ranks (dp=2) with --weights onnx:
#    the first loss is ln 3 whatever the data, and the step-0 checkpoint holds exactly the file's
#    values (the seeded initialisation would give neither);
#  - autoddl verify --weights onnx: both runs start from them and agree;
#  - a model whose initializers carry no values, and a built-in model: one-line errors.
# Usage: onnx_weights.sh <autoddl> <protoc> <onnx.proto include dir> <work dir>
set -euo pipefail
autoddl=$1 protoc=$2 inc=$3 w=$4
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$w" && mkdir -p "$w"
fail() { echo "FAIL: $*"; exit 1; }
for m in valued mlp; do
  "$protoc" --encode=onnx.ModelProto -I"$inc" onnx/onnx.proto <"$here/models/$m.txtpb" >"$w/$m.onnx"
done
"$autoddl" run "$w/valued.onnx" --ranks 2 --fix tp=1,pp=1,dp=2 --global-batch 8 --steps 2 \
  --weights onnx --out "$w/run" -- --save "$w/run/ck" --save-initial >"$w/run.log" 2>&1 ||
  { tail -5 "$w/run.log"; fail "run --weights onnx"; }
python3 - "$w/run" <<'PY' || fail "the run did not start from the ONNX values"
import json, math, struct, sys
d = sys.argv[1]
loss = json.load(open(d + "/metrics.json"))["loss"][0]
b = open(d + "/ck/step-0/model.safetensors", "rb").read()
n = struct.unpack("<Q", b[:8])[0]
head = json.loads(b[8:8 + n])
def values(name):
    lo, hi = head[name]["data_offsets"]
    return struct.unpack("<%df" % ((hi - lo) // 4), b[8 + n + lo:8 + n + hi])
w, bias = values("fc.weight"), values("fc.bias")
print("first loss %.7f (ln 3 = %.7f); fc.weight %s...; fc.bias %s" % (loss, math.log(3), w[:4], bias))
sys.exit(0 if abs(loss - math.log(3)) < 1e-6 and set(w) == {0.0} and bias == (1.0, 1.0, 1.0) else 1)
PY
echo "ok: the run starts from the ONNX values"
"$autoddl" plan "$w/valued.onnx" --cluster dgx-a100-hdr --gpus 2 --global-batch 8 \
  --fix tp=1,pp=1,dp=2 -o "$w/plan.json" >/dev/null
"$autoddl" verify "$w/plan.json" --model "$w/valued.onnx" --weights onnx --steps 3 | tail -1 |
  grep -q "verify: OK" || fail "verify --weights onnx"
echo "ok: verify --weights onnx"
expect_error() { # what pattern cmd...
  local what=$1 pattern=$2; shift 2
  if "$@" >"$w/err.txt" 2>&1; then fail "$what: exit status 0"; fi
  grep -q -- "^autoddl: error: .*$pattern" "$w/err.txt" ||
    { cat "$w/err.txt"; fail "$what: no \"$pattern\" in one line"; }
  echo "ok: $what -> $(grep -m1 -- "$pattern" "$w/err.txt")"
}
expect_error "initializers without values" "fc1.weight': holds 0 bytes" \
  "$autoddl" run "$w/mlp.onnx" --ranks 1 --steps 1 --weights onnx
expect_error "a built-in model" "not an ONNX file" \
  "$autoddl" run tiny-gpt --ranks 1 --steps 1 --weights onnx
expect_error "another --weights value" "expected onnx" \
  "$autoddl" run "$w/valued.onnx" --ranks 1 --steps 1 --weights pytorch
