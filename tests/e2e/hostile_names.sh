#!/usr/bin/env bash
# Input text cannot steer generated sources (issue 49, docs/codegen.md "Input text in generated
# sources"). One tiny token model whose model, description, parameter, tensor and op names hold
# quotes, backslashes, line breaks, "*/", "/*", "??/" trigraphs, "#error" lines, a 1 MB name, a
# C++ keyword and two names that mangle alike ("a.b", "a_b"), through import -> plan -> codegen:
# - no line of any generated file is a preprocessor line the payload wrote, every byte of
#   train.cpp is printable ASCII, and a line holding the payload is a comment or a string literal;
# - cpu: the project builds (AUTODDL_CACHE) and trains one step; the checkpoint's parameter names
#   and metrics.json's model name are the model's, byte for byte;
# - cuda: train.cpp compiles against the runtime headers (skipped without CUDA headers or MPI);
# - a NUL in a name is refused at import, one line naming it;
# - an ONNX model (protoc-encoded text format) whose names hold control bytes, non-ASCII UTF-8 and
#   the payload: its cpu train.cpp compiles (syntax only); a name that is not UTF-8 is refused.
# Usage: hostile_names.sh AUTODDL PROTOC ONNX_PROTO_INCLUDE WORKDIR
set -euo pipefail
autoddl=$1 protoc=$2 inc=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
cd "$work"
python3 - hostile.json nul.json <<'PY'
import json, sys
B, T, V, C = 2, 8, 32, 16
P = "#error INJECTED"
def evil(tag):
    return f'{tag}"\\\n{P}_{tag}\n// */ /* ??/ ??= \\'
wte, w0, w1 = evil("wte"), "blk\n" + P + "_L.0.w", "blk\n" + P + "_L.1.w"
head = "L" * (1 << 20) + "\n" + P + "_LONG"  # 1 MB
logits, loss = "d_x\n" + P, "loss\n" + P
model = {
  "name": evil("model"),
  "description": "*/\n" + P + "_DESC\n/*",
  "batch": B, "seq": T,
  "graph": {
    "inputs": [{"name": "input_ids", "shape": [B, T], "dtype": "i32"},
               {"name": "targets", "shape": [B, T], "dtype": "i32"}],
    "params": [{"name": wte, "shape": [V, C]}, {"name": w0, "shape": [C, C]},
               {"name": w1, "shape": [C, C]}, {"name": head, "shape": [V, C]}],
    "ops": [
      {"op": "embedding", "name": evil("emb"), "inputs": ["input_ids", wte], "outputs": ["a.b"]},
      {"op": "linear", "name": "l0\t" + P, "inputs": ["a.b", w0], "outputs": ["a_b"], "layer": 0},
      {"op": "linear", "name": "l1*/", "inputs": ["a_b", w1], "outputs": ["int"], "layer": 1},
      {"op": "linear", "name": "head\n" + P, "inputs": ["int", head], "outputs": [logits],
       "attrs": {"transpose_weight": True}},
      {"op": "cross_entropy", "name": "loss??/", "inputs": [logits, "targets"], "outputs": [loss]}],
    "loss": loss}}
json.dump(model, open(sys.argv[1], "w"))
model["graph"]["ops"][1]["name"] = "l0\u0000" + P
json.dump(model, open(sys.argv[2], "w"))
PY

fail() { echo "FAIL: $*"; exit 1; }
# Every generated file: no preprocessor line of the payload's; train.cpp printable ASCII only, the
# payload only in comments and string literals.
check_files() { # project dir
  python3 - "$1" <<'PY'
import os, re, sys
root = sys.argv[1]
for f in ["train.cpp", "CMakeLists.txt"]:
    data = open(os.path.join(root, f), "rb").read()
    bad = [b for b in set(data) if not (0x20 <= b < 0x7f or b == 0x0a)]
    if bad:
        sys.exit(f"{f}: bytes outside printable ASCII: {sorted(bad)[:8]}")
    for n, line in enumerate(data.decode().split("\n"), 1):
        if re.match(r"\s*#\s*error", line) or "??/" in line or "??=" in line:
            sys.exit(f"{f}:{n}: the payload as code: {line[:120]}")
        if "#error" in line:
            s = line.lstrip()
            if not (s.startswith("//") or s.startswith('"') or line.find('"') < line.find("#error")):
                sys.exit(f"{f}:{n}: the payload outside comments and literals: {line[:120]}")
print(f"{root}: no input text as code")
PY
}

# `autoddl import MODEL` refuses it: one line holding CAUSE, exit 1-123.
refused() { # model cause
  local msg rc=0
  msg=$("$autoddl" import "$1" 2>&1) || rc=$?
  { [ "$rc" -ge 1 ] && [ "$rc" -le 123 ] && [ "$(printf '%s\n' "$msg" | wc -l)" = 1 ] &&
    grep -q "$2" <<<"$msg"; } || fail "$1: exit $rc, \"$msg\""
  echo "ok: refused: $msg"
}
refused nul.json "holds a NUL byte"

"$autoddl" plan hostile.json --cluster dgx-h100-ndr --gpus 2 --global-batch 4 --no-why \
  --fix tp=1,pp=1,dp=2 -o plan.json >/dev/null
