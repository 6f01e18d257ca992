#!/usr/bin/env bash
# PipeFisher end to end (docs/pipefisher.md): `simulate --pipefisher` on the
# hand-worked case of PipeFisherTest.cpp, `plan --optimizer kfac` writing and
# `inspect` reading the kfac fields (and the trace showing the K-FAC items),
# first-order plans without them, a K per pipeline device (--kfac-refresh K0,K1),
# the fluid packing (--kfac-fill fluid) and the one-line errors (exit 1).
# Usage: kfac_cli_test.sh path/to/autoddl
set -uo pipefail
autoddl=${1:?usage: kfac_cli_test.sh path/to/autoddl}
here=$(cd "$(dirname "$0")" && pwd)
fixtures=$here/fixtures
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# 1F1B p=2 m=2 f=1 b=2, one layer per stage, curvature 0.5, inversion 1,
# preconditioning 0.25, margin 0: K = 2, step 9 + 0.25, utilisation 6/9 ->
# 16.5/18.5 on both stages (PipeFisher.OneFOneBTwoStagesByHand).
"$autoddl" simulate --schedule 1f1b --stages 2 --microbatches 2 --pipefisher \
  --curv 0.5 --inv 1 --precond 0.25 --margin 0 --json --trace "$work/t.json" \
  >"$work/s.json" || fail "simulate --pipefisher exited $?"
python3 - "$work/s.json" "$work/t.json" <<'PY' || fail "simulate --pipefisher content"
import json, sys
out = json.load(open(sys.argv[1]))["pipefisher"]
assert out["refresh_steps"] == 2, out["refresh_steps"]
assert abs(out["step_time_s"] - 9.25e-3) < 1e-12, out["step_time_s"]
assert abs(out["utilisation_first_order"] - 6 / 9) < 1e-9
assert abs(out["utilisation"] - 16.5 / 18.5) < 1e-9, out["utilisation"]
assert out["unfitted"] == []
d0 = [(i["item"], i.get("microbatch"), i["step"]) for i in out["devices"][0]["items"]
      if i["item"] != "precond"]
assert d0 == [("curv_A", 0, 0), ("curv_A", 1, 0), ("curv_G", 0, 0),
              ("curv_G", 1, 1), ("inv_A", None, 1), ("inv_G", None, 1)], d0
trace = json.load(open(sys.argv[2]))
names = {e["name"] for e in trace["traceEvents"] if e["ph"] == "X"}
assert "curv_A s0.l0 mb 0" in names and "inv_G s1.l0" in names, sorted(names)
rows = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
assert "stage 1 K-FAC, step 2 of 2" in rows, rows
PY

# --kfac-refresh 1 pins K: step 1's items are forced after the makespan
# (PipeFisher.PinnedRefreshForcesWhatItsStepsDoNotHold): step 9 + 0.25 + 2.5.
"$autoddl" simulate --schedule 1f1b --stages 2 --microbatches 2 --pipefisher \
  --curv 0.5 --inv 1 --precond 0.25 --margin 0 --kfac-refresh 1 --json \
  >"$work/s1.json" || fail "simulate --kfac-refresh exited $?"
python3 - "$work/s1.json" <<'PY' || fail "simulate --kfac-refresh content"
import json, sys
out = json.load(open(sys.argv[1]))["pipefisher"]
assert out["refresh_steps"] == 1 and out["refresh_pinned"] is True, out
assert abs(out["step_time_s"] - 11.75e-3) < 1e-12, out["step_time_s"]
assert "stage 1: inv_G s1.l0" in out["unfitted"], out["unfitted"]
PY

# --kfac-refresh 1,2 pins each device's K (PipeFisher.PerDevicePinForcesEachDeviceOnItsOwnK):
# stage 0 forces 2.5 every step, stage 1 keeps its 2 steps: step 9 + 0.25 + 2.5 / 1.
"$autoddl" simulate --schedule 1f1b --stages 2 --microbatches 2 --pipefisher \
  --curv 0.5 --inv 1 --precond 0.25 --margin 0 --kfac-refresh 1,2 --json \
  --trace "$work/t12.json" >"$work/s12.json" || fail "simulate --kfac-refresh 1,2 exited $?"
