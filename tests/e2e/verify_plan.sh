#!/usr/bin/env bash
# One case of the e2e verify matrix: plan MODEL on RANKS ranks with the knobs pinned by FIX, then
# `autoddl verify` runs the plan under mpirun and the same model on one rank and compares the loss
# of every step (relative error <= 1e-5) and the final parameters.
# With MEGATRON=1 the plan's signatures are rewritten to Megatron's pattern before verifying
# (tests/lit/codegen/megatron.py: row/column linears, attention by heads); MEGATRON=2: the
# embedding vocab-parallel as well (a tied table is then split by vocabulary rows for both the
# embedding and the lm_head); MEGATRON=3: and the norms and residual adds sequence-parallel;
# MEGATRON=batch|sequence: every op on split rows (megatron.py --rows).
# With KFAC=sgd|lamb|adam-graft the plan is K-FAC's (plan --optimizer kfac --kfac-rule KFAC): every
# program runs K-FAC with the plan's damping and refresh interval, the one-rank run included.
# With RECOMPUTE_LAYERS=N every stage recomputes its first N layers (at most its own; the plan's
# `recompute` knob, pinned in FIX, says full or selective): the one-rank reference recomputes
# nothing, so its losses are those without recomputation.
# TRAIN_FLAGS: flags of both training binaries (autoddl verify -- FLAGS), e.g. K-FAC's
# --kfac-factor-every F --kfac-factor-decay D; with --kfac-factor-stride S also checked to matter.
# GRAD_CLIP="C [FLAGS...]": then verified again under --grad-clip C (and FLAGS), the builds reused
# (grad_clip_check.sh).
# Usage: [MEGATRON=1|2|3|batch|sequence] [KFAC=sgd|lamb|adam-graft] [RECOMPUTE_LAYERS=N] [PLACEMENT=1] [STAGGER=1] [TRAIN_FLAGS=...] [GRAD_CLIP=...] verify_plan.sh AUTODDL WORKDIR MODEL RANKS GLOBAL_BATCH FIX [STEPS]
set -euo pipefail
autoddl=$1 work=$2 model=$3 ranks=$4 batch=$5 fix=$6 steps=${7:-3}
rm -rf "$work" && mkdir -p "$work"
seqArg=()
kfacArg=()
# K set by the bubbles (--kfac-overhead 0): short runs whose later steps precondition, where the
# default budget would refresh every 10-30 steps on these tiny models.
[ -n "${KFAC:-}" ] && kfacArg=(--optimizer kfac --kfac-rule "$KFAC" --kfac-overhead 0)
# KFAC_REFRESH: plan --kfac-refresh (K, or one K per pipeline device).
[ -n "${KFAC_REFRESH:-}" ] && kfacArg+=(--kfac-refresh "$KFAC_REFRESH")
case "$(basename "$model")" in gcn*|gat*|transformer_conv*|*sage*|mlp*|*vgg*|*image-ops*|*odd-classes*) ;; *) seqArg=(--seq 16) ;; esac
# K-FAC cases plan on the H100 preset without its K-FAC time scales (gpu.kfac_time_scale, fitted at
# GPT-2 124M's factor sizes): on these tiny models they would stretch K past the runs' few steps.
cluster=dgx-h100-ndr
if [ -n "${KFAC:-}" ]; then
  cluster=$work/cluster.json
  python3 - "$(dirname "$0")/../../examples/clusters/dgx-h100-ndr.json" "$cluster" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["gpu"].pop("kfac_time_scale", None)
json.dump(c, open(sys.argv[2], "w"), indent=1)
PY
fi
"$autoddl" plan "$model" --cluster "$cluster" --gpus "$ranks" --global-batch "$batch" \
  "${seqArg[@]}" "${kfacArg[@]}" --fix "$fix" --no-why -o "$work/plan.json" > "$work/plan.txt"
