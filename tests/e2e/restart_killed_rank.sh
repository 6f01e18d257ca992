#!/usr/bin/env bash
# Faults and checkpoints of a generated CPU program (issue 46, items 1, 2 and 6), ~15 s on 2 cores
# (the plan of e2e.verify.dp2, whose build AUTODDL_CACHE shares):
#  - `autoddl run --restarts 1` with rank 1 killed mid-run (AUTODDL_TEST_KILL_RANK): every rank
#    exits at once, mpirun names the rank, the job comes back from the newest checkpoint by itself
#    (--resume auto), and its losses after the restart equal the uninterrupted run's, bitwise;
#  - the asynchronous save writes the bytes --save-sync writes;
#  - the writer killed mid-write (AUTODDL_TEST_KILL_CHECKPOINT_WRITE): the folder being written
#    never appears, the previous checkpoint is complete and --resume auto resumes it exactly;
#  - bad input: a truncated checkpoint, another vocabulary, another model's checkpoint, a --resume
#    auto folder holding only incomplete checkpoints, --restarts without --save: each one line
#    naming the file, exit status 1..123, nothing written or overwritten.
# Usage: restart_killed_rank.sh AUTODDL WORKDIR
set -uo pipefail
. "$(dirname "$0")/checkpoint_lib.sh"
checkpoint_test "$@" dp2

run() { "$autoddl" run "$w/plan.json" --steps 8 "$@"; }

# The uninterrupted run, asynchronous checkpoints every 2 steps; and the same with --save-sync.
run --out "$w/full" -- --quiet --save "$w/ck_full" --save-every 2 > "$w/full.log" 2>&1 ||
  { cat "$w/full.log"; fail "uninterrupted run"; }
train=$(sed -n 's/^autoddl: mpirun -np 2 \(.*\)$/\1/p' "$w/full.log" | head -1)
[ -x "$train" ] || { cat "$w/full.log"; fail "no program named in the log"; }
mpi() { mpirun --oversubscribe --allow-run-as-root -np 2 "$train" --steps 8 --quiet "$@"; }
mpi --save "$w/ck_sync" --save-every 2 --save-sync --out "$w/sync" || fail "--save-sync run"
for f in model optimizer; do
  cmp -s "$w/ck_full/step-6/$f.safetensors" "$w/ck_sync/step-6/$f.safetensors" ||
    fail "the asynchronous $f.safetensors differs from the synchronous one"
done
python3 - "$w/full/metrics.json" "$w/sync/metrics.json" <<'PY' || fail "metrics.json checkpoints"
import json, sys
a, s = (json.load(open(p)) for p in sys.argv[1:3])
assert a["loss"] == s["loss"], "--save-sync changed the losses"
for m, mode in ((a, "async"), (s, "sync")):
    c = m["checkpoints"]
    assert [x["step"] for x in c] == [2, 4, 6, 8] and all(x["mode"] == mode for x in c), c
    assert all(x["write_seconds"] > 0 and x["stall_seconds"] >= x["waited_seconds"] >= 0 for x in c), c
print("ok: async and sync saves write the same bytes; stall and write times in metrics.json")
PY

# Rank 1 killed before step 5 (0-based); one restart resumes the newest complete checkpoint.
start=$(date +%s)
AUTODDL_TEST_KILL_RANK=1:5 timeout 300 "$autoddl" run "$w/plan.json" --steps 8 --restarts 1 \
  --out "$w/restarted" -- --quiet --save "$w/ck" --save-every 2 > "$w/restart.log" 2>&1 ||
  { cat "$w/restart.log"; fail "the restarted job failed"; }
grep -q "process rank 1 .*signal 9" "$w/restart.log" || { cat "$w/restart.log"; fail "no message naming rank 1"; }
grep -q "restart 1 of 1 from the newest checkpoint under $w/ck" "$w/restart.log" ||
  { cat "$w/restart.log"; fail "no restart announced"; }
grep -q "^--resume auto: resuming from $w/ck/step-[24]$" "$w/restart.log" ||
  { cat "$w/restart.log"; fail "the restart did not resume step-2 or step-4"; }
[ $(($(date +%s) - start)) -lt 120 ] || fail "the killed job took over 120 s to come back"
losses_match "$w/full/metrics.json" "$w/restarted/metrics.json" || fail "restarted losses differ"
echo "ok: a killed rank ends the job, naming the rank; the restart's losses are the uninterrupted run's"