python3 - "$work/s12.json" "$work/t12.json" <<'PY' || fail "simulate --kfac-refresh 1,2 content"
import json, sys
out = json.load(open(sys.argv[1]))["pipefisher"]
assert out["refresh_steps"] == 2 and out["refresh_pinned"] is True, out
assert [d["refresh_steps"] for d in out["devices"]] == [1, 2], out["devices"]
assert all("refresh_steps" not in l for l in out["layers"]), out["layers"]  # K once, per device
assert abs(out["step_time_s"] - 11.75e-3) < 1e-12, out["step_time_s"]
assert all(i["step"] == 0 for i in out["devices"][0]["items"])
rows = {e["args"]["name"] for e in json.load(open(sys.argv[2]))["traceEvents"]
        if e.get("name") == "thread_name"}
assert "stage 0 K-FAC, step 1 of 1" in rows and "stage 1 K-FAC, step 2 of 2" in rows, rows
PY
# Unpinned, each device's K is its own span: both 2 in the hand case.
python3 - "$work/s.json" <<'PY' || fail "simulate per-device K"
import json, sys
out = json.load(open(sys.argv[1]))["pipefisher"]
assert [d["refresh_steps"] for d in out["devices"]] == [2, 2], out["devices"]
PY

# The text report names what did not fit: inversions of 5 fit no gap.
"$autoddl" simulate --schedule 1f1b --stages 2 --microbatches 2 --pipefisher \
  --curv 0.5 --inv 5 --margin 0 >"$work/s.txt" || fail "simulate text exited $?"
grep -q "did not fit any bubble" "$work/s.txt" || fail "no 'did not fit' line"
grep -q "stage 0: inv_A s0.l0" "$work/s.txt" || fail "unfitted item not named"
grep -q "filled timeline" "$work/s.txt" || fail "no filled timeline"

# --kfac-fill fluid: inversions of 2.5 fit no gap (2 at most), so whole items
# are forced, while the filling thread splits them over gaps: stage 0 runs
# inv_A in [2.5,4) and [6,7) of step 1, stage 1 over [0,1) and [7,8.5); K = 3
# on both, nothing forced, step 9 + 0.25 (PipeFisherFluid.SplitsAnItem...).
"$autoddl" simulate --schedule 1f1b --stages 2 --microbatches 2 --pipefisher \
  --curv 0.5 --inv 2.5 --margin 0 --kfac-fill fluid --json >"$work/sf.json" ||
  fail "simulate --kfac-fill fluid exited $?"
python3 - "$work/sf.json" <<'PY' || fail "simulate --kfac-fill fluid content"
import json, sys
out = json.load(open(sys.argv[1]))["pipefisher"]
assert out["fill"] == "fluid", out["fill"]
assert [d["refresh_steps"] for d in out["devices"]] == [3, 3], out["devices"]
assert out["unfitted"] == [], out["unfitted"]
assert abs(out["step_time_s"] - 9.25e-3) < 1e-12, out["step_time_s"]
inv = [i for i in out["devices"][0]["items"] if i["item"] == "inv_A"][0]
assert inv["step"] == 1 and abs(inv["start_s"] - 2.5e-3) < 1e-12 and \
    abs(inv["end_s"] - 7e-3) < 1e-12, inv
want = [[1, 2.5e-3, 4e-3], [1, 6e-3, 7e-3]]
assert all(p[0] == w[0] and abs(p[1] - w[1]) < 1e-12 and abs(p[2] - w[2]) < 1e-12
           for p, w in zip(inv["pieces"], want)) and len(inv["pieces"]) == 2, inv
PY
"$autoddl" simulate --schedule 1f1b --stages 2 --microbatches 2 --pipefisher \
  --curv 0.5 --inv 2.5 --margin 0 --kfac-fill fluid >"$work/sf.txt" ||
  fail "simulate --kfac-fill fluid text exited $?"
grep -q "packing: fluid (a preemptible filling thread" "$work/sf.txt" ||
  fail "simulate --kfac-fill fluid: no packing line"
grep -q "every K-FAC item runs in the bubbles" "$work/sf.txt" ||
  fail "simulate --kfac-fill fluid: something forced"
"$autoddl" simulate --schedule 1f1b --stages 2 --microbatches 2 --pipefisher \
  --curv 0.5 --inv 2.5 --margin 0 --json >"$work/si.json" ||
  fail "simulate --kfac-fill default exited $?"
