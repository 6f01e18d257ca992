#!/usr/bin/env bash
# Compressed checkpoints (issue 46 item 4, BitSnap), ~15 s on 2 cores (the plan of e2e.verify.dp2,
# whose build AUTODDL_CACHE shares): --checkpoint-compress --checkpoint-full-every 2 saves step-2
# and step-6 full and step-4 and step-8 as bitsnap.safetensors and bitsnap.1.safetensors (each
# rank's part: parameter deltas against the base, quantized moments), smaller than a full one;
#  - a run resumed from the compressed step-4 has the parameters of the uncompressed run's step-4
#    bit for bit (the delta is lossless: checked through a step at --lr 0) and losses within 1e-3
#    of the uninterrupted run's (the moments are quantized);
#  - --resume auto takes a compressed folder, and so does --on-nan rollback (the next save then
#    full);
#  - its base missing, or another plan (e2e.verify.tp2's, built in the cache too): one line
#    naming the file, exit status 1..123; the full base resumes under that plan.
# Usage: compressed_checkpoint.sh AUTODDL WORKDIR
set -uo pipefail
. "$(dirname "$0")/checkpoint_lib.sh"
checkpoint_test "$@" dp2

"$autoddl" run "$w/plan.json" --steps 8 --out "$w/full" -- --quiet --save "$w/ck" --save-every 2 \
  > "$w/full.log" 2>&1 || { cat "$w/full.log"; fail "uncompressed run"; }
train=$(sed -n 's/^autoddl: mpirun -np 2 \(.*\)$/\1/p' "$w/full.log" | head -1)
[ -x "$train" ] || { cat "$w/full.log"; fail "no program named in the log"; }
mpi() { mpirun --oversubscribe --allow-run-as-root -np 2 "$train" --quiet "$@"; }
mpi --steps 8 --save "$w/cz" --save-every 2 --checkpoint-compress --checkpoint-full-every 2 \
  --out "$w/cz_run" > "$w/cz.log" 2>&1 || { cat "$w/cz.log"; fail "compressed run"; }
for s in 2 6; do [ -f "$w/cz/step-$s/model.safetensors" ] || fail "step-$s is not a full checkpoint"; done
for s in 4 8; do
  # A file per rank, each encoded and written by its rank alone.
  [ "$(ls "$w/cz/step-$s" | tr '\n' ' ')" = "bitsnap.1.safetensors bitsnap.safetensors " ] ||
    fail "step-$s is not a compressed checkpoint"
done
python3 - "$w" <<'PY' || fail "sizes and metrics.json"
import json, os, sys
w = sys.argv[1]
full = sum(os.path.getsize(f"{w}/ck/step-4/{f}") for f in ("model.safetensors", "optimizer.safetensors"))
comp = sum(os.path.getsize(f"{w}/cz/step-4/{f}")
           for f in ("bitsnap.safetensors", "bitsnap.1.safetensors"))
m = json.load(open(f"{w}/cz_run/metrics.json"))
note = m["info"]["checkpoint_compress"]
assert note.startswith("step-4: ") and "; step-8: " in note, note
a, b = json.load(open(f"{w}/full/metrics.json"))["loss"], m["loss"]
assert a == b, "compressing the checkpoints changed the run"
print(f"ok: step-4 compressed to {comp} bytes of {full} ({full / comp:.2f}x over both ranks' parts); rank 0: {note}")
assert comp < full
PY
# Resumed from the compressed step-4: its parameters exactly (a step at --lr 0 keeps them).
mpi --steps 5 --resume "$w/cz/step-4" --lr 0 --save "$w/lr0" > "$w/lr0.log" 2>&1 ||
  { cat "$w/lr0.log"; fail "resuming the compressed step-4 at --lr 0"; }
mpi --steps 5 --resume "$w/ck/step-4" --lr 0 --save "$w/lr0_full" > "$w/lr0_full.log" 2>&1 ||
  { cat "$w/lr0_full.log"; fail "resuming the full step-4 at --lr 0"; }
cmp -s "$w/lr0/step-5/model.safetensors" "$w/lr0_full/step-5/model.safetensors" ||
  fail "the parameters resumed from the compressed step-4 differ from the full step-4's"
mpi --steps 8 --resume "$w/cz/step-4" --out "$w/resumed" > "$w/resumed.log" 2>&1 ||
  { cat "$w/resumed.log"; fail "resuming the compressed step-4"; }
