#!/usr/bin/env bash
# An export made by PyTorch trains from PyTorch's own values with PyTorch's loss (issue 25):
# `autoddl run EXPORT --weights onnx` on the tokens the export script recorded (its .json:
# "tokens", [rows, T+1], and "first_loss", the mean cross-entropy of position t predicting
# token t+1 over every row, computed by PyTorch in fp32) gives the same first loss. Each row
# runs alone (--global-batch 1 --seq T, its T+1 tokens as the byte file the program reads:
# step 0's sample is exactly inputs tokens[0..T), targets tokens[1..T]); the rows have equal
# length, so PyTorch's loss is the mean of theirs.
# Usage: exports_first_loss.sh AUTODDL EXPORTS_DIR WORK NAME...
set -euo pipefail
autoddl=$1 dir=$2 w=$3
shift 3
rm -rf "$w" && mkdir -p "$w"
for name in "$@"; do
  rows=$(python3 - "$dir/$name.json" "$w/$name" <<'PY'
import json, sys
info = json.load(open(sys.argv[1]))
for i, row in enumerate(info["tokens"]):
    assert all(0 <= t < 256 for t in row), "byte files hold ids below 256"
    open("%s.row%d.txt" % (sys.argv[2], i), "wb").write(bytes(row))
print(len(info["tokens"]))
PY
)
  seq=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["tokens"][0]) - 1)' "$dir/$name.json")
  for ((i = 0; i < rows; i++)); do
    "$autoddl" run "$dir/$name.onnx" --ranks 1 --global-batch 1 --seq "$seq" --steps 1 \
      --weights onnx --data "$w/$name.row$i.txt" --out "$w/$name.run$i" >"$w/$name.run$i.log" 2>&1 ||
      { tail -5 "$w/$name.run$i.log"; echo "FAIL: $name row $i: the run failed"; exit 1; }
  done
  python3 - "$dir/$name.json" "$w/$name" "$rows" <<'PY' || exit 1
import json, sys
torch_loss = json.load(open(sys.argv[1]))["first_loss"]
ours = [json.load(open("%s.run%d/metrics.json" % (sys.argv[2], i)))["loss"][0]
        for i in range(int(sys.argv[3]))]
mean = sum(ours) / len(ours)
rel = abs(mean - torch_loss) / abs(torch_loss)
name = sys.argv[2].rsplit("/", 1)[1]
print("%s: first loss %.6f (rows %s), PyTorch %.6f, relative error %.1e"
      % (name, mean, ", ".join("%.6f" % l for l in ours), torch_loss, rel))
if rel > 1e-5:
    print("FAIL: %s: the first loss differs from PyTorch's" % name)
    sys.exit(1)
PY
done