python3 - "$work/si.json" <<'PY' || fail "simulate default fill content"
import json, sys
out = json.load(open(sys.argv[1]))["pipefisher"]
assert out["fill"] == "items" and len(out["unfitted"]) == 4, out["unfitted"]
PY

# plan --optimizer kfac: the plan records the optimizer, K, the placement and
# the utilisation with and without K-FAC; inspect reads it and its trace has
# the K-FAC items; the same plan without --optimizer has none of it.
"$autoddl" plan tiny-gpt --cluster h200x2-nvlink --gpus 2 --global-batch 8 \
  --fix pp=2,schedule=1f1b --optimizer kfac --kfac-damping 0.01 -o "$work/k.json" \
  >"$work/k.txt" || fail "plan --optimizer kfac exited $?"
grep -q "refresh interval K = " "$work/k.txt" || fail "plan summary lacks K"
python3 - "$work/k.json" <<'PY' || fail "kfac plan content"
import json, sys
p = json.load(open(sys.argv[1]))
assert p["optimizer"] == "kfac"
k = p["kfac"]
assert k["damping"] == 0.01
assert k["refresh_steps"] >= 1
assert 0 < k["utilisation_first_order"] <= k["utilisation"] <= 1, k
assert len(k["devices"]) == 2
# tiny-gpt: 2 blocks of qkv, proj, fc, fc2 (the lm_head stays first-order).
assert len(k["layers"]) == 8, [l["name"] for l in k["layers"]]
assert not any("head" in l["name"] for l in k["layers"])
for d in k["devices"]:
    kinds = {i["item"] for i in d["items"]}
    assert {"curv_A", "curv_G", "inv_A", "inv_G", "precond"} <= kinds, kinds
    assert d["factor_bytes"] > 0 and p["pipeline_ranks"][d["device"]]["memory"]["kfac"] > 0
assert p["predicted"]["step_time_s"] >= k["first_order_step_time_s"]
assert k["fill"] == "items", k["fill"]
PY
grep -q "packing: whole items in gaps (PipeFisher)" "$work/k.txt" ||
  fail "plan summary lacks the packing"
# --kfac-fill fluid is recorded, and inspect reads it back and says so.
"$autoddl" plan tiny-gpt --cluster h200x2-nvlink --gpus 2 --global-batch 8 \
  --fix pp=2,schedule=1f1b --optimizer kfac --kfac-fill fluid -o "$work/kf.json" \
  >"$work/kf.txt" || fail "plan --kfac-fill fluid exited $?"
python3 - "$work/kf.json" <<'PY' || fail "plan --kfac-fill fluid content"
import json, sys
assert json.load(open(sys.argv[1]))["kfac"]["fill"] == "fluid"
PY
grep -q "packing: fluid" "$work/kf.txt" || fail "plan summary lacks fluid packing"
"$autoddl" inspect "$work/kf.json" >"$work/kfi.txt" || fail "inspect of a fluid plan exited $?"
grep -q "packing: fluid" "$work/kfi.txt" || fail "inspect lacks fluid packing"
python3 - "$work/kf.json" "$work/badfill.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1])); p["kfac"]["fill"] = "thread"
json.dump(p, open(sys.argv[2], "w"))
PY
"$autoddl" inspect "$work/k.json" --trace "$work/kt.json" >"$work/ki.txt" ||
  fail "inspect of a kfac plan exited $?"
grep -q "K-FAC:" "$work/ki.txt" || fail "inspect lacks the K-FAC summary"
python3 - "$work/kt.json" <<'PY' || fail "inspect trace lacks K-FAC items"
import json, sys
t = json.load(open(sys.argv[1]))
names = [e["name"] for e in t["traceEvents"] if e["ph"] == "X"]
assert any(n.startswith("curv_A h.0.") for n in names), names[:20]
assert any(n.startswith("inv_G ") for n in names)
PY
"$autoddl" plan tiny-gpt --cluster h200x2-nvlink --gpus 2 --global-batch 8 \
  --fix pp=2,schedule=1f1b -o "$work/f.json" >/dev/null || fail "first-order plan"
python3 - "$work/f.json" <<'PY' || fail "first-order plan has kfac keys"
import json, sys
p = json.load(open(sys.argv[1]))
assert "optimizer" not in p and "kfac" not in p
PY
# --kfac-refresh 1,3: one K per pipeline device in the plan, its layers and
# its summary (a K column).
"$autoddl" plan tiny-gpt --cluster h200x2-nvlink --gpus 2 --global-batch 8 \
  --fix pp=2,schedule=1f1b --optimizer kfac --kfac-refresh 1,3 -o "$work/k13.json" \
  >"$work/k13.txt" || fail "plan --kfac-refresh 1,3 exited $?"