python3 "$(dirname "$0")/../lit/codegen/megatron.py" "$work/plan.json" --level "${MEGATRON:-0}"
if [ -n "${RECOMPUTE_LAYERS:-}" ]; then
  python3 "$(dirname "$0")/recompute_layers.py" "$work/plan.json" "$RECOMPUTE_LAYERS"
fi
modelArg=()
[ -f "$model" ] && modelArg=(--model "$model")
read -r -a trainFlags <<< "${TRAIN_FLAGS:-}"
trainArgs=()
[ "${#trainFlags[@]}" -gt 0 ] && trainArgs=(-- "${trainFlags[@]}")
"$autoddl" verify "$work/plan.json" --steps "$steps" --keep "$work/run" "${modelArg[@]}" \
  "${trainArgs[@]}"
# GRAD_CLIP: clipping verified (grad_clip_check.sh).
if [ -n "${GRAD_CLIP:-}" ]; then
  "$(dirname "$0")/grad_clip_check.sh" "$autoddl" "$work" "$steps" "$GRAD_CLIP" "${modelArg[@]}"
fi
# TRAIN_FLAGS with --kfac-factor-stride S > 1: both runs report S, and the plan run again at
# stride 1 gives other losses (the stride took effect).
if [[ " ${TRAIN_FLAGS:-} " == *" --kfac-factor-stride "* ]]; then
  "$autoddl" run "$work/plan.json" --steps "$steps" "${modelArg[@]}" --out "$work/stride1" -- \
    --quiet "${trainFlags[@]}" --kfac-factor-stride 1 >/dev/null 2>"$work/stride1.log" ||
    { cat "$work/stride1.log"; exit 1; }
  python3 - "$work/run" "$work/stride1/metrics.json" <<'PY'
import json, sys
plan, single = (json.load(open(f"{sys.argv[1]}/{r}/metrics.json")) for r in ("plan", "single"))
one = json.load(open(sys.argv[2]))
s = [m["info"].get("kfac.factor_stride") for m in (plan, single, one)]
if s[0] is None or s[0] != s[1] or s[2] is not None:
    sys.exit(f"kfac.factor_stride: plan {s[0]}, single rank {s[1]}, stride-1 run {s[2]}")
if plan["loss"] == one["loss"]:
    sys.exit(f"--kfac-factor-stride {s[0]} left the losses those of stride 1: {one['loss']}")
print(f"factor stride {s[0]} on both runs; stride 1 gives other losses")
PY
fi
# SAVE_MIDCYCLE=1 (K-FAC): a checkpoint every 2 steps finishes the open refresh cycles early; the
# run's losses must equal the run without checkpoints bit for bit, under wait and thread filling.
if [ "${SAVE_MIDCYCLE:-0}" = 1 ]; then
  for fill in waits thread; do
    for save in 0 1; do
      saveArgs=()
      [ "$save" = 1 ] && saveArgs=(--save "$work/ck_$fill" --save-every 2)
      AUTODDL_KFAC_FILL=$fill "$autoddl" run "$work/plan.json" --steps "$steps" "${modelArg[@]}" \
        --out "$work/save_${fill}_$save" -- --quiet "${saveArgs[@]}" "${trainFlags[@]}" >/dev/null 2>"$work/save_${fill}_$save.log" ||
        { cat "$work/save_${fill}_$save.log"; exit 1; }
    done
    python3 - "$work/save_${fill}_0/metrics.json" "$work/save_${fill}_1/metrics.json" "$fill" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
if a["loss"] != b["loss"] or a["info"]["kfac.fill"] != sys.argv[3]:
    sys.exit(f"{sys.argv[3]}: saving mid-cycle changed the losses: {a['loss']} vs {b['loss']}")
print(f"{sys.argv[3]}: saving every 2 steps mid-cycle leaves the losses unchanged")
PY
  done
