#!/bin/bash
# 40 steps, a save every 5: exact (new binary), compressed (new), compressed (old)
D="--data /tmp/gc/train.txt --quiet --steps 40 --save-every 5 --overwrite"
NEW=/tmp/cw/proj/build/train; OLD=/root/.cache/autoddl/aa3e4dde796bfd19/build/train
run() { rm -rf /tmp/cw/st-$1-ck; mpirun --allow-run-as-root -np 1 $2 $D --save /tmp/cw/st-$1-ck --out /tmp/cw/st-$1 "${@:3}" > /tmp/cw/st-$1.log 2>&1; }
run exact-new $NEW
run comp-new $NEW --checkpoint-compress
run comp-old $OLD --checkpoint-compress
run exact-old $OLD
python3 - <<'PY'
import json
for k in ("exact-new", "comp-new", "exact-old", "comp-old"):
    c = json.load(open(f"/tmp/cw/st-{k}/metrics.json"))
    print(f"{k:10s} stall_ms " + " ".join(f"{x['stall_seconds']*1e3:.1f}" for x in c["checkpoints"]) +
          "  write_s " + " ".join(f"{x['write_seconds']:.2f}" for x in c["checkpoints"]), c["info"].get("checkpoint_compress", ""))
PY
