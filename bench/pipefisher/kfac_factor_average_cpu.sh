#!/usr/bin/env bash
# AdamW against K-FAC with and without the running average of the factors, on a CPU
# (bench/results/pipefisher/2026-12-07-cpu-kfac-factor-ema/README.md). Each run: STEPS steps of
# GCIDE bytes with a warm-up and cosine decay, a checkpoint every EVAL_EVERY steps, each
# checkpoint resumed at --lr 0 over EVAL_STEPS steps of the held-out text (the mean loss is the
# validation loss), as bench/pipefisher/convergence.sh does on a GPU.
#
#   bash bench/pipefisher/kfac_factor_average_cpu.sh DIR OUT
#
# DIR holds corpus/{train,val}.txt (corpus.sh) and the CPU programs adamw/build/train and
# kfac/build/train (autoddl codegen of the two plans, tests/e2e/build_project.sh).
#
# RUNS: "name|program|lr|flags" lines (default below).
set -uo pipefail
dir=$(realpath "${1:?usage: run.sh DIR OUT}")
out=$(realpath -m "${2:?usage: run.sh DIR OUT}")
STEPS=${STEPS:-400} EVAL_EVERY=${EVAL_EVERY:-200} EVAL_STEPS=${EVAL_STEPS:-8}
TRAIN_FLAGS=${TRAIN_FLAGS:---warmup 40 --lr-decay cosine}
RUNS=${RUNS:-"adamw-lr1e-3|adamw|1e-3|
adamw-lr3e-3|adamw|3e-3|
kfac-K50-lr1e-2|kfac|1e-2|--kfac-refresh 50
kfac-K50-lr3e-2|kfac|3e-2|--kfac-refresh 50
kfac-K50-F5-d0.95-lr1e-2|kfac|1e-2|--kfac-refresh 50 --kfac-factor-every 5 --kfac-factor-decay 0.95
kfac-K50-F5-d0.95-lr3e-2|kfac|3e-2|--kfac-refresh 50 --kfac-factor-every 5 --kfac-factor-decay 0.95"}
export OPENBLAS_NUM_THREADS=1
mkdir -p "$out"
read -ra train_flags <<<"$TRAIN_FLAGS"
while IFS='|' read -r name prog lr flags; do
  [ -n "$name" ] || continue
  read -ra extra <<<"$flags"
  bin=$dir/$prog/build/train
  echo "== $name"
  "$bin" --steps "$STEPS" --data "$dir/corpus/train.txt" --lr "$lr" --quiet "${extra[@]}" \
    "${train_flags[@]}" --save "$out/ck/$name" --save-every "$EVAL_EVERY" --out "$out/runs/$name" \
    >"$out/$name.log" 2>&1 || { echo "$name failed"; tail -3 "$out/$name.log"; continue; }
  for n in $(seq "$EVAL_EVERY" "$EVAL_EVERY" "$STEPS"); do
    "$bin" --resume "$out/ck/$name/step-$n" --steps $((n + EVAL_STEPS)) --data "$dir/corpus/val.txt" \
      --lr 0 --quiet "${extra[@]}" --out "$out/eval/$name/step-$n" >>"$out/$name.log" 2>&1 ||
      echo "eval of $name at step $n failed"
  done
  rm -rf "$out/ck/$name"
done <<<"$RUNS"
python3 - "$out" "$STEPS" "$EVAL_EVERY" <<'PY'
import json, os, sys
out, steps, every = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = {}
for name in sorted(os.listdir(f"{out}/runs")):
    m = json.load(open(f"{out}/runs/{name}/metrics.json"))
    val = {}
    for n in range(every, steps + 1, every):
        p = f"{out}/eval/{name}/step-{n}/metrics.json"
        if os.path.exists(p):
            l = json.load(open(p))["loss"]
            val[n] = sum(l) / len(l)
    rows[name] = {"val": val, "train_last50": sum(m["loss"][-50:]) / 50,
                  "mean_step_s": m["mean_step_seconds"],
                  "info": {k: v for k, v in m["info"].items() if k.startswith("kfac.")}}
    print(f"{name:28s} val " + " ".join(f"{n}:{v:.4f}" for n, v in val.items()) +
          f"  train(last 50) {rows[name]['train_last50']:.4f}  step {m['mean_step_seconds']*1e3:.1f} ms")
json.dump(rows, open(f"{out}/results.json", "w"), indent=1)
PY
