#!/usr/bin/env bash
# Bad input of K-FAC in generated programs and codegen (issue 22, item 7): bad --kfac-* flags on
# the binary, --optimizer kfac on a program generated from a first-order plan, K-FAC plans codegen
# refuses (ZeRO); each one line naming the cause, exit 1..123. And the flags taking effect:
# --kfac-refresh 1 --kfac-rule sgd override the plan's K and rule (metrics.json info); a run resumed
# between refresh steps continues with the checkpoint's inverses (and Adam grafting with its
# moments); the rule takes --warmup's lr.
# Usage: kfac_bad_input.sh AUTODDL WORKDIR
set -uo pipefail
autoddl=$1 w=$2
rm -rf "$w" && mkdir -p "$w"
fail() { echo "FAIL: $*"; exit 1; }
build() { "$(dirname "$0")/build_project.sh" "$1" || fail "build of $1 (see $1/cmake.log)"; }
# expect_error WHAT PATTERN CMD...: exit 1..123 and one line holding PATTERN.
expect_error() {
  local what=$1 pattern=$2; shift 2
  "$@" > "$w/err.txt" 2>&1
  local rc=$?
  [ "$rc" -ge 1 ] && [ "$rc" -le 123 ] || { cat "$w/err.txt"; fail "$what: exit status $rc"; }
  [ "$(grep -c . "$w/err.txt")" -eq 1 ] || { cat "$w/err.txt"; fail "$what: not one line"; }
  grep -qF -- "$pattern" "$w/err.txt" || { cat "$w/err.txt"; fail "$what: no \"$pattern\""; }
  echo "ok: $what -> $(cat "$w/err.txt")"
}
plan() { # OUT EXTRA...
  local out=$1; shift
  "$autoddl" plan tiny-gpt --cluster dgx-h100-ndr --gpus 1 --global-batch 4 --seq 16 \
    --no-why -o "$out" "$@" > /dev/null || fail "plan $*"
}
plan "$w/kfac.json" --optimizer kfac --kfac-rule lamb
plan "$w/first.json"
"$autoddl" codegen "$w/kfac.json" -o "$w/kfac" > /dev/null || fail "codegen kfac"
"$autoddl" codegen "$w/first.json" -o "$w/first" > /dev/null || fail "codegen first-order"
build "$w/kfac"
build "$w/first"
k="$w/kfac/build/train" f="$w/first/build/train"
# The K-FAC program's refusals of its flags: FLAGS|MESSAGE.
while IFS='|' read -r flags pattern; do
  # shellcheck disable=SC2086 # FLAGS are words
  expect_error "$flags" "$pattern" "$k" --steps 1 $flags </dev/null
done <<'CASES'
--kfac-damping 0|--kfac-damping: expected a finite number > 0, got 0
--kfac-damping -1|--kfac-damping: expected a finite number > 0, got -1
--kfac-damping x|--kfac-damping: expected a number
--kfac-refresh 0|--kfac-refresh: expected a number of steps >= 1
--kfac-refresh -2|--kfac-refresh: expected a non-negative integer
--kfac-rule adam|--kfac-rule: expected sgd, lamb or adam-graft, got adam
--optimizer adamw --kfac-refresh 2|need --optimizer kfac
--kfac-factor-every 0|--kfac-factor-every: "0" is out of range
--kfac-factor-decay 1|--kfac-factor-decay: expected a number in [0, 1), got 1
--kfac-factor-decay -0.1|--kfac-factor-decay: expected a finite number >= 0
--kfac-refresh 4 --kfac-factor-every 2|needs a factor decay > 0
--kfac-refresh 4 --kfac-factor-every 5 --kfac-factor-decay 0.9|factor interval 5 is longer than the refresh interval 4
--optimizer adamw --kfac-factor-decay 0.9|need --optimizer kfac
--kfac-factor-stride 0|--kfac-factor-stride: "0" is out of range
--kfac-factor-stride 3|--kfac-factor-stride 3: does not divide the micro-batch of
--optimizer adamw --kfac-factor-stride 2|need --optimizer kfac
CASES
expect_error "kfac on a first-order program" "generated from a first-order plan" \
  "$f" --steps 1 --optimizer kfac
# The CUDA program of a K-FAC plan generates (its build: e2e.cuda_kfac_compiles).
"$autoddl" codegen "$w/kfac.json" --backend cuda -o "$w/kfac-cuda" > /dev/null ||
  fail "codegen cuda of a K-FAC plan"