fi
# STAGGER=1 (K-FAC, a plan with every item at the refresh step's end): --kfac-stagger spreads the
# layers' reductions and inversions over the cycle's steps (traced on more than one step of a
# cycle) and leaves the losses of the plan's run unchanged bit for bit.
if [ "${STAGGER:-0}" = 1 ]; then
  "$autoddl" run "$work/plan.json" --steps "$steps" "${modelArg[@]}" --out "$work/stagger" -- \
    --quiet --trace --kfac-stagger "${trainFlags[@]}" >/dev/null 2>"$work/stagger.log" ||
    { cat "$work/stagger.log"; exit 1; }
  python3 - "$work/run/plan/metrics.json" "$work/stagger" <<'PY'
import bisect, json, sys
plan, st = json.load(open(sys.argv[1])), json.load(open(sys.argv[2] + "/metrics.json"))
if plan["loss"] != st["loss"] or st["info"].get("kfac.stagger") != "on":
    sys.exit(f"--kfac-stagger changed the losses: {plan['loss']} vs {st['loss']}")
ev = json.load(open(sys.argv[2] + "/trace.json"))
ev = [e for e in (ev["traceEvents"] if isinstance(ev, dict) else ev) if e.get("pid") == 0 and e.get("ph") == "X"]
starts = sorted(e["ts"] for e in ev if e["name"] == "F0")
steps = {bisect.bisect_right(starts, e["ts"]) - 1 for e in ev if e["name"].startswith("reduce_A")}
if all(s % int(st["info"]["kfac.refresh"]) == 0 for s in steps):
    sys.exit(f"--kfac-stagger: the reductions ran on the refresh steps {sorted(steps)} only")
print(f"--kfac-stagger: the same losses, reductions on steps {sorted(steps)}")
PY
fi
# PLACEMENT=1 (K-FAC): the program run with its items at their places (AUTODDL_KFAC_FILL=placed, the
# CUDA programs' way) and traced; every item of the first refresh cycle ran at the instruction slot
# the plan put it (bench/pipefisher/placement_check.py); the check fails on a plan with one slot
# moved.
if [ "${PLACEMENT:-0}" = 1 ]; then
  check=$(dirname "$0")/../../bench/pipefisher/placement_check.py
  AUTODDL_KFAC_FILL=placed "$autoddl" run "$work/plan.json" --steps "$steps" "${modelArg[@]}" \
    --out "$work/placed" -- --quiet --trace >/dev/null 2>"$work/placed.log" ||
    { cat "$work/placed.log"; exit 1; }
  python3 "$check" "$work/plan.json" "$work/placed/trace.json" --json "$work/placement.json"
  python3 - "$work/plan.json" "$work/moved.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
it = next(i for d in p["kfac"]["devices"] for i in d["items"] if i["item"] == "curv_A")
it["slot"] += 1
json.dump(p, open(sys.argv[2], "w"))
PY
  if python3 "$check" "$work/moved.json" "$work/placed/trace.json" >/dev/null; then
    echo "placement_check.py passed a plan with a slot moved" >&2
    exit 1
  fi
fi
# A classification model (mlp, vgg) also reports the accuracy of its last step
# (metrics.json info.accuracy): the plan's run must report the single rank's.
python3 - "$work/run" <<'PY'
import json, os, sys
plan, single = (json.load(open(f"{sys.argv[1]}/{r}/metrics.json"))["info"] for r in ("plan", "single"))
if "accuracy" in single or "accuracy" in plan:
    if plan.get("accuracy") != single.get("accuracy"):
        sys.exit(f"accuracy: plan {plan.get('accuracy')} != single rank {single.get('accuracy')}")
    print(f"accuracy: {plan['accuracy']} on both")
# A K per pipeline device: both runs used the plan's per-layer K, and they differ.
if "," in os.environ.get("KFAC_REFRESH", ""):
    ks = [r.get("kfac.refresh_layers", "") for r in (plan, single)]
    if ks[0] != ks[1] or len(set(ks[0].split(","))) < 2:
        sys.exit(f"kfac.refresh_layers: plan {ks[0]!r}, single rank {ks[1]!r}")
    print(f"K per layer: {ks[0]} on both")
PY
