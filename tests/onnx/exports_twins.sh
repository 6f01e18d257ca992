#!/usr/bin/env bash
# Exports made by PyTorch (tests/onnx/export_models.py on the GPU machine; tests/onnx/exports/)
# against their twins: each named export imports with PyTorch's own parameter count (its .json)
# and with the count of the built-in model it mirrors (examples/models/<name>.json), and the
# language models (tiny-*: built at --seq 16) fuse to the twin's op kinds, op for op, and
# generate the twin's program: its stage's layers one struct Stage0Layer run as a loop, the
# train.cpp (CPU and CUDA) as long as the twin's within a few lines (unrolled layers add ~30 each).
# Usage: exports_twins.sh AUTODDL EXPORTS_DIR NAME...
set -euo pipefail
autoddl=$1 dir=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
params() { python3 -c 'import json, sys; print(json.load(sys.stdin)["params"])'; }
for name in "$@"; do
  seq=(); case $name in tiny-gpt | tiny-llama) seq=(--seq 16) ;; esac
  onnx=$("$autoddl" import "$dir/$name.onnx" "${seq[@]}" --summary --json | params)
  twin=$("$autoddl" import "$name" --summary --json | params)
  torch=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["parameters"])' \
    "$dir/$name.json")
  if [ "$onnx" != "$torch" ] || [ "$onnx" != "$twin" ]; then
    echo "FAIL: $name: the export imports with $onnx parameters; PyTorch counts $torch," \
      "the built-in twin $twin"
    exit 1
  fi
  echo "$name: $onnx parameters, as PyTorch and the built-in twin count them"
  case $name in tiny-gpt | tiny-llama) ;; *) continue ;; esac
  kinds() { "$autoddl" import "$1" --seq 16 | grep -o 'sbp\.[a-z_0-9]*' | sort | uniq -c | tr -s ' \n' ' '; }
  ok=$(kinds "$dir/$name.onnx") tw=$(kinds "$name")
  if [ "$ok" != "$tw" ]; then
    echo "FAIL: $name: the export fuses to$ok; the twin is$tw"
    exit 1
  fi
  echo "$name: the same op kinds as the twin:$ok"
  for model in "$dir/$name.onnx" "$name"; do
    out=$work/$(basename "$model" .onnx)-$([ "$model" = "$name" ] && echo twin || echo onnx)
    "$autoddl" plan "$model" --seq 16 --cluster dgx-h100-ndr --gpus 1 --global-batch 8 --no-why \
      -o "$out.json" >/dev/null
    for backend in cpu cuda; do
      "$autoddl" codegen "$out.json" --backend "$backend" -o "$out-$backend" >/dev/null
    done
  done
  for backend in cpu cuda; do
    ox=$work/$name-onnx-$backend/train.cpp tx=$work/$name-twin-$backend/train.cpp
    lo=$(wc -l <"$ox") lt=$(wc -l <"$tx")
    if ! grep -q '^struct Stage0Layer {' "$ox" || [ $((lo - lt)) -gt 8 ] || [ $((lt - lo)) -gt 8 ]; then
      echo "FAIL: $name: the export's $backend train.cpp ($lo lines) does not run its layers" \
        "as the twin's loop ($lt lines, struct Stage0Layer)"
      exit 1
    fi
    echo "$name: the export's $backend train.cpp runs its layers as a loop: $lo lines, the twin's $lt"
  done
done