grep -q 'backends/cuda/harness/KfacRun.h' "$w/kfac-cuda/train.cpp" || fail "no CUDA KfacRun"
python3 - "$w/kfac.json" "$w/kfac-zero.json" "$w/kfac-rule.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["zero"] = 1
json.dump(p, open(sys.argv[2], "w"))
p = json.load(open(sys.argv[1]))
p["kfac"]["rule"] = "adam"
json.dump(p, open(sys.argv[3], "w"))
PY
# (K-FAC with ZeRO-1 runs; on one data-parallel rank there is nothing to shard.)
expect_error "codegen zero" "zero=1 needs dp > 1" \
  "$autoddl" codegen "$w/kfac-zero.json" -o "$w/kfac-zero"
expect_error "plan rule" "expected \"sgd\", \"lamb\" or \"adam-graft\"" \
  "$autoddl" codegen "$w/kfac-rule.json" -o "$w/kfac-rule"
# The flags override the plan's values.
"$k" --steps 3 --kfac-refresh 1 --kfac-rule sgd --kfac-damping 0.01 --lr 0.01 --out "$w/run" \
  --quiet || fail "a K-FAC run with flags"
python3 - "$w/run/metrics.json" <<'PY' || fail "the flags did not take effect"
import json, sys
i = json.load(open(sys.argv[1]))["info"]
print({k: v for k, v in i.items() if k.startswith("kfac")})
assert i["kfac.refresh"] == "1" and i["kfac.rule"] == "sgd", i
assert float(i["kfac.damping"]) == 0.01, i
assert int(i["kfac.refreshes"]) == 3 * 8, i  # every step, 8 linear layers
PY
# The inverses in the checkpoint: with K = 4, a run resumed at step 3 (no refresh step) continues
# with the saved inverses, so its losses are those of the uninterrupted run, bit for bit.
"$k" --steps 6 --kfac-refresh 4 --save "$w/ck" --save-every 3 --out "$w/full" --quiet ||
  fail "a K-FAC run saving checkpoints"
"$k" --steps 6 --kfac-refresh 4 --resume "$w/ck/step-3" --out "$w/resumed" --quiet ||
  fail "a K-FAC run resuming"
python3 - "$w/full/metrics.json" "$w/resumed/metrics.json" <<'PY' || fail "resumed K-FAC losses differ"
import json, sys
full, resumed = (json.load(open(p))["loss"] for p in sys.argv[1:3])
assert full[3:] == resumed, (full[3:], resumed)
PY
# Adam grafting (--kfac-rule adam-graft over the plan's lamb): its Adam moments are the optimizer
# state's m and v, so a run resumed at step 3 continues bit for bit through the install at step 4.
"$k" --steps 6 --kfac-refresh 4 --kfac-rule adam-graft --save "$w/ck_graft" --save-every 3 \
  --out "$w/graft" --quiet || fail "an Adam grafting run saving checkpoints"
"$k" --steps 6 --kfac-refresh 4 --kfac-rule adam-graft --resume "$w/ck_graft/step-3" \
  --out "$w/graft_resumed" --quiet || fail "an Adam grafting run resuming"
python3 - "$w/graft/metrics.json" "$w/graft_resumed/metrics.json" "$w/full/metrics.json" \
  <<'PY' || fail "Adam grafting's flag or resume"
import json, sys
graft, resumed, lamb = (json.load(open(p)) for p in sys.argv[1:4])
assert graft["info"]["kfac.rule"] == "adam-graft", graft["info"]
assert graft["loss"][3:] == resumed["loss"], (graft["loss"][3:], resumed["loss"])
assert graft["loss"][1:] != lamb["loss"][1:], "adam-graft ran LAMB"
PY
# The running average of the factors (docs/kfac.md "Factor interval and running average"): K = 4,
# factors every 2 steps, decay 0.9. The first install (step 4) inverts step 0's factors alone, as
# without the average; the second (step 8) the average of steps 0, 2 and 4, so the losses differ
# from step 9 on. Its state is in the checkpoint: a run resumed at step 3, after the factor step 2,
# continues bit for bit.
ema=(--kfac-refresh 4 --kfac-factor-every 2 --kfac-factor-decay 0.9)
"$k" --steps 10 --kfac-refresh 4 --out "$w/fresh10" --quiet || fail "a K-FAC run of 10 steps"
"$k" --steps 10 "${ema[@]}" --save "$w/ck_ema" --save-every 3 --out "$w/ema" --quiet ||
  fail "a K-FAC run with a factor average saving checkpoints"
"$k" --steps 10 "${ema[@]}" --resume "$w/ck_ema/step-3" --out "$w/ema_resumed" --quiet ||
  fail "a K-FAC run with a factor average resuming"
