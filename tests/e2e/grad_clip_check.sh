#!/usr/bin/env bash
# Global-norm gradient clipping (--grad-clip C) of a plan already verified in WORK (its builds
# reused): `autoddl verify` again with -- --grad-clip C FLAGS (and $TRAIN_FLAGS), then the checks:
# clipping active at every step (each step's norm before clipping, metrics.json's grad_norm, above C
# in both runs); the plan's norms the one rank's within NORM_TOL (default 1e-6: a gradient element
# counted on two ranks, or on none, moves them by far more); the clip changing the plan's losses by
# over EFFECT (default 1e-4, 10x verify's bound) against the same program unclipped (--grad-clip
# 1e30), so that verify sees a rank that skips or misapplies the factor. VERIFY_ARGS: autoddl options
# of both runs (--model FILE, --backend cuda --fp32).
# Usage: [NORM_TOL=X] [EFFECT=X] grad_clip_check.sh AUTODDL WORK STEPS "C [FLAGS...]" [VERIFY_ARGS...]
set -euo pipefail
autoddl=$1 work=$2 steps=$3 clip=$4
shift 4
read -r clipNorm clipFlags <<< "$clip"
read -r -a clipArgs <<< "${clipFlags:-} ${TRAIN_FLAGS:-}"
"$autoddl" verify "$work/plan.json" --steps "$steps" --keep "$work/clip" "$@" \
  -- --grad-clip "$clipNorm" "${clipArgs[@]}"
"$autoddl" run "$work/plan.json" --steps "$steps" "$@" --out "$work/unclipped" \
  -- --quiet --grad-clip 1e30 "${clipArgs[@]}" >/dev/null 2>"$work/unclipped.log" ||
  { cat "$work/unclipped.log"; exit 1; }
python3 - "$work" "$clipNorm" "${NORM_TOL:-1e-6}" "${EFFECT:-1e-4}" <<'PY'
import json, sys
work, c, tol, least = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
plan, single, free = (json.load(open(f"{work}/{r}/metrics.json")) for r in ("clip/plan", "clip/single", "unclipped"))
p, s = plan["grad_norm"], single["grad_norm"]
print("grad_norm: plan", p, "1 rank", s)
worst = max(abs(a - b) / b for a, b in zip(p, s))
effect = max(abs(a - b) / b for a, b in zip(plan["loss"], free["loss"]))
checks = {
    f"every step clipped (norm > {c})": min(p + s) > c and len(p) == len(s) == len(plan["loss"]),
    f"the plan's norms the one rank's (worst {worst:.1e}, at most {tol:.0e})": worst <= tol,
    "info.grad_clip": float(plan["info"]["grad_clip"]) == float(single["info"]["grad_clip"]) == c,
    f"the clip changes the losses (by {effect:.1e}, at least {least:.0e})": effect > least,
}
for what, ok in checks.items():
    print(("ok: " if ok else "FAIL: ") + what)
sys.exit(0 if all(checks.values()) else 1)
PY
