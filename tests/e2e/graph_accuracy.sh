#!/usr/bin/env bash
# A graph model (gcn, gat) learns the planted communities of its generated graph (issue 7 part 4):
# trained for STEPS steps on one rank with the loss over the training nodes (the even ones), the
# accuracy over the held-out nodes (the odd ones, never in the loss; metrics.json
# info.heldout_accuracy) must reach MIN, well above chance (1/classes), and the loss must have
# fallen.
# Usage: graph_accuracy.sh AUTODDL WORKDIR MODEL STEPS MIN
set -euo pipefail
autoddl=$1 work=$2 model=$3 steps=$4 min=$5
rm -rf "$work" && mkdir -p "$work"
"$autoddl" run "$model" --ranks 1 --global-batch 1 --steps "$steps" --out "$work" -- --quiet
python3 - "$work/metrics.json" "$min" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
train, acc, loss = float(m["info"]["accuracy"]), float(m["info"]["heldout_accuracy"]), m["loss"]
print(f"loss {loss[0]:.4f} -> {loss[-1]:.4f}, training accuracy {train:.4f}, "
      f"held-out accuracy {acc:.4f} (required >= {sys.argv[2]})")
if not loss[-1] < loss[0]:
    sys.exit("the loss did not fall")
if acc < float(sys.argv[2]):
    sys.exit(f"held-out accuracy {acc} below {sys.argv[2]}")
PY