"$autoddl" codegen plan.json --backend cpu -o cpu --model hostile.json >/dev/null
check_files cpu
grep -q "LayerParams_" cpu/train.cpp || fail "the two layers' weights are not a layer table"
"$autoddl" run plan.json --backend cpu --steps 1 --out run --model hostile.json -- --quiet \
  --save "$work/ck" >run.log 2>&1 || { cat run.log; fail "the cpu program did not build or run"; }
python3 - hostile.json ck/step-1/model.safetensors run/metrics.json <<'PY'
import json, struct, sys
model = json.load(open(sys.argv[1]))
raw = open(sys.argv[2], "rb").read()
header = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
want = sorted(p["name"] for p in model["graph"]["params"])
got = sorted(k for k in header if k != "__metadata__")
if got != want:
    sys.exit(f"checkpoint names {[g[:40] for g in got]} != model's {[w[:40] for w in want]}")
if header["__metadata__"]["model"] != model["name"]:
    sys.exit("the checkpoint's model name is not the model's")
if json.load(open(sys.argv[3]))["info"]["model"] != model["name"]:
    sys.exit("metrics.json's model name is not the model's")
print("ok: parameter and model names round-trip through the program")
PY

# K-FAC: the layers' names are literals of the program's layer table (syntax only).
mpi_inc=$(mpicc --showme:incdirs 2>/dev/null | cut -d' ' -f1 || true)
syntax() { # project [include dirs...]
  local d=$1
  shift
  c++ -std=c++17 -fsyntax-only -Wall -Wextra -Werror -Wno-unused-parameter -DOMPI_SKIP_MPICXX=1 \
    -I "$d/runtime" "${@/#/-I}" ${mpi_inc:+-I "$mpi_inc"} "$d/train.cpp"
  echo "ok: $d/train.cpp compiles"
}
"$autoddl" plan hostile.json --optimizer kfac --cluster dgx-h100-ndr --gpus 2 --global-batch 4 \
  --no-why --fix tp=1,pp=1,dp=2 -o kfac_plan.json >/dev/null
"$autoddl" codegen kfac_plan.json --backend cpu -o kfac --model hostile.json >/dev/null
check_files kfac
syntax kfac

# CUDA: the generated programs compile (as cuda_codegen_compiles.sh checks them).
cuda_inc=${CUDA_HOME:-/usr/local/cuda}/include
if [ -f "$cuda_inc/cuda_runtime.h" ] && [ -f "$cuda_inc/nccl.h" ] && [ -n "$mpi_inc" ]; then
  for p in plan kfac_plan; do
    "$autoddl" codegen $p.json --backend cuda -o cuda_$p --model hostile.json >/dev/null
    check_files cuda_$p
    syntax cuda_$p "$cuda_inc"
  done
else
  echo "skipped: the cuda check (no CUDA/NCCL headers in $cuda_inc or no MPI)"
fi

# ONNX: names with bytes JSON cannot carry (control bytes, a trigraph, non-ASCII UTF-8), and a
# name that is not UTF-8, which is refused at import (plans and checkpoints are JSON).
onnx_model() { # name-byte-escape out
  cat >"$2.txtpb" <<TXT
ir_version: 8
opset_import { domain: "" version: 17 }
graph {
  name: "evil\\303\\251\\n#error INJECTED_G"
  node { name: "/fc1$1\\n#error INJECTED_N */" op_type: "Gemm" input: "x" input: "fc1.w\\033\\n#error INJECTED_W" input: "fc1.b??/" output: "h\\342\\200\\256\\n#error INJECTED_H" attribute { name: "transB" type: INT i: 1 } }
  node { name: "act" op_type: "Relu" input: "h\\342\\200\\256\\n#error INJECTED_H" output: "a.b" }
  node { name: "fc2" op_type: "Gemm" input: "a.b" input: "a_b" input: "fc2.b" output: "logits" attribute { name: "transB" type: INT i: 1 } }
  initializer { name: "fc1.w\\033\\n#error INJECTED_W" data_type: 1 dims: 8 dims: 4 }
  initializer { name: "fc1.b??/" data_type: 1 dims: 8 }
  initializer { name: "a_b" data_type: 1 dims: 3 dims: 8 }
  initializer { name: "fc2.b" data_type: 1 dims: 3 }
  input { name: "x" type { tensor_type { elem_type: 1 shape { dim { dim_param: "batch" } dim { dim_value: 4 } } } } }
  output { name: "logits" type { tensor_type { elem_type: 1 shape { dim { dim_param: "batch" } dim { dim_value: 3 } } } } }
}
TXT
  "$protoc" --encode=onnx.ModelProto -I"$inc" onnx/onnx.proto <"$2.txtpb" >"$2.onnx" 2>/dev/null
}
onnx_model '\360\237\230\200' evil
onnx_model '\377\376' notutf8
refused notutf8.onnx "not UTF-8"
"$autoddl" plan evil.onnx --cluster dgx-h100-ndr --gpus 2 --global-batch 4 --no-why \
  --fix tp=1,pp=1,dp=2 -o onnx_plan.json >/dev/null
"$autoddl" codegen onnx_plan.json --backend cpu -o onnx >/dev/null
check_files onnx
syntax onnx