python3 - "$work/k13.json" <<'PY' || fail "plan --kfac-refresh 1,3 content"
import json, sys
k = json.load(open(sys.argv[1]))["kfac"]
assert k["refresh_steps"] == 3 and k["refresh_pinned"] is True, k["refresh_steps"]
assert [d["refresh_steps"] for d in k["devices"]] == [1, 3], k["devices"]
assert all("refresh_steps" not in l for l in k["layers"])  # K once, per device
assert all(i["step"] == 0 for i in k["devices"][0]["items"])
PY
grep -Eq '^ +device +K +steps' "$work/k13.txt" || fail "plan summary lacks the K column"
grep -Eq '^ +1 +3 +[0-9]' "$work/k13.txt" || fail "plan summary lacks device 1's K = 3"
"$autoddl" inspect "$work/k13.json" >/dev/null || fail "inspect of a per-device K plan exited $?"
# A kfac object without the optimizer key is refused by the reader.
python3 - "$work/k.json" "$work/bad.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1])); del p["optimizer"]
json.dump(p, open(sys.argv[2], "w"))
PY

# One-line errors, exit 1, each naming its cause.
expect_error() { # expected-substring command...
  local want=$1
  shift
  "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  [ "$rc" -eq 1 ] || fail "$* exited $rc, expected 1"
  [ "$(wc -l <"$work/err")" -eq 1 ] || fail "$*: not one line: $(cat "$work/err")"
  grep -qF -- "$want" "$work/err" || fail "$*: '$(cat "$work/err")' lacks '$want'"
}
expect_error "expected \"optimizer\": \"kfac\" together with a \"kfac\" object" \
  "$autoddl" inspect "$work/bad.json"
expect_error "has no linear layer for K-FAC to precondition" \
  "$autoddl" plan "$fixtures/kfac-no-linear.json" --cluster h200x2-nvlink --gpus 2 \
  --global-batch 2 --optimizer kfac
expect_error "(1 computes the loss's logits" \
  "$autoddl" plan "$fixtures/kfac-head-only.json" \
  --cluster h200x2-nvlink --gpus 2 --global-batch 2 --optimizer kfac
expect_error "--kfac-damping must be a finite number > 0, got 0" \
  "$autoddl" plan tiny-gpt --cluster h200x2-nvlink --gpus 2 --global-batch 8 \
  --optimizer kfac --kfac-damping 0
expect_error "--kfac-damping must be a finite number > 0, got -1" \
  "$autoddl" plan tiny-gpt --cluster h200x2-nvlink --gpus 2 --global-batch 8 \
  --optimizer kfac --kfac-damping -1
expect_error "--kfac-refresh: needs --optimizer kfac" \
  "$autoddl" plan tiny-gpt --cluster h200x2-nvlink --gpus 2 --global-batch 8 \
  --kfac-refresh 2
expect_error "--kfac-refresh: expected 1..4096 steps, got 5000" \
  "$autoddl" plan tiny-gpt --cluster h200x2-nvlink --gpus 2 --global-batch 8 \
  --optimizer kfac --kfac-refresh 5000
expect_error "--kfac-refresh: lists 3 refresh intervals, one per pipeline device, but --fix pp=2" \
  "$autoddl" plan tiny-gpt --cluster h200x2-nvlink --gpus 2 --global-batch 8 \
  --optimizer kfac --fix pp=2 --kfac-refresh 1,2,3
expect_error "--kfac-refresh lists 3 refresh intervals, one per pipeline device, but no configuration with pp=3 applies" \
  "$autoddl" plan tiny-gpt --cluster h200x2-nvlink --gpus 2 --global-batch 8 \
  --optimizer kfac --kfac-refresh 1,2,3
expect_error "chimera's mirrored devices d and pp-1-d hold copies of the same layers and need one refresh interval" \
  "$autoddl" plan tiny-gpt --cluster h200x2-nvlink --gpus 2 --global-batch 8 \
  --optimizer kfac --fix pp=2,schedule=chimera,microbatch=1 --kfac-refresh 1,2