# The writer killed after the first file of step-4: step-2 stays complete and is resumed exactly.
AUTODDL_TEST_KILL_CHECKPOINT_WRITE=4 mpi --save "$w/ck_cut" --save-every 2 > "$w/cut.log" 2>&1 &&
  fail "the run with its writer killed exited 0"
[ -f "$w/ck_cut/.step-4.tmp/model.safetensors" ] || fail "the killed write left no partial folder"
[ ! -e "$w/ck_cut/step-4" ] || fail "a partly written step-4 appeared"
mpi --save "$w/ck_cut" --save-every 2 --resume auto --out "$w/after_cut" > "$w/after_cut.log" 2>&1 ||
  { cat "$w/after_cut.log"; fail "resuming after the killed write"; }
grep -q "^--resume auto: resuming from $w/ck_cut/step-2$" "$w/after_cut.log" ||
  { cat "$w/after_cut.log"; fail "--resume auto did not take step-2"; }
losses_match "$w/full/metrics.json" "$w/after_cut/metrics.json" || fail "losses after the killed write differ"
echo "ok: a writer killed mid-write leaves the previous checkpoint complete and loadable"

# Bad input. Each checkpoint below is a copy of step-6, altered; nothing may change.
bad=$w/bad && mkdir -p "$bad"
cp -r "$w/ck_full/step-6" "$bad/truncated"
head -c 3000 "$w/ck_full/step-6/model.safetensors" > "$bad/truncated/model.safetensors"
python3 - "$w/ck_full/step-6" "$bad" "$here" <<'PY' || fail "making the altered checkpoints"
import json, os, shutil, struct, sys
src, bad, here = sys.argv[1:4]
sys.path.insert(0, here)
from safetensors_io import read, write
head, data = read(f"{src}/model.safetensors")
# Another vocabulary: the token embedding one row longer (the data appended at the end).
emb = next(k for k in head if k != "__metadata__" and "wte" in k)
rows, cols = head[emb]["shape"]
end = len(data)
head[emb] = {"dtype": "F32", "shape": [rows + 1, cols], "data_offsets": [end, end + 4 * (rows + 1) * cols]}
shutil.copytree(src, f"{bad}/vocab")
write(f"{bad}/vocab/model.safetensors", head, data + b"\0" * (4 * (rows + 1) * cols))
# Another model: the same tensors under another model's name in the metadata.
head, data = read(f"{src}/model.safetensors")
head["__metadata__"]["model"] = "tiny-llama"
shutil.copytree(src, f"{bad}/model")
write(f"{bad}/model/model.safetensors", head, data)
PY
# A --resume auto folder whose only checkpoint is truncated (and a killed write's leftover).
mkdir -p "$bad/auto/.step-8.tmp" && cp -r "$bad/truncated" "$bad/auto/step-6"
sums() { find "$bad" -type f | sort | xargs md5sum; }
before=$(sums)
expect_error "truncated checkpoint" "$bad/truncated/model.safetensors: " \
  mpi --resume "$bad/truncated" --save "$bad/out1"
expect_error "another vocabulary" "$bad/vocab/model.safetensors: tensor \"$(python3 -c "
import json,struct,sys; b=open(sys.argv[1],'rb').read(); h=json.loads(b[8:8+struct.unpack('<Q',b[:8])[0]])
print(next(k for k in h if 'wte' in k))" "$bad/vocab/model.safetensors")\" has shape" \
  mpi --resume "$bad/vocab" --save "$bad/out2"
expect_error "another model" "$bad/model/model.safetensors: a checkpoint of model \"tiny-llama\"" \
  mpi --resume "$bad/model" --save "$bad/out3"
expect_error "--resume auto with only incomplete checkpoints" \
  "--resume auto: $bad/auto: no complete checkpoint ($bad/auto/step-6/model.safetensors: " \
  mpi --resume auto --save "$bad/auto" --save-every 2
expect_error "--restarts without --save" "--restarts: a restart resumes from the run's checkpoints" \
  "$autoddl" run "$w/plan.json" --steps 2 --restarts 2
[ "$(sums)" = "$before" ] || fail "a bad run changed a file under $bad"
[ ! -e "$bad/out1" ] && [ ! -e "$bad/out2" ] && [ ! -e "$bad/out3" ] || fail "a bad run created its --save folder"
[ "$(ls -A "$bad/auto")" = "$(printf '.step-8.tmp\nstep-6')" ] || fail "--resume auto wrote into $bad/auto"
echo "ok: bad checkpoints are one line naming the file; nothing written or overwritten"
