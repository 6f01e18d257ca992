#!/usr/bin/env bash
# An fp8 program resumes its checkpoints bit for bit (issue 48; docs/checkpoints.md "FP8 scaling"),
# on a machine with a GPU of compute capability 8.9 or more (exit 77, skipped, elsewhere). tiny-gpt's
# fp8 plan on one GPU, 4 micro-batches a step, every block linear in FP8 (AUTODDL_FP8=all: the size
# rule sends none of tiny-gpt's), the cuBLASLt heuristic's algorithms (AUTODDL_GEMM_AUTOTUNE=0), the
# step a CUDA graph (captured at a run's second step):
#  - two uninterrupted runs of 8 steps, saving at 4 and 8, asynchronously and with --save-sync: the
#    same losses and checkpoint files (the program repeats itself, else no resume can be compared
#    bitwise; the asynchronous save holds the FP8 state of the weights' step), every
#    linear's input and output-gradient metas recorded amaxes (FP8 ran);
#  - a run resumed from step-4 (its first step eager): the losses of steps 4..7 and its step-8 files
#    (weights, AdamW moments, the FP8 scaling state) equal the uninterrupted run's, bit for bit;
#  - step-4 without its FP8 entries (as a bf16 run's): it resumes with one note on stderr, its
#    scaling starts again, so its step-8 state differs (the check above can fail);
#  - an FP8 entry of another shape: one line naming the file and the entry, exit status 1..123,
#    nothing written.
# Usage: cuda_fp8_resume.sh AUTODDL WORKDIR
#    or: cuda_fp8_resume.sh PROJECT WORKDIR  (a project generated elsewhere: GPU machines have no
#        autoddl; `cuda_fp8_resume.sh --stage AUTODDL DIR` writes it to DIR)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/gpu_lib.sh"
stage() { # stage AUTODDL DIR: DIR/plan.json and the CUDA project DIR/p
  mkdir -p "$2"
  "$1" plan tiny-gpt --cluster dgx-h100-ndr --gpus 1 --global-batch 8 --seq 64 --precision fp8 \
    --fix tp=1,pp=1,dp=1,microbatch=2 --no-why -o "$2/plan.json" > /dev/null || fail plan
  "$1" codegen "$2/plan.json" --backend cuda -o "$2/p" > /dev/null || fail codegen
}
if [ "${1:-}" = --stage ]; then # replaces an earlier stage only, never another folder
  # staged: plan.json and p/ only (a folder holding anything else is not)
  { [ ! -e "$3" ] || { [ -f "$3/plan.json" ] && [ -z "$(ls -A "$3" | grep -vx -e plan.json -e p)" ]; }; } ||
    fail "$3 exists and is not a staged project"
  rm -rf "$3" && stage "$2" "$3" && echo "staged $3/p" && exit 0
fi
autoddl=$1 w=$2
require_gpus 1
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
if [ "${cap:-0}" -lt 89 ]; then
  echo "skipped: compute capability ${cap:-?} (FP8 needs 8.9)"
  exit 77
fi
rm -rf "$w" && mkdir -p "$w"
if [ -f "$autoddl/CMakeLists.txt" ]; then
  cp -r "$autoddl" "$w/p" && rm -rf "$w/p/build"
else
  stage "$autoddl" "$w"
fi
grep -q 'program.fp8_weights = {' "$w/p/train.cpp" || fail "not an fp8 program"
cmake -S "$w/p" -B "$w/p/build" -DCMAKE_BUILD_TYPE=Release > "$w/cmake.log" 2>&1 &&
  cmake --build "$w/p/build" -j8 >> "$w/cmake.log" 2>&1 || fail "build (see $w/cmake.log)"
