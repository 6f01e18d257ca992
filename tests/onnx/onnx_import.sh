#!/usr/bin/env bash
# ONNX import (issue 25): the text-format models of models/ are encoded with
# protoc against Debian's onnx.proto, then imported by the real CLI. Good
# models: parameter counts and op kinds; bad ones: exit 1, one line naming the
# file, the node and the cause.
# Usage: onnx_import.sh <autoddl> <protoc> <onnx.proto include dir> <work dir>
set -euo pipefail
autoddl=$1 protoc=$2 inc=$3 work=$4
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"
for t in "$here"/models/*.txtpb; do
  n=$(basename "$t" .txtpb)
  "$protoc" --encode=onnx.ModelProto -I"$inc" onnx/onnx.proto <"$t" >"$work/$n.onnx"
done
# external.bin: int64 [0,3,4] then 20 float32.
python3 -c 'import struct,sys; open(sys.argv[1],"wb").write(struct.pack("<3q",0,3,4)+struct.pack("<20f",*range(20)))' "$work/external.bin"

fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

params() { # model expected-count args...
  local m=$1 want=$2; shift 2
  local got
  got=$("$autoddl" import "$work/$m.onnx" --summary "$@" | awk '/^parameters /{print $2; exit}')
  [ "$got" = "$want" ] && echo "ok: $m: $got parameters" || fail "$m: $got parameters, expected $want"
}
kinds() { # model expected-kinds args...
  local m=$1 want=$2; shift 2
  local got
  got=$("$autoddl" import "$work/$m.onnx" "$@" | grep -o 'sbp\.[a-z_0-9]*' | sort | uniq -c | awk '{printf "%s%s=%s", sep, $2, $1; sep=","}')
  [ "$got" = "$want" ] && echo "ok: $m: $got" || fail "$m: op kinds $got, expected $want"
}
params mlp 874 --batch 4
kinds mlp "sbp.cross_entropy=1,sbp.linear=2,sbp.parameter=4,sbp.relu=1"
params decoder 536 --batch 2 --seq 4
kinds decoder "sbp.add=1,sbp.cross_entropy=1,sbp.embedding=1,sbp.gelu=1,sbp.layernorm=1,sbp.linear=5,sbp.matmul=2,sbp.parameter=9,sbp.reshape=4,sbp.softmax=1,sbp.transpose=4" --seq 4
params cnn 210 --batch 3
kinds cnn "sbp.conv2d=1,sbp.cross_entropy=1,sbp.flatten=1,sbp.linear=1,sbp.parameter=4,sbp.pool2d=2,sbp.relu=1"
params external 20
params gelu 212
kinds gelu "sbp.cross_entropy=1,sbp.gelu=2,sbp.linear=2,sbp.parameter=4"
ir=$("$autoddl" import "$work/gelu.onnx")
[[ "$ir" == *'approximate = "none"'*'approximate = "tanh"'* ]] || fail "gelu: not an erf then a tanh GELU"
params unordered 0
# Dropout as the dynamo exporter writes it in eval mode (a constant false training_mode): the
# identity. A true one (train mode) is a primitive (the programs' counter-based mask); one
# computed from the inputs is refused naming the node.
params dropout 874 --batch 4
kinds dropout "sbp.cross_entropy=1,sbp.linear=2,sbp.parameter=4,sbp.relu=1" --batch 4
# Split (GPT-2's qkv split in a default dynamo export): a primitive Slice per output.
params split 714 --batch 4
kinds split "sbp.constant=6,sbp.cross_entropy=1,sbp.linear=2,sbp.mul=1,sbp.parameter=4,sbp.primitive=3" --batch 4
sed 's/i: 2 } }$/i: 3 } }/' "$here/models/split.txtpb" |
  "$protoc" --encode=onnx.ModelProto -I"$inc" onnx/onnx.proto >"$work/split-three.onnx"
sed 's/int32_data: 0/int32_data: 1/' "$here/models/dropout.txtpb" |
  "$protoc" --encode=onnx.ModelProto -I"$inc" onnx/onnx.proto >"$work/dropout-train.onnx"
sed 's/input: "val_1"/input: "x"/' "$here/models/dropout.txtpb" |
  "$protoc" --encode=onnx.ModelProto -I"$inc" onnx/onnx.proto >"$work/dropout-computed.onnx"
# GPT-2's learned positions (Gather of wpe at Range(0,T), added) and a head
# tied to the token table through a Transpose: one parameter each.
params positions 384 --batch 2 --seq 5
kinds positions "sbp.cross_entropy=1,sbp.embedding=1,sbp.linear=1,sbp.parameter=2,sbp.positional=1" --batch 2 --seq 5
# A dynamo export's Linear (MatMul of a transposed [out,in] weight) and its
# run-time reshape targets (Shape, Constant value_ints, Concat) folded.
params dynamo 82 --batch 2 --seq 3
kinds dynamo "sbp.cross_entropy=1,sbp.linear=2,sbp.parameter=3,sbp.reshape=2" --batch 2 --seq 3
ir=$("$autoddl" import "$work/dynamo.onnx" --batch 2 --seq 3)
[[ "$ir" == *'shape = array<i64: 2, 3, 2, 2>'* && "$ir" == *'parameter "fc1.weight"'*'tensor<4x8xf32>'* && "$ir" == *'transpose_weight = true'* ]] ||
  fail "dynamo: reshape target not [2,3,2,2] or fc1.weight not [4,8] transposed"
# The LM loss's targets are [batch, seq] ids; the classifier's [batch].
ir=$("$autoddl" import "$work/decoder.onnx" --batch 2 --seq 4)
[[ "$ir" == *'tensor<2x4xi32> loc("targets")'* ]] || fail "decoder: targets are not [2,4] ids"
ir=$("$autoddl" import "$work/cnn.onnx" --batch 3)
[[ "$ir" == *'tensor<3xi32> loc("labels")'* && "$ir" != *'"targets"'* ]] || fail "cnn: the exported loss's labels are not the input"
# Primitives no pattern recognises run (docs/onnx-lowering.md "Primitives that run"); one that
# mixes the samples (a mean over the batch) runs whole but not on a part of the batch: codegen
# refuses dp=2 naming the op and the cause, and generates the dp=1 program.
params mixing 874 --batch 4
kinds mixing "sbp.cross_entropy=1,sbp.linear=2,sbp.parameter=4,sbp.primitive=2" --batch 4
# A primitive that mixes samples runs on the whole batch: the planner keeps dp=1 and one
# micro-batch, and refuses a --fix that splits the batch (codegen refuses such a plan too).
"$autoddl" plan "$work/mixing.onnx" --cluster h200x2-nvlink --gpus 1 --global-batch 4 \
  --fix dp=1,microbatch=4 -o "$work/mixing-dp1.json" >/dev/null
if out=$("$autoddl" plan "$work/mixing.onnx" --cluster h200x2-nvlink --gpus 2 --global-batch 4 \
  --fix dp=2,microbatch=2 -o "$work/mixing-dp2.json" 2>&1); then
  fail "mixing: dp=2 was planned"
else
  case "$out" in
  *"op /centre/ReduceMean (ReduceMean): it reduces over the batch dimension"*"--fix dp=1,microbatch=4"*) echo "ok: mixing: dp=2: $out" ;;
  *) fail "mixing: dp=2: $out" ;;
  esac
fi
"$autoddl" plan "$work/mixing.onnx" --cluster h200x2-nvlink --gpus 2 --global-batch 4 \
  -o "$work/mixing-any.json" >/dev/null || fail "mixing: no plan on 2 GPUs"
python3 -c 'import json, sys; k = json.load(open(sys.argv[1]))["mesh"]; sys.exit(k.get("dp", 1) != 1)' \
  "$work/mixing-any.json" && echo "ok: mixing: the planner keeps dp=1" ||
  fail "mixing: the planner chose dp>1"
"$autoddl" codegen "$work/mixing-dp1.json" --backend cpu -o "$work/mixing-dp1" >/dev/null &&
  grep -q "primitive_forward" "$work/mixing-dp1/train.cpp" && echo "ok: mixing: dp=1 runs its primitives" ||
  fail "mixing: dp=1: no program running its primitives"
# A ResNet in miniature (training-mode BatchNormalization, a padded max pool,
# the global pool): the running statistics are buffers (constants), not
# parameters (2 per norm); statistics per
# micro-batch make the micro-batch size part of the function (planned below).
params resnet-mini 2,466 --batch 4
kinds resnet-mini "sbp.add=1,sbp.constant=6,sbp.conv2d=3,sbp.cross_entropy=1,sbp.flatten=1,sbp.linear=1,sbp.parameter=11,sbp.primitive=5,sbp.relu=3" --batch 4
# Without its loss, as dynamo writes a train-mode module: the running statistics
# are graph outputs beside the logits (not results); a MaxPool with auto_pad.
params bn-outputs 166 --batch 2
kinds bn-outputs "sbp.constant=2,sbp.conv2d=1,sbp.cross_entropy=1,sbp.flatten=1,sbp.linear=1,sbp.parameter=5,sbp.primitive=3,sbp.relu=1" --batch 2
# Batch norms normalise per micro-batch: dp and accumulation split the batch in
# micro-batches of a size fixed before the search (a --fix microbatch kept; for
# --fix dp, global/dp as DDP's per-device batch; else the global batch), said
# in a note naming the first norm.
dp_mb() { python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d["mesh"]["dp"], d["microbatch"])' "$1"; }
resnet_plan() { # name expected-dp expected-microbatch plan-args...
  local n=$1 dp=$2 mb=$3; shift 3
  local out
  out=$("$autoddl" plan "$work/resnet-mini.onnx" --cluster dgx-h100-ndr --global-batch 8 \
    -o "$work/resnet-$n.json" "$@" 2>&1 >/dev/null) || { fail "resnet-mini: $n: $out"; return; }
  [[ "$out" == *"op /bn1/BatchNormalization (BatchNormalization): it normalises with its micro-batch's statistics"*"micro-batches of $mb samples"* ]] ||
    fail "resnet-mini: $n: no note of the statistics' micro-batch: $out"
  local got
  got=$(dp_mb "$work/resnet-$n.json")
  [ "$got" = "$dp $mb" ] && echo "ok: resnet-mini: $n: dp=$dp, micro-batch $mb" ||
    fail "resnet-mini: $n: dp, micro-batch = $got, expected $dp $mb"
}
resnet_plan fix-dp2 2 4 --gpus 2 --fix dp=2
resnet_plan fix-mb2 2 2 --gpus 2 --fix tp=1,pp=1,microbatch=2
resnet_plan free 1 8 --gpus 2
# Its 3 ReLUs follow a batch norm or the residual add: priced inside them, as the CUDA program
# runs them (ProgramDecisions.h fusedProducerRelu), not as passes of their own.
relu_s=$(python3 -c 'import json,sys; k=json.load(open(sys.argv[1]))["predicted"]["op_kinds_s"]
r=k.get("relu", {}); print(r.get("forward", 0) + r.get("backward", 0))' "$work/resnet-free.json")
[ "$relu_s" = "0" ] || [ "$relu_s" = "0.0" ] && echo "ok: resnet-mini: ReLUs priced in their producers" ||
  fail "resnet-mini: ReLUs priced at $relu_s s of their own"
# Its residual add runs in the last batch norm's normalise pass (ProgramDecisions.h
# residualNormOperand): priced with the norm, no forward of its own.
add_s=$(python3 -c 'import json,sys; k=json.load(open(sys.argv[1]))["predicted"]["op_kinds_s"]
print(k.get("add", {}).get("forward", 0))' "$work/resnet-free.json")
[ "$add_s" = "0" ] || [ "$add_s" = "0.0" ] && echo "ok: resnet-mini: the residual add priced in its norm" ||
  fail "resnet-mini: the residual add's forward priced at $add_s s of its own"
# A static batch of 4 (torch.onnx.export's default, no dynamic axes) is the statistics' micro-batch.
sed 's/dim_param: "N"/dim_value: 4/g' "$here/models/resnet-mini.txtpb" |
  "$protoc" --encode=onnx.ModelProto -I"$inc" onnx/onnx.proto >"$work/resnet-static.onnx"
out=$("$autoddl" plan "$work/resnet-static.onnx" --cluster dgx-h100-ndr --gpus 2 --global-batch 8 \
  --fix tp=1,pp=1 -o "$work/resnet-static.json" 2>&1 >/dev/null) || fail "resnet-static: $out"
[[ "$out" == *"micro-batches of 4 samples (the export's static batch)"* && "$(dp_mb "$work/resnet-static.json")" == "2 4" ]] &&
  echo "ok: resnet-static: dp=2, micro-batch 4" || fail "resnet-static: $(dp_mb "$work/resnet-static.json"): $out"
if out=$("$autoddl" plan "$work/resnet-mini.onnx" --cluster dgx-h100-ndr --gpus 3 --global-batch 8 \
  --fix dp=3 -o "$work/resnet-dp3.json" 2>&1); then
  fail "resnet-mini: dp=3 of a batch of 8 was planned"
fi
case $out in
*"op /bn1/BatchNormalization (BatchNormalization)"*"--fix dp=3 does not divide --global-batch 8"*) echo "ok: resnet-mini: dp=3: $out" ;;
*) fail "resnet-mini: dp=3: $out" ;;
esac
# torchvision's resnet18 and resnet50 as the TorchScript exporter writes them in
# training mode (torchvision_resnet.py; shapes, no values): torchvision's parameter
# counts; resnet50 plans on one GPU and its CUDA program runs 53 batch norms, the
# padded max pool and the global pool as primitives.
for d in 18 50; do
  python3 "$here/torchvision_resnet.py" $d |
    "$protoc" --encode=onnx.ModelProto -I"$inc" onnx/onnx.proto >"$work/resnet$d.onnx"
done
params resnet18 11,689,512
params resnet50 25,557,032
"$autoddl" plan "$work/resnet50.onnx" --cluster dgx-h100-ndr --gpus 1 --global-batch 64 --no-why \
  -o "$work/resnet50.json" >/dev/null || fail "resnet50: no plan on 1 GPU"
"$autoddl" codegen "$work/resnet50.json" --backend cuda -o "$work/resnet50" >/dev/null ||
  fail "resnet50: no CUDA program"
# The 53 norms' forwards also write their moments (running statistics); 33 run the ReLU after
# them in their passes (codegen's planProducerReluFusion), 16 the residual add and its ReLU
# (planResidualNormFusion: batchnorm_add_forward at the add's step).
n=$(grep -c "autoddl::rt::primitive_forward\|autoddl::rt::batchnorm_forward_moments\|autoddl::rt::batchnorm_relu_forward" \
  "$work/resnet50/train.cpp" || true)
a=$(grep -c "autoddl::rt::batchnorm_add_forward(prim_.*primitive_buffer(.*, true); }" \
  "$work/resnet50/train.cpp" || true)
[ "$n/$a" = 39/16 ] && echo "ok: resnet50: cuda program, $((n + a)) primitives ($a with the residual add)" ||
  fail "resnet50: $n primitives and $a norms with the residual add on cuda, expected 39/16"

bad() { # file expected-substring args...
  local f=$1 want=$2; shift 2
  local out rc=0
  out=$("$autoddl" import "$f" "$@" 2>&1 >/dev/null) || rc=$?
  if [ "$rc" -lt 1 ] || [ "$rc" -gt 123 ]; then fail "$f: exit $rc"; return; fi
  [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "$f: not one line: $out"
  case "$out" in
  *"$f"*"$want"*) echo "ok: $(basename "$f"): $out" ;;
  *) fail "$f: expected '$want' after the file name, got: $out" ;;
  esac
}
bad "$work/bad-cycle.onnx" "node 'a' (Relu): the graph has a cycle"
bad "$work/bad-undefined.onnx" "node 'a' (Relu): input 'nowhere' is not defined"
bad "$work/bad-unsupported.onnx" "node 'rnn' (LSTM): op 'LSTM' is not supported"
bad "$work/bad-version.onnx" "node 'act' (Gelu): op 'Gelu' does not exist in opset 17"
bad "$work/bad-fold.onnx" "node 'cut' (Slice): evaluating it on constants: a Slice step is 0"
bad "$work/bad-opset.onnx" "opset 30 is not supported"
bad "$work/bad-arity.onnx" "node 'sum' (Add): expected at least 2 inputs"
bad "$work/bad-no-output.onnx" "node '/act2/Tanh' (Tanh): expected an output"
bad "$work/decoder.onnx" "input 'input_ids': dimension 1 ('sequence') is dynamic; pin it with --seq"
head -c 150 "$work/decoder.onnx" >"$work/truncated.onnx"
bad "$work/truncated.onnx" "not an ONNX model"
printf 'hello, this is not a model\n' >"$work/text.onnx"
bad "$work/text.onnx" "not an ONNX model"
: >"$work/empty.onnx"
bad "$work/empty.onnx" "not an ONNX model"
mkdir -p "$work/dir.onnx" && bad "$work/dir.onnx" "not a regular file"
sed 's/value: "external.bin"/value: "..\/external.bin"/' "$here/models/external.txtpb" |
  "$protoc" --encode=onnx.ModelProto -I"$inc" onnx/onnx.proto >"$work/escape.onnx"
bad "$work/escape.onnx" "is not a file beside the model"
head -c 50 "$work/external.bin" >"$work/short.bin"
sed 's/value: "external.bin"/value: "short.bin"/' "$here/models/external.txtpb" |
  "$protoc" --encode=onnx.ModelProto -I"$inc" onnx/onnx.proto >"$work/short.onnx"
bad "$work/short.onnx" "is shorter than its offset and length"
bad "$work/unordered.onnx" "input 'x' has a static batch of 2, not 3" --batch 3
bad "$work/split-three.onnx" "node 'node_Split_1' (Split): the split sizes do not make up the axis in 2 parts" --batch 4
kinds dropout-train "sbp.constant=2,sbp.cross_entropy=1,sbp.linear=2,sbp.parameter=4,sbp.primitive=1,sbp.relu=1" --batch 4
bad "$work/dropout-computed.onnx" "node 'node_native_dropout' (Dropout): its training_mode 'x' is computed from the inputs" --batch 4

[ "$fails" -eq 0 ] && echo "onnx_import: all passed" || { echo "onnx_import: $fails failed"; exit 1; }
