#!/usr/bin/env bash
# Exports made as users make them (tests/onnx/export_user_models.py on the GPU machine, torch
# 2.11: exporters' defaults, a static batch, eval and train mode; tests/onnx/exports/users.json
# holds PyTorch's counts). Each imports with PyTorch's module.parameters() count (the dynamo
# optimizer's folded causal mask and rotary tables are buffers, its merged norm scales untied);
# a static batch is every plan's micro-batch on 1 and 2 GPUs, and a global batch that is not a
# multiple of it is refused in one line naming the input; codegen accepts the plans; the
# train-mode exports' Dropout runs (its program draws the mask, dropping about the ratio). With TRAIN=1 (label e2e), the
# static-batch exports train under dp, tp and pp (the default dynamo export's layers from its
# name scopes) as on one rank from the export's values (autoddl verify --weights onnx).
# Usage: exports_users.sh AUTODDL EXPORTS_DIR WORK_DIR
set -euo pipefail
autoddl=$1 dir=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
torch() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]]["parameters"])' "$dir/users.json" "$1"; }
knob() { python3 -c 'import json, sys; p = json.load(open(sys.argv[1])); print(p["mesh"].get(sys.argv[2], p.get(sys.argv[2])))' "$1" "$2"; }

if [ "${TRAIN:-0}" = 1 ]; then
  # The train-mode exports drop with the programs' counter-based mask, the same elements on
  # 2 ranks as on one (each keyed by its global sample).
  for run in "static-mlp-ts 2 tp=1,pp=1,dp=2" "static-llama 8 tp=2,pp=2,dp=2" \
    "static-gpt 4 tp=1,pp=2,dp=2" "train-mlp-ts 2 tp=1,pp=1,dp=2" \
    "train-mlp-dynamo 2 tp=1,pp=1,dp=2"; do
    set -- $run
    m=$1
    "$autoddl" plan "$dir/$m.onnx" --cluster dgx-a100-hdr --gpus "$2" --global-batch 8 --fix "$3" \
      -o "$work/$m.json" >/dev/null
    # --weights onnx: the untied copies of a merged norm scale start from its values.
    "$autoddl" verify "$work/$m.json" --model "$dir/$m.onnx" --weights onnx --keep "$work/$m" ||
      fail "$m: verify"
  done
  # The same MLP (same names, so the same initial weights and data) with and without its
  # Dropout: the train-mode export's first loss differs, so its program drops.
  first() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["loss"][0])' "$work/$1/plan/metrics.json"; }
  a=$(first static-mlp-ts) b=$(first train-mlp-ts)
  [ "$a" != "$b" ] && echo "ok: the first loss $b with Dropout, $a without" ||
    fail "train-mlp-ts: the first loss $b equals the Dropout-free $a"
  [ "$fails" -eq 0 ] && echo "exports_users (train): all passed" || exit 1
  exit 0
fi

for m in static-mlp-ts static-mlp-dynamo static-llama static-cnn-dynamo train-mlp-ts train-mlp-dynamo; do
  got=$("$autoddl" import "$dir/$m.onnx" --summary --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["params"])')
  want=$(torch "$m")
  [ "$got" = "$want" ] && echo "ok: $m: $got parameters, as PyTorch" ||
    fail "$m: $got parameters, PyTorch counts $want"
done
ir=$("$autoddl" import "$dir/static-llama.onnx")
for buffer in unsqueeze_16 unsqueeze_17 val_204; do
  [[ "$ir" != *"parameter \"$buffer\""* ]] || fail "static-llama: buffer $buffer is a parameter"
done
[[ "$ir" == *'parameter "lm.model.layers.0.input_layernorm.weight#5"'* ]] ||
  fail "static-llama: the merged norm scale is not untied into 5"
# Its projections are unnamed (val_N): the layers come from the nodes' name scopes.
for m in static-llama static-gpt; do
  layers=$("$autoddl" import "$dir/$m.onnx" --summary | awk '/^layers /{print $2}')
  [ "$layers" = 2 ] && echo "ok: $m: 2 layers" || fail "$m: $layers layers, expected 2"
done

