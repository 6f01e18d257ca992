#!/usr/bin/env bash
# Anomalies reported, not silent (issue 46 item 5), ~15 s on 2 cores (the plan of e2e.verify.dp2,
# whose build AUTODDL_CACHE shares):
#  - a rank slowed on purpose (the test hook AUTODDL_TEST_SLOW_RANK) is named as a straggler in the
#    log and in metrics.json; a normal run names nobody;
#  - --on-nan rollback with a non-finite loss (the test hook AUTODDL_TEST_NAN_DATA poisons the loss
#    of the step reading one data batch): the run reloads the newest checkpoint, skips the data
#    since it and finishes; its losses after the rollback equal a run resumed from that checkpoint
#    with --data-skip, and a checkpoint written after the rollback resumes them with no flag;
#  - no checkpoint to reload, no rollbacks left, bad flags: one line each, exit status 1..123.
# Usage: anomalies.sh AUTODDL WORKDIR
set -uo pipefail
. "$(dirname "$0")/checkpoint_lib.sh"
checkpoint_test "$@" dp2

# A normal run (12 steps, the ranks compared every 4): nobody named.
"$autoddl" run "$w/plan.json" --steps 12 --out "$w/normal" -- --quiet --straggler-window 4 \
  > "$w/normal.log" 2>&1 || { cat "$w/normal.log"; fail "normal run"; }
train=$(sed -n 's/^autoddl: mpirun -np 2 \(.*\)$/\1/p' "$w/normal.log" | head -1)
[ -x "$train" ] || { cat "$w/normal.log"; fail "no program named in the log"; }
mpi() { mpirun --oversubscribe --allow-run-as-root -np 2 "$train" --quiet "$@"; }
! grep -q "straggler:" "$w/normal.log" || { cat "$w/normal.log"; fail "a normal run named a straggler"; }
python3 - "$w/normal/metrics.json" <<'PY' || fail "normal run: metrics.json stragglers"
import json, sys
i = json.load(open(sys.argv[1]))["info"]
assert i["stragglers"] == "none", i
assert len(i["rank_work_ms"].split()) == 2 and "every 4 steps" in i["straggler_check"], i
print("ok: a normal run names no straggler; per-rank work", i["rank_work_ms"], "ms")
PY

# Rank 1 sleeps 40 ms in each step's work: named for each window, rank 0 never.
AUTODDL_TEST_SLOW_RANK=1:40 mpi --steps 8 --straggler-window 4 --out "$w/slow" > "$w/slow.log" 2>&1 ||
  { cat "$w/slow.log"; fail "slow run"; }
grep -q "^straggler: rank 1 at steps 1-4: .* ms of work per step, .*x the median rank's" "$w/slow.log" &&
  grep -q "^straggler: rank 1 at steps 5-8: " "$w/slow.log" || { cat "$w/slow.log"; fail "rank 1 not named"; }
! grep -q "straggler: rank 0" "$w/slow.log" || { cat "$w/slow.log"; fail "rank 0 named"; }
python3 - "$w/slow/metrics.json" <<'PY' || fail "slow run: metrics.json stragglers"
import json, sys
i = json.load(open(sys.argv[1]))["info"]
s = i["stragglers"]
assert s.startswith("rank 1 at steps 1-4") and "rank 0" not in s, s
fast, slow = map(float, i["rank_work_ms"].split())
assert slow >= 40 and slow > 1.5 * fast, i
print("ok: the slowed rank is named:", s)
PY

# --on-nan rollback: the loss of the step reading batch 6 (step 7) is nan; checkpoints every 4
# steps, so the run reloads step-4 and skips batches 4-6: steps 5.. read batches 7...
AUTODDL_TEST_NAN_DATA=6 mpi --steps 12 --save "$w/ck" --save-every 4 --on-nan rollback \
  --out "$w/rb" > "$w/rb.log" 2>&1 || { cat "$w/rb.log"; fail "the rollback run failed"; }
grep -qx -- "--on-nan rollback 1 of 2: step 7: loss nan; reloaded $w/ck/step-4 (step 4); data batches 4-6 skipped" \
  "$w/rb.log" || { cat "$w/rb.log"; fail "no rollback line"; }
python3 - "$w/normal/metrics.json" "$w/rb/metrics.json" <<'PY' || fail "rollback run: metrics.json"
import json, sys
n, r = (json.load(open(p)) for p in sys.argv[1:3])
i = r["info"]
assert i["rollbacks"] == "1" and "data batches 4-6 skipped" in i["rollback_log"], i
assert i["data_skipped"] == "3", i
assert len(r["loss"]) == 12 and r["loss"][:4] == n["loss"][:4], (r["loss"], n["loss"])
assert r["loss"][4] != n["loss"][4], "step 5 read the skipped data"
print("ok: the run rolled back once and finished its 12 steps")
PY
# The same from step-4 with the window skipped by hand, and from step-8 (written after the
# rollback: its metadata records the skip) with no flag: the rollback run's losses, bitwise.
mpi --steps 12 --resume "$w/ck/step-4" --data-skip 3 --out "$w/replay" > "$w/replay.log" 2>&1 ||
  { cat "$w/replay.log"; fail "replaying the rollback"; }
losses_match "$w/rb/metrics.json" "$w/replay/metrics.json" || fail "replayed losses differ"
mpi --steps 12 --resume "$w/ck/step-8" --out "$w/after8" > "$w/after8.log" 2>&1 ||
  { cat "$w/after8.log"; fail "resuming after the rollback"; }
losses_match "$w/rb/metrics.json" "$w/after8/metrics.json" || fail "losses resumed from step-8 differ"
echo "ok: the losses after the rollback equal a run resumed from step-4 skipping batches 4-6"

# Without a checkpoint, with no rollback left, without the option: one line, exit status 1..123.
AUTODDL_TEST_NAN_DATA=1 expect_error "nan before any checkpoint" \
  "step 2: the loss is nan: training diverged (try a lower --lr); no outputs or checkpoint written; --on-nan rollback: no checkpoint under $w/none to reload" \
  mpi --steps 6 --save "$w/none" --save-every 4 --on-nan rollback
AUTODDL_TEST_NAN_DATA=6 expect_error "no rollbacks left" \
  "the 0 rollbacks of --on-nan-retries are spent" \
  mpi --steps 8 --save "$w/ck0" --save-every 4 --on-nan rollback --on-nan-retries 0
AUTODDL_TEST_NAN_DATA=2 expect_error "nan without --on-nan rollback" "step 3: the loss is nan" \
  mpi --steps 4
expect_error "--on-nan rollback without --save" "--on-nan rollback: needs --save DIR" \
  mpi --steps 4 --on-nan rollback
expect_error "a bad --on-nan" "--on-nan: expected stop or rollback, got retry" mpi --on-nan retry
expect_error "a bad --straggler-factor" "--straggler-factor: expected 0 (off) or a factor > 1" \
  mpi --straggler-factor 0.5