losses_match "$w/full/metrics.json" "$w/resumed/metrics.json" 1e-3 || fail "resumed losses too far"
echo "ok: a compressed checkpoint resumes: its parameters exact, its losses within 1e-3"
# A version-1 folder (every rank's part in bitsnap.safetensors, no bitsnap_version; the same
# decode) still loads: step-4's two files merged into one resume to the same losses, bitwise.
mkdir -p "$w/v1/step-4" && cp -r "$w/cz/step-2" "$w/v1/"
python3 - "$w" <<'PY' || fail "merging step-4 into a version-1 folder"
import json, struct, sys
w = sys.argv[1]
def read(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]
h0, d0 = read(f"{w}/cz/step-4/bitsnap.safetensors")
h1, d1 = read(f"{w}/cz/step-4/bitsnap.1.safetensors")
meta = h0.pop("__metadata__")
for key in ("bitsnap_version", "raw_bytes", "encoded_bytes"):
    meta.pop(key)
part1 = h1["part.1"]
part1["data_offsets"] = [len(d0), len(d0) + len(d1)]
head = json.dumps({"__metadata__": meta, "part.0": h0["part.0"], "part.1": part1}).encode()
head += b" " * (-len(head) % 8)
open(f"{w}/v1/step-4/bitsnap.safetensors", "wb").write(struct.pack("<Q", len(head)) + head + d0 + d1)
PY
mpi --steps 8 --resume "$w/v1/step-4" --out "$w/v1_resumed" > "$w/v1.log" 2>&1 ||
  { cat "$w/v1.log"; fail "resuming a version-1 folder"; }
python3 -c 'import json, sys; a, b = (json.load(open(p))["loss"] for p in sys.argv[1:]); sys.exit(a != b)' \
  "$w/resumed/metrics.json" "$w/v1_resumed/metrics.json" || fail "a version-1 folder resumed to other losses"
echo "ok: a version-1 compressed folder (one file of every part) loads"
mpi --steps 8 --save "$w/cz" --resume auto > "$w/auto.log" 2>&1 || { cat "$w/auto.log"; fail "--resume auto"; }
grep -q "^--resume auto: resuming from $w/cz/step-8$" "$w/auto.log" || { cat "$w/auto.log"; fail "--resume auto"; }
# A rollback to the compressed step-4 (the loss of the step reading batch 5 poisoned): the run
# finishes, its next save (step-6) full, and its losses up to step 4 the exact run's.
AUTODDL_TEST_NAN_DATA=5 mpi --steps 8 --save "$w/rb" --save-every 2 --checkpoint-compress \
  --checkpoint-full-every 2 --on-nan rollback --out "$w/rb_run" > "$w/rb.log" 2>&1 ||
  { cat "$w/rb.log"; fail "rollback to a compressed checkpoint"; }
grep -q "^--on-nan rollback 1 of 2: step 6: loss nan; reloaded $w/rb/step-4 (step 4); data batches 4-5 skipped$" \
  "$w/rb.log" || { cat "$w/rb.log"; fail "no rollback to step-4"; }
[ -f "$w/rb/step-6/model.safetensors" ] && [ -f "$w/rb/step-8/bitsnap.safetensors" ] ||
  fail "after the rollback: step-6 not full or step-8 not compressed"
echo "ok: --on-nan rollback reloads a compressed checkpoint; the next save is full"

# Bad input: the base gone; another plan.
mv "$w/cz/step-2" "$w/step-2.away"
expect_error "a compressed checkpoint without its base" \
  "$w/cz/step-4/bitsnap.safetensors: its base $w/cz/step-2/model.safetensors is missing" \
  mpi --steps 8 --resume "$w/cz/step-4"
mv "$w/step-2.away" "$w/cz/step-2"
"$autoddl" plan tiny-gpt --cluster dgx-h100-ndr --gpus 2 --global-batch 8 --seq 16 \
  --fix tp=2,pp=1,dp=1 --no-why -o "$w/tp2.json" > /dev/null || fail "plan tp2"
python3 "$here/../lit/codegen/megatron.py" "$w/tp2.json" --level 1 || fail "megatron.py tp2"
"$autoddl" run "$w/tp2.json" --steps 1 -- --quiet > "$w/tp2.log" 2>&1 || { cat "$w/tp2.log"; fail "tp2 run"; }
tp2=$(sed -n 's/^autoddl: mpirun -np 2 \(.*\)$/\1/p' "$w/tp2.log" | head -1)
expect_error "a compressed checkpoint under another plan" \
  "$w/cz/step-4/bitsnap.safetensors: a compressed checkpoint of plan \"tp=1 pp=1 dp=2" \
  mpirun --oversubscribe --allow-run-as-root -np 2 "$tp2" --quiet --steps 8 --resume "$w/cz/step-4"
mpirun --oversubscribe --allow-run-as-root -np 2 "$tp2" --quiet --steps 8 --resume "$w/cz/step-2" \
  > "$w/tp2_base.log" 2>&1 || { cat "$w/tp2_base.log"; fail "the full base under tp2"; }
echo "ok: a missing base and another plan are one line naming the file; the base resumes under tp2"