export AUTODDL_FP8=all AUTODDL_GEMM_AUTOTUNE=0
train() { mpirun -np 1 --oversubscribe --allow-run-as-root "$w/p/build/train" "$@"; }
run8() { train --steps 8 --save-every 4 --quiet "$@"; }
run8 --save "$w/ck" --out "$w/full" || fail "uninterrupted run"
run8 --save "$w/ck2" --out "$w/full2" --save-sync || fail "second uninterrupted run"
run8 --save "$w/ck_resumed" --resume "$w/ck/step-4" --out "$w/resumed" || fail "resumed run"
# st.py: safetensors read and written (F32 only), an FP8 entry's fields (Fp8State.h's row).
cat > "$w/st.py" <<'PY'
import json, struct, sys
def read(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    head = json.loads(b[8:8 + n])
    meta = head.pop("__metadata__", {})
    return meta, {k: (v["shape"], b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
                  for k, v in head.items()}
def write(path, meta, tensors):
    head, data = {"__metadata__": meta}, b""
    for k in sorted(tensors):
        shape, raw = tensors[k]
        head[k] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(head).encode()
    h += b" " * (-len(h) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + data)
def recorded(raw):  # each meta's amaxes recorded, of rank 0's row
    row = struct.unpack("<%df" % (len(raw) // 4), raw)
    return [row[1 + 36 * k + 3] for k in range(3)]
PY
python3 - "$w" <<'PY' || fail "resume"
import json, sys
sys.path.insert(0, sys.argv[1])
import st
w = sys.argv[1]
loss = {k: json.load(open(f"{w}/{k}/metrics.json"))["loss"] for k in ("full", "full2", "resumed")}
graph = json.load(open(f"{w}/resumed/metrics.json"))["info"]["cuda_graph"]
print("uninterrupted steps 4..7:", loss["full"][4:])
print("resumed       steps 4..7:", loss["resumed"], "; cuda_graph", graph)
files = lambda ck, step=8: [open(f"{w}/{ck}/step-{step}/{f}.safetensors", "rb").read()
                            for f in ("model", "optimizer")]
if loss["full"] != loss["full2"] or files("ck") != files("ck2") or files("ck", 4) != files("ck2", 4):
    sys.exit("the uninterrupted runs (asynchronous, --save-sync) differ: losses or files")
_, opt = st.read(f"{w}/ck/step-8/optimizer.safetensors")
fp8 = {k: st.recorded(raw) for k, (shape, raw) in opt.items() if k.endswith(".fp8_scaling")}
print("FP8 linears, amaxes recorded by (input, weight, output gradient):", fp8)
# Every linear's weight gradient runs in FP8 (its input's and output gradient's metas record); a
# forward or input gradient with no FP8 algorithm for its epilogue may run in bf16.
if len(fp8) != 8 or any(r[0] < 1 or r[2] < 1 for r in fp8.values()):
    sys.exit("not every block linear ran in FP8")
if loss["resumed"] != loss["full"][4:] or not graph.startswith("on:"):
    sys.exit("the resumed losses differ")
if files("ck_resumed") != files("ck"):
    sys.exit("the resumed run's step-8 checkpoint differs from the uninterrupted run's")
PY
echo "ok: the fp8 program resumes bit for bit (losses, weights, moments, FP8 scaling)"
# Without the FP8 entries (a bf16 run's checkpoint): a note, and the scaling starts again.
mkdir -p "$w/nofp8" && cp -r "$w/ck/step-4" "$w/nofp8/step-4"
python3 - "$w" <<'PY' || fail "strip"
import sys
sys.path.insert(0, sys.argv[1])
import st
f = sys.argv[1] + "/nofp8/step-4/optimizer.safetensors"
meta, t = st.read(f)
st.write(f, meta, {k: v for k, v in t.items() if not k.endswith(".fp8_scaling")})
PY
run8 --save "$w/nofp8" --resume "$w/nofp8/step-4" --out "$w/nofp8_out" 2> "$w/nofp8.err" ||
  { cat "$w/nofp8.err"; fail "resume without FP8 state"; }
[ "$(grep -c 'holds no FP8 scaling state' "$w/nofp8.err")" = 1 ] || { cat "$w/nofp8.err"; fail "no note"; }
cmp -s "$w/nofp8/step-8/optimizer.safetensors" "$w/ck/step-8/optimizer.safetensors" &&
  fail "resumed without the FP8 state, step 8 equals the uninterrupted run's"
echo "ok: without FP8 entries: $(cat "$w/nofp8.err")"
# An FP8 entry of another shape: one line, exit 1..123, nothing written.
mkdir -p "$w/bad" && cp -r "$w/ck/step-4" "$w/bad/step-4"
python3 - "$w" <<'PY' || fail "reshape"
import sys
sys.path.insert(0, sys.argv[1])
import st
f = sys.argv[1] + "/bad/step-4/optimizer.safetensors"
meta, t = st.read(f)
name = sorted(k for k in t if k.endswith(".fp8_scaling"))[0]
shape, raw = t[name]
t[name] = ([shape[0], shape[1] - 1], raw[:-4 * shape[0]])
st.write(f, meta, t)
PY
sum=$(md5sum "$w/bad/step-4/optimizer.safetensors")
run8 --save "$w/bad" --resume "$w/bad/step-4" --out "$w/bad_out" > "$w/bad.log" 2>&1
rc=$?
{ [ $rc -ge 1 ] && [ $rc -le 123 ]; } || { cat "$w/bad.log"; fail "bad shape: exit status $rc"; }
grep -q 'optimizer.safetensors: tensor "transformer.h.0.attn.c_attn.weight.fp8_scaling" has shape \[1,108\]' "$w/bad.log" ||
  { cat "$w/bad.log"; fail "bad shape: no one-line error naming the file and the entry"; }
[ "$(md5sum "$w/bad/step-4/optimizer.safetensors")" = "$sum" ] && [ ! -e "$w/bad/step-8" ] ||
  fail "bad shape: the checkpoint changed"
echo "ok: $(grep -m1 'fp8_scaling' "$w/bad.log")"
