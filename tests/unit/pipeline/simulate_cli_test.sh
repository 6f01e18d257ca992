#!/usr/bin/env bash
# `autoddl simulate` end to end: JSON fields, the trace file, one-line errors
# with exit 1, and no trace written when the input is bad.
# Usage: simulate_cli_test.sh path/to/autoddl
set -uo pipefail
autoddl=${1:?usage: simulate_cli_test.sh path/to/autoddl}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# 1F1B, p=4, m=8, f=1, b=2: makespan (m+p-1)(f+b) = 33, bubble 3/11.
"$autoddl" simulate --schedule 1f1b --stages 4 --microbatches 8 --json \
  --trace "$work/t.json" >"$work/out.json" || fail "1f1b run exited $?"
python3 - "$work/out.json" "$work/t.json" <<'PY' || fail "1f1b json/trace content"
import json, sys
out = json.load(open(sys.argv[1]))
assert abs(out["makespan"] - 33) < 1e-9, out["makespan"]
assert abs(out["bubble_fraction"] - 3 / 11) < 1e-9, out["bubble_fraction"]
assert len(out["stages"]) == 4
# Stage s of 1F1B holds min(p - s, m) activations.
assert [s["peak_activations"] for s in out["stages"]] == [4, 3, 2, 1]
for s in out["stages"]:
    idle = sum(i["end"] - i["start"] for i in s["idle"])
    assert abs(idle - 9) < 1e-9, idle  # (p-1)(f+b) per stage
trace = json.load(open(sys.argv[2]))
names = [e for e in trace["traceEvents"] if e["ph"] == "X"]
assert len(names) == 4 * 8 * 2, len(names)
threads = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
assert threads == {"stage 0", "stage 1", "stage 2", "stage 3"}, threads
PY

# Per-stage lists and --ops: GPipe p=2 m=2 f=(1,2) b=(2,3) p2p 0.5 is worked
# by hand in HandWorkedTest.cpp: makespan 14.
"$autoddl" simulate --schedule gpipe --stages 2 --microbatches 2 --fwd 1,2 \
  --bwd 2,3 --p2p 0.5 --json --ops >"$work/g.json" || fail "gpipe run"
python3 - "$work/g.json" <<'PY' || fail "gpipe per-stage lists"
import json, sys
out = json.load(open(sys.argv[1]))
assert abs(out["makespan"] - 14) < 1e-9, out["makespan"]
assert [op["kind"] for op in out["stages"][0]["ops"]] == ["F", "F", "BW", "BW"]
PY

# zb-h1 defaults wgrad to bwd/2: (p-1)(f + bwd - 2w) = 3 idle per stage.
"$autoddl" simulate --schedule zb-h1 --stages 4 --microbatches 8 --json \
  >"$work/z.json" || fail "zb-h1 run"
python3 -c "import json,sys; o=json.load(open('$work/z.json')); assert abs(o['makespan']-27)<1e-9, o['makespan']" \
  || fail "zb-h1 makespan"

# The human table mentions makespan and bubble fraction.
"$autoddl" simulate --schedule chimera --stages 4 --microbatches 4 --bwd 1 \
  >"$work/c.txt" || fail "chimera run"
grep -q "makespan         10 ms" "$work/c.txt" || fail "chimera table: $(cat "$work/c.txt")"

expect_error() {
  local pattern=$1
  shift
  echo keep >"$work/keep.json"
  "$autoddl" simulate "$@" --trace "$work/keep.json" >"$work/stdout" 2>"$work/stderr"
  local rc=$?
  [ "$rc" -ne 0 ] || fail "expected failure: $*"
  [ "$(wc -l <"$work/stderr")" -eq 1 ] || fail "not one line: $* -> $(cat "$work/stderr")"
  grep -q -- "$pattern" "$work/stderr" || fail "message for $*: $(cat "$work/stderr")"
  [ "$(cat "$work/keep.json")" = keep ] || fail "trace overwritten on error: $*"
}
expect_error "unknown schedule 'pipedream' (expected one of gpipe, 1f1b" \
  --schedule pipedream --stages 4 --microbatches 8
expect_error "even number of stages" --schedule chimera --stages 3 --microbatches 6
expect_error "micro-batches must be at least 1" --schedule 1f1b --stages 4 --microbatches 0
expect_error "stages must be at least 1" --schedule gpipe --stages -1 --microbatches 4
expect_error "--chunks applies only to --schedule interleaved" \
  --schedule 1f1b --stages 4 --microbatches 8 --chunks 2
expect_error "at least 2 chunks" --schedule interleaved --stages 4 --microbatches 8 --chunks 1
expect_error "multiple of stages" --schedule interleaved --stages 4 --microbatches 6
expect_error "--wgrad 3 exceeds --bwd 2" --schedule zb-h1 --stages 2 --microbatches 2 --wgrad 3
expect_error "--fwd: times must be >= 0" --schedule 1f1b --stages 2 --microbatches 2 --fwd -1
expect_error "--bwd: expected one time or one per stage (4), got 2" \
  --schedule 1f1b --stages 4 --microbatches 2 --bwd 1,2
expect_error "--fwd: '1,x' is not a number" --schedule 1f1b --stages 2 --microbatches 2 --fwd 1,x
expect_error "--p2p: time must be a finite number" --schedule 1f1b --stages 2 --microbatches 2 --p2p -2
expect_error "too large" --schedule 1f1b --stages 100000 --microbatches 100000

if [ "$failures" -ne 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "simulate CLI: all checks passed"