python3 - "$w/fresh10/metrics.json" "$w/ema/metrics.json" "$w/ema_resumed/metrics.json" \
  "$w/ck_ema/step-3/optimizer.safetensors" <<'PY' || fail "the factor average"
import json, sys
fresh, ema, resumed = (json.load(open(p)) for p in sys.argv[1:4])
i = ema["info"]
assert i["kfac.factor_every"] == "2" and float(i["kfac.factor_decay"]) == 0.9, i
assert fresh["info"]["kfac.factor_every"] == "4" and float(fresh["info"]["kfac.factor_decay"]) == 0, fresh["info"]
assert ema["loss"][:9] == fresh["loss"][:9], (ema["loss"], fresh["loss"])
assert ema["loss"][9] != fresh["loss"][9], (ema["loss"], fresh["loss"])
assert ema["loss"][3:] == resumed["loss"], (ema["loss"][3:], resumed["loss"])
names = open(sys.argv[4], "rb").read(1 << 16)
assert b".kfac_A_avg" in names and b".kfac_G_avg_recent" in names, "no running average saved"
print("factor average: losses", ema["loss"][8:], "vs fresh", fresh["loss"][8:], "; resumed bitwise")
PY
# A plan's running average (plan --kfac-factor-decay D [--kfac-factor-every F]) is the program's
# default; plan refuses F without a decay and F longer than K.
plan "$w/kfac-ema.json" --optimizer kfac --kfac-rule lamb --kfac-refresh 4 --kfac-factor-decay 0.9 \
  --kfac-factor-every 2
"$autoddl" codegen "$w/kfac-ema.json" -o "$w/kfac-ema" > /dev/null || fail "codegen of a plan with a factor average"
build "$w/kfac-ema"
"$w/kfac-ema/build/train" --steps 10 --out "$w/plan_ema" --quiet || fail "the plan's factor average"
python3 - "$w/plan_ema/metrics.json" "$w/ema/metrics.json" <<'PY' || fail "the plan's factor average did not take effect"
import json, sys
plan, flags = (json.load(open(p)) for p in sys.argv[1:3])
assert plan["info"]["kfac.factor_every"] == "2" and float(plan["info"]["kfac.factor_decay"]) == 0.9, plan["info"]
assert plan["loss"] == flags["loss"], (plan["loss"], flags["loss"])
PY
# --kfac-factor-decay 0 turns the plan's average off (its F with it): the fresh run's losses.
"$w/kfac-ema/build/train" --steps 10 --kfac-factor-decay 0 --out "$w/plan_ema_off" --quiet ||
  fail "the plan's factor average turned off"
python3 - "$w/plan_ema_off/metrics.json" "$w/fresh10/metrics.json" <<'PY' || fail "--kfac-factor-decay 0 on a plan with an average"
import json, sys
off, fresh = (json.load(open(p)) for p in sys.argv[1:3])
assert off["info"]["kfac.factor_every"] == "4" and float(off["info"]["kfac.factor_decay"]) == 0, off["info"]
assert off["loss"] == fresh["loss"], (off["loss"], fresh["loss"])
PY
expect_error "plan --kfac-factor-every alone" "--kfac-factor-every: needs --kfac-factor-decay" \
  "$autoddl" plan tiny-gpt --cluster dgx-h100-ndr --gpus 1 --global-batch 4 --seq 16 --optimizer kfac \
  --kfac-factor-every 2
expect_error "plan F > K" "--kfac-factor-every 5 is longer than the pinned refresh interval 4" \
  "$autoddl" plan tiny-gpt --cluster dgx-h100-ndr --gpus 1 --global-batch 4 --seq 16 --optimizer kfac \
  --kfac-refresh 4 --kfac-factor-decay 0.9 --kfac-factor-every 5
# The rule takes the step's learning rate (LrSchedule.h): step 0 at lr/2 under --warmup 2, so
# step 1's loss differs from the constant-rate run's above; step 0's (before any update) does not.
"$k" --steps 3 --kfac-refresh 4 --warmup 2 --out "$w/warmup" --quiet || fail "a K-FAC run with --warmup"
python3 - "$w/full/metrics.json" "$w/warmup/metrics.json" <<'PY' || fail "K-FAC's rule did not take the scheduled lr"
import json, sys
full, warm = (json.load(open(p)) for p in sys.argv[1:3])
assert warm["lr"] == [5e-4, 1e-3, 1e-3], warm["lr"]
assert warm["loss"][0] == full["loss"][0] and warm["loss"][1] != full["loss"][1], (warm["loss"], full["loss"])
PY
echo "kfac_bad_input: all passed"
