#!/usr/bin/env bash
# A generated program's checkpoint loads in Hugging Face transformers as a user expects (issue 23):
# from_pretrained(step-N/) finds config.json and model.safetensors, reports no unexpected or missing
# weights, and its forward loss on the program's own evaluation batch equals the program's.
#
#   hf_checkpoint.sh prepare AUTODDL DIR   here (no PyTorch needed): tiny GPT-2 and Llama configs
#                                          (Hugging Face format), plan, CPU project, build, 3 steps
#                                          with --save, then one --lr 0 step from the checkpoint on
#                                          held-out text: its loss goes to DIR/<model>/expected.json
#   hf_checkpoint.sh check DIR             where PyTorch + transformers are (the GPU machine, or any
#                                          CPU with them): loads each checkpoint, compares the loss
#                                          (hf_checkpoint_check.py); exit 0 = PASS
#
# On the GPU machine: carry DIR (a few MB) and run `tests/gpu/hf_checkpoint.sh check DIR`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
mode=${1:-}
case "$mode" in
prepare)
  autoddl=$(realpath "$2") dir=$3
  mkdir -p "$dir"
  dir=$(realpath "$dir")
  # Byte-level text (vocabulary 256): the repository's docs, the last 20% held out.
  cat "$repo"/docs/*.md > "$dir/all.txt"
  python3 - "$dir" "$repo/examples/models" <<'PY'
import json, sys
d, models = sys.argv[1], sys.argv[2]
text = open(f"{d}/all.txt", "rb").read()
cut = len(text) * 4 // 5
open(f"{d}/train.txt", "wb").write(text[:cut])
open(f"{d}/val.txt", "wb").write(text[cut:])
gpt = json.load(open(f"{models}/gpt2.json"))
gpt.update(n_layer=2, n_embd=64, n_head=4, vocab_size=256, n_positions=64, n_ctx=64)
json.dump(gpt, open(f"{d}/tiny-hf-gpt2.json", "w"), indent=2)
llama = json.load(open(f"{models}/llama-2-7b.json"))
llama.update(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=160, vocab_size=256, max_position_embeddings=64)
json.dump(llama, open(f"{d}/tiny-hf-llama.json", "w"), indent=2)
PY
  batch=4 seq=16 steps=3
  for m in tiny-hf-gpt2 tiny-hf-llama; do
    w=$dir/$m
    rm -rf "$w" && mkdir -p "$w"
    "$autoddl" plan "$dir/$m.json" --cluster dgx-h100-ndr --gpus 1 --global-batch $batch \
      --seq $seq --no-why -o "$w/plan.json" > /dev/null
    "$autoddl" codegen "$w/plan.json" --backend cpu -o "$w/project" > /dev/null
    cmake -S "$w/project" -B "$w/project/build" -DCMAKE_BUILD_TYPE=Release > "$w/build.log" 2>&1
    cmake --build "$w/project/build" -j2 >> "$w/build.log" 2>&1
    train=$w/project/build/train
    "$train" --steps $steps --data "$dir/train.txt" --save "$w/ck" --quiet
    "$train" --resume "$w/ck/step-$steps" --steps $((steps + 1)) --lr 0 --data "$dir/val.txt" \
      --out "$w/eval" --quiet
    python3 - "$w" $batch $seq $steps <<'PY'
import json, sys
w, batch, seq, step = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
loss = json.load(open(f"{w}/eval/metrics.json"))["loss"][0]
json.dump({"checkpoint": f"ck/step-{step}", "data": "../val.txt", "batch": batch, "seq": seq,
           "step": step, "loss": loss}, open(f"{w}/expected.json", "w"), indent=1)
print(f"{w}: program loss at step {step} on val.txt: {loss:.6f}")
PY
    rm -rf "$w/project/build"
  done
  echo "prepared $dir: run 'tests/gpu/hf_checkpoint.sh check $dir' where transformers is installed"
  ;;
check)
  dir=$2
  python3 "$here/hf_checkpoint_check.py" "$dir"/tiny-hf-gpt2 "$dir"/tiny-hf-llama
  ;;
*)
  sed -n 2,15p "$0"
  exit 2
  ;;
esac
