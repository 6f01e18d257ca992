#!/usr/bin/env bash
# Exports made by PyTorch (tests/onnx/export_models.py on the GPU machine; tests/onnx/exports/)
# against their twins: each named export imports with PyTorch's own parameter count (its .json)
# and with the count of the built-in model it mirrors (examples/models/<name>.json), and the
# language models (tiny-*: built at --seq 16) fuse to the twin's op kinds, op for op.
# Usage: exports_twins.sh AUTODDL EXPORTS_DIR NAME...
set -euo pipefail
autoddl=$1 dir=$2
shift 2
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
done
