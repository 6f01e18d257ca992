#!/usr/bin/env bash
# Exports made by PyTorch (tests/onnx/export_models.py on the GPU machine; tests/onnx/exports/)
# against their twins: each named export imports with PyTorch's own parameter count (its .json)
# and with the count of the built-in model it mirrors (examples/models/<name>.json).
# Usage: exports_twins.sh AUTODDL EXPORTS_DIR NAME...
set -euo pipefail
autoddl=$1 dir=$2
shift 2
params() { python3 -c 'import json, sys; print(json.load(sys.stdin)["params"])'; }
for name in "$@"; do
  onnx=$("$autoddl" import "$dir/$name.onnx" --summary --json | params)
  twin=$("$autoddl" import "$name" --summary --json | params)
  torch=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["parameters"])' \
    "$dir/$name.json")
  if [ "$onnx" != "$torch" ] || [ "$onnx" != "$twin" ]; then
    echo "FAIL: $name: the export imports with $onnx parameters; PyTorch counts $torch," \
      "the built-in twin $twin"
    exit 1
  fi
  echo "$name: $onnx parameters, as PyTorch and the built-in twin count them"
done
