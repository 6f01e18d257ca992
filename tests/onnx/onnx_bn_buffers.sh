#!/usr/bin/env bash
# A batch norm's running statistics (module buffers, docs/checkpoints.md "Buffers") in the
# CPU program's checkpoints, on resnet-mini (3 norms, initializers without values):
#  - a fresh run starts them at PyTorch's 0 and 1 and writes them to model.safetensors under
#    the export's names, and they move;
#  - dp=2 x 2 micro-batches: 2 steps, then a resume to step 4, equal 4 uninterrupted steps
#    bitwise (the whole model.safetensors, buffers included);
#  - a resume under another plan (one rank, 4 micro-batches of the same 2 samples) ends
#    within 1e-5 of them;
#  - --init of a file without the buffers keeps their start; of one with them, takes them;
#  - an export whose running statistics hold values starts from them.
# Usage: onnx_bn_buffers.sh <autoddl> <protoc> <onnx.proto include dir> <work dir>
set -euo pipefail
autoddl=$1 protoc=$2 inc=$3 w=$4
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$w" && mkdir -p "$w"
fail() { echo "FAIL: $*"; exit 1; }
"$protoc" --encode=onnx.ModelProto -I"$inc" onnx/onnx.proto <"$here/models/resnet-mini.txtpb" >"$w/m.onnx"
train() { # out ranks fix flags...
  local out=$1 ranks=$2 fix=$3; shift 3
  "$autoddl" run "$w/m.onnx" --ranks "$ranks" --fix "$fix" --global-batch 8 --out "$w/$out" "$@" \
    >>"$w/$out.log" 2>&1 || { tail -5 "$w/$out.log"; fail "$out: $*"; }
}
dp2=tp=1,pp=1,dp=2,microbatch=2
train full 2 $dp2 --steps 4 -- --save "$w/full/ck" --save-every 2 --save-initial
train cut 2 $dp2 --steps 2 -- --save "$w/cut/ck"
train resumed 2 $dp2 --steps 4 -- --save "$w/cut/ck" --resume "$w/cut/ck/step-2"
cmp -s "$w/full/ck/step-4/model.safetensors" "$w/cut/ck/step-4/model.safetensors" ||
  fail "2 steps and a resume to 4 differ from 4 steps"
echo "ok: 2 steps + resume = 4 steps, bitwise (model.safetensors, buffers included)"
train other 1 tp=1,pp=1,dp=1,microbatch=2 --steps 4 -- --save "$w/other/ck" \
  --resume "$w/full/ck/step-2"
python3 - "$w" <<'PY' || fail "the buffers in the checkpoints"
import json, struct, sys
w = sys.argv[1]
def load(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    head = json.loads(b[8:8 + n])
    out = {}
    for k, v in head.items():
        if k != "__metadata__":
            lo, hi = v["data_offsets"]
            out[k] = struct.unpack("<%df" % ((hi - lo) // 4), b[8 + n + lo:8 + n + hi])
    return out
names = [p + s for p in ("bn1.", "layer1.0.bn1.", "layer1.0.bn2.")
         for s in ("running_mean", "running_var")]
start = load(w + "/full/ck/step-0/model.safetensors")
end = load(w + "/full/ck/step-4/model.safetensors")
other = load(w + "/other/ck/step-4/model.safetensors")
ok = True
for name in names:
    fresh = 0.0 if name.endswith("mean") else 1.0
    moved = max(abs(a - fresh) for a in end[name])
    worst = max(abs(a - b) for a, b in zip(end[name], other[name]))
    good = set(start[name]) == {fresh} and moved > 1e-3 and worst < 1e-5
    ok &= good
    print("%s: start %s, moved up to %.3g, other plan within %.2g%s"
          % (name, fresh, moved, worst, "" if good else "  BAD"))
sys.exit(0 if ok else 1)
PY
echo "ok: buffers start at 0 and 1, move, and resume under another plan"
# --init: a model.safetensors without the buffers (as saved before them) keeps their start.
python3 - "$w/full/ck/step-4/model.safetensors" "$w/nobuf.safetensors" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
head = json.loads(b[8:8 + n])
meta = head.pop("__metadata__", None)
keep, data, at = {}, b"", 0
for k, v in sorted(head.items()):
    if "running" in k:
        continue
    lo, hi = v["data_offsets"]
    keep[k] = dict(v, data_offsets=[at, at + hi - lo])
    data += b[8 + n + lo:8 + n + hi]
    at += hi - lo
if meta:
    keep["__metadata__"] = meta
h = json.dumps(keep).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(h)) + h + data)
PY
train init0 2 $dp2 --steps 1 -- --init "$w/nobuf.safetensors" --save "$w/init0/ck" --save-initial
train init1 2 $dp2 --steps 1 -- --init "$w/full/ck/step-4/model.safetensors" --save "$w/init1/ck" \
  --save-initial
python3 - "$w" <<'PY' || fail "--init and the buffers"
import json, struct, sys
w = sys.argv[1]
def values(path, name):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    lo, hi = json.loads(b[8:8 + n])[name]["data_offsets"]
    return struct.unpack("<%df" % ((hi - lo) // 4), b[8 + n + lo:8 + n + hi])
fresh = values(w + "/init0/ck/step-0/model.safetensors", "bn1.running_var")
taken = values(w + "/init1/ck/step-0/model.safetensors", "bn1.running_var")
saved = values(w + "/full/ck/step-4/model.safetensors", "bn1.running_var")
print("--init without buffers: %s...; with them: %s... (file %s...)" % (fresh[:2], taken[:2], saved[:2]))
sys.exit(0 if set(fresh) == {1.0} and taken == saved else 1)
PY
echo "ok: --init keeps the buffers' start without them, takes them with them"
# The export's own running statistics (bn1's given values; the others still 0 and 1).
sed -e 's|name: "bn1.running_mean" data_type: 1 dims: 8 }|name: "bn1.running_mean" data_type: 1 dims: 8 float_data: [0.5, -0.5, 0.25, 0, 1, 2, 3, 4] }|' \
  -e 's|name: "bn1.running_var" data_type: 1 dims: 8 }|name: "bn1.running_var" data_type: 1 dims: 8 float_data: [2, 3, 4, 5, 6, 7, 8, 9] }|' \
  "$here/models/resnet-mini.txtpb" >"$w/valued.txtpb"
grep -q "float_data" "$w/valued.txtpb" || fail "valued.txtpb: no values put in"
"$protoc" --encode=onnx.ModelProto -I"$inc" onnx/onnx.proto <"$w/valued.txtpb" >"$w/m.onnx"
train valued 1 tp=1,pp=1,dp=1,microbatch=2 --steps 1 -- --save "$w/valued/ck" --save-initial
python3 - "$w/valued/ck/step-0/model.safetensors" <<'PY' || fail "the export's running statistics"
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
head = json.loads(b[8:8 + n])
def values(name):
    lo, hi = head[name]["data_offsets"]
    return struct.unpack("<%df" % ((hi - lo) // 4), b[8 + n + lo:8 + n + hi])
got = values("bn1.running_mean"), values("bn1.running_var"), values("layer1.0.bn1.running_var")
print("bn1.running_mean %s, bn1.running_var %s, layer1.0.bn1.running_var %s" % got)
sys.exit(0 if got == ((0.5, -0.5, 0.25, 0, 1, 2, 3, 4), tuple(range(2, 10)), (1.0,) * 8) else 1)
PY
echo "ok: an export's running statistics are the start"
