# Shared by the checkpoint tests (restart_killed_rank.sh, resume_other_plan.sh, anomalies.sh,
# compressed_checkpoint.sh): each sources it and calls checkpoint_test AUTODDL WORKDIR [dp2].
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
fail() { echo "FAIL: $*"; exit 1; }
# expect_error WHAT PATTERN CMD...: CMD exits with a status in 1..123 and prints PATTERN, in one
# error line.
expect_error() {
  local what=$1 pattern=$2; shift 2
  "$@" > "$w/err.txt" 2>&1
  local rc=$?
  { [ "$rc" -ge 1 ] && [ "$rc" -le 123 ]; } || { cat "$w/err.txt"; fail "$what: exit status $rc"; }
  grep -qF -- "$pattern" "$w/err.txt" || { cat "$w/err.txt"; fail "$what: no \"$pattern\" in the message"; }
  [ "$(grep -c "error:" "$w/err.txt")" = 1 ] || { cat "$w/err.txt"; fail "$what: not one error line"; }
  echo "ok: $what -> $(grep -m1 -F -- "$pattern" "$w/err.txt")"
}
# losses_match FULL RESUMED [TOLERANCE]: RESUMED's losses (from its first step on, > 0) are FULL's,
# bit for bit, or within the relative TOLERANCE.
losses_match() {
  python3 - "$1" "$2" "${3:-0}" <<'PY'
import json, sys
full, resumed = (json.load(open(p)) for p in sys.argv[1:3])
tol = float(sys.argv[3])
first = int(resumed["info"]["first_step"])
want, got = full["loss"][first:], resumed["loss"]
print(f"  steps {first}..: before {want}")
print(f"  steps {first}..: after  {got}")
ok = first > 0 and len(got) == len(want) > 0 and all(
    a == b if tol == 0 else abs(a - b) <= tol * abs(a) for a, b in zip(want, got))
sys.exit(0 if ok else 1)
PY
}
# plan_dp2: $w/plan.json, e2e.verify.dp2's plan (the same bytes: its build in the cache).
plan_dp2() {
  "$autoddl" plan tiny-gpt --cluster dgx-h100-ndr --gpus 2 --global-batch 8 --seq 16 \
    --fix tp=1,pp=1,dp=2 --no-why -o "$w/plan.json" > /dev/null || fail plan
  python3 "$here/../lit/codegen/megatron.py" "$w/plan.json" --level 0 || fail megatron.py
}
# checkpoint_test AUTODDL WORKDIR [dp2]: $autoddl and $w set, $w emptied; with dp2, plan_dp2.
checkpoint_test() {
  autoddl=$1 w=$2
  rm -rf "$w" && mkdir -p "$w"
  [ "${3:-}" = dp2 ] && plan_dp2
  return 0
}