expect_error "--kfac-refresh: expected 1..4096 steps, got 0" \
  "$autoddl" plan tiny-gpt --cluster h200x2-nvlink --gpus 2 --global-batch 8 \
  --optimizer kfac --kfac-refresh 2,0
expect_error "--kfac-refresh: expected a number of steps or a comma-separated list" \
  "$autoddl" plan tiny-gpt --cluster h200x2-nvlink --gpus 2 --global-batch 8 \
  --optimizer kfac --kfac-refresh 2,x
expect_error "--kfac-refresh: needs --optimizer kfac" \
  "$autoddl" plan tiny-gpt --cluster h200x2-nvlink --gpus 2 --global-batch 8 \
  --kfac-refresh 1,2
expect_error "--kfac-refresh: lists 3 refresh intervals, one per pipeline device, but the schedule has 2" \
  "$autoddl" simulate --schedule 1f1b --stages 2 --microbatches 2 --pipefisher \
  --kfac-refresh 1,2,3
expect_error "pinned to different refresh intervals (1 and 2): copies of a layer share one K" \
  "$autoddl" simulate --schedule chimera --stages 2 --microbatches 2 --pipefisher \
  --kfac-refresh 1,2
expect_error "--kfac-fill: needs --optimizer kfac" \
  "$autoddl" plan tiny-gpt --cluster h200x2-nvlink --gpus 2 --global-batch 8 \
  --kfac-fill fluid
# Without --optimizer kfac even a bad value says what is missing first.
expect_error "--kfac-fill: needs --optimizer kfac" \
  "$autoddl" plan tiny-gpt --cluster h200x2-nvlink --gpus 2 --global-batch 8 \
  --kfac-fill x
expect_error "--kfac-fill: expected items or fluid, got \"x\"" \
  "$autoddl" plan tiny-gpt --cluster h200x2-nvlink --gpus 2 --global-batch 8 \
  --optimizer kfac --kfac-fill x
expect_error "--kfac-fill: expected items or fluid, got \"y\"" \
  "$autoddl" simulate --schedule 1f1b --stages 2 --microbatches 2 --pipefisher \
  --kfac-fill y
expect_error "at /kfac/fill: expected \"items\" or \"fluid\"" \
  "$autoddl" inspect "$work/badfill.json"
expect_error "--kfac-factor-stride: needs --optimizer kfac" \
  "$autoddl" plan tiny-gpt --cluster h200x2-nvlink --gpus 2 --global-batch 8 \
  --kfac-factor-stride 2
expect_error "--kfac-factor-stride 2 does not divide the micro-batch of 1 samples" \
  "$autoddl" plan tiny-gpt --cluster h200x2-nvlink --gpus 2 --global-batch 8 \
  --optimizer kfac --fix microbatch=1 --kfac-factor-stride 2
expect_error "--optimizer: expected adamw or kfac, got \"sgd\"" \
  "$autoddl" plan tiny-gpt --cluster h200x2-nvlink --gpus 2 --global-batch 8 \
  --optimizer sgd
# The first-order plan (2.7 GiB with the estimated overheads) fits in 4.1 GB less the 1 GiB
# margin; with its K-FAC state (factors, inverses, saved inputs: 3.0 GiB in all) it does not.
"$autoddl" plan "$fixtures/kfac-wide.json" --cluster "$fixtures/h200x2-small.json" \
  --gpus 2 --global-batch 2 --no-why >/dev/null || fail "first-order kfac-wide should fit"
expect_error "with --optimizer kfac, of which K-FAC state" \
  "$autoddl" plan "$fixtures/kfac-wide.json" --cluster "$fixtures/h200x2-small.json" \
  --gpus 2 --global-batch 2 --optimizer kfac
expect_error "--kfac-layers: expected at least 1 layer per stage, got 0" \
  "$autoddl" simulate --schedule 1f1b --stages 2 --microbatches 2 --pipefisher \
  --kfac-layers 0
expect_error "--inv: times must be >= 0, got -1" \
  "$autoddl" simulate --schedule 1f1b --stages 2 --microbatches 2 --pipefisher --inv -1
"$autoddl" simulate --schedule 1f1b --stages 2 --microbatches 2 --curv 1 \
  >/dev/null 2>&1 && fail "--curv without --pipefisher accepted"

[ "$failures" -eq 0 ] && echo "kfac_cli_test: all passed"
exit "$failures"