# GPT-2 (tied head) by dynamo's default optimizer: the file holds 27,200 of PyTorch's 28,544
# parameters (wpe folded to its 8 rows read: -1024 +256; the 8 zero Conv1D biases removed: -576).
# All of them import: the head reads the token table transposed (the optimizer's folded
# transpose is tied back), the five LayerNorms' merged scale and bias are untied.
got=$("$autoddl" import "$dir/static-gpt.onnx" --summary --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["params"])')
want=$(($(torch static-gpt) - 1024 + 256 - 576))
[ "$got" = "$want" ] && echo "ok: static-gpt: $got parameters, all the file holds" ||
  fail "static-gpt: $got parameters, the file holds $want"
ir=$("$autoddl" import "$dir/static-gpt.onnx")
[[ "$ir" != *'parameter "val_278"'* && "$ir" == *'parameter "lm.transformer.h.0.ln_1.bias#5"'* ]] ||
  fail "static-gpt: the head is not tied to the table or the norms are not untied"

# The static batch (4 for the MLPs, 2 for Llama) is the micro-batch, on any number of GPUs.
plan() { "$autoddl" plan "$dir/$1.onnx" --cluster dgx-h100-ndr --gpus "$2" --global-batch "$3" -o "$work/$1-$2-$3.json" >/dev/null; }
for case in "static-mlp-ts 1 4 4 1" "static-mlp-ts 1 8 4 2" "static-mlp-dynamo 2 8 4 -" \
  "static-llama 1 2 2 1" "static-llama 2 4 2 -" "static-gpt 2 4 2 -" "static-cnn-dynamo 2 8 4 -"; do
  set -- $case
  if ! plan "$1" "$2" "$3"; then fail "$1: no plan on $2 GPUs at global batch $3"; continue; fi
  p="$work/$1-$2-$3.json"
  mb=$(knob "$p" microbatch) n=$(knob "$p" microbatches) dp=$(knob "$p" dp)
  [ "$mb" = "$4" ] || fail "$1: micro-batch $mb on $2 GPUs, expected the static batch $4"
  [ "$5" = - ] || [ "$n" = "$5" ] || fail "$1: $n micro-batches, expected $5"
  [ $((mb * n * dp)) = "$3" ] || fail "$1: $mb x $n x dp $dp is not the global batch $3"
  "$autoddl" codegen "$p" --backend cpu -o "$work/$1-$2-$3-cpu" >/dev/null ||
    fail "$1: codegen cpu refused the plan"
  # The CUDA backend runs the primitives, classifiers and CNNs (kernels/Primitive.h, Conv.h).
  out=$("$autoddl" codegen "$p" --backend cuda -o "$work/$1-$2-$3-cuda" 2>&1 >/dev/null) ||
    fail "$1: codegen cuda: $out"
  echo "ok: $1 on $2 GPUs at global batch $3: micro-batch $mb x $n x dp $dp; codegen cpu, cuda"
done

refused() { # expected-substring command...
  local want=$1 out rc=0
  shift
  out=$("$@" 2>&1 >/dev/null) || rc=$?
  if [ "$rc" -lt 1 ] || [ "$rc" -gt 123 ]; then fail "$*: exit $rc"; return; fi
  [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "$*: not one line: $out"
  case "$out" in
  *"$want"*) echo "ok: refused: $out" ;;
  *) fail "$*: expected '$want', got: $out" ;;
  esac
}
refused "input 'x' has a static batch of 4, which is every plan's micro-batch: --global-batch 6 is not a multiple of 4" \
  "$autoddl" plan "$dir/static-mlp-ts.onnx" --cluster dgx-h100-ndr --gpus 2 --global-batch 6
refused "input 'input_ids' has a static batch of 2, which is every plan's micro-batch: --global-batch 6 is not a multiple of 2 x dp 2" \
  "$autoddl" plan "$dir/static-llama.onnx" --cluster dgx-h100-ndr --gpus 2 --global-batch 6 --fix dp=2
refused "input 'x' has a static batch of 4, which is every plan's micro-batch: --fix microbatch=2 differs" \
  "$autoddl" plan "$dir/static-mlp-ts.onnx" --cluster dgx-h100-ndr --gpus 1 --global-batch 4 --fix microbatch=2
refused "input 'x' has a static batch of 4, not 3" "$autoddl" import "$dir/static-mlp-ts.onnx" --batch 3
refused "recompute full with a training Dropout (/drop/Dropout): its mask is keyed by the step" \
  "$autoddl" plan "$dir/train-mlp-ts.onnx" --cluster dgx-h100-ndr --gpus 1 --global-batch 4 --fix recompute=full

[ "$fails" -eq 0 ] && echo "exports_users: all passed" || { echo "exports_users: $fails failed"; exit 1; }
