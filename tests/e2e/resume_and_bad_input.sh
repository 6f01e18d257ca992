#!/usr/bin/env bash
# Resume exactness and bad input of generated programs (issue 5, items 5 and 8).
#  - a pp=2 run of 6 steps saving at step 3, and a run resumed from step-3: losses of steps 3..5
#    must be equal (the same bits: same data order, same state);
#  - the same under --warmup 2 --lr-decay cosine --grad-clip 1: metrics.json's lr per step, and
#    resumed bitwise (the clip's norms too);
#  - --init of that checkpoint's model.safetensors: the run starts from exactly its tensors;
#  - a plan of another schema version, a corrupted plan, a non-empty directory that is not an
#    autoddl project, a rank count other than the plan's, a missing data file, a checkpoint of
#    another model, the same RANK on every rank: each a one-line error, non-zero exit, nothing
#    overwritten.
# Usage: resume_and_bad_input.sh AUTODDL WORKDIR
set -uo pipefail
autoddl=$1 w=$2
rm -rf "$w" && mkdir -p "$w"
fail() { echo "FAIL: $*"; exit 1; }
mpi() { mpirun --oversubscribe --allow-run-as-root "$@"; }
build() { "$(dirname "$0")/build_project.sh" "$1" || fail "build of $1 (see $1/cmake.log)"; }
# expect_error WHAT PATTERN CMD...: CMD must exit non-zero and print PATTERN.
expect_error() {
  local what=$1 pattern=$2; shift 2
  if "$@" > "$w/err.txt" 2>&1; then fail "$what: exit status 0"; fi
  grep -q -- "$pattern" "$w/err.txt" || { cat "$w/err.txt"; fail "$what: no \"$pattern\" in the message"; }
  echo "ok: $what -> $(grep -m1 -- "$pattern" "$w/err.txt")"
}

"$autoddl" plan tiny-gpt --cluster dgx-h100-ndr --gpus 2 --global-batch 8 --seq 16 \
  --fix tp=1,pp=2,dp=1,microbatch=2,schedule=1f1b --no-why -o "$w/plan.json" > /dev/null || fail plan
"$autoddl" codegen "$w/plan.json" --backend cpu -o "$w/gpt" > /dev/null || fail codegen
build "$w/gpt"
mpi -np 2 "$w/gpt/build/train" --steps 6 --save "$w/ck" --save-every 3 --out "$w/full" --quiet || fail "full run"
mpi -np 2 "$w/gpt/build/train" --steps 6 --resume "$w/ck/step-3" --out "$w/resumed" --quiet || fail "resumed run"
python3 - "$w/full/metrics.json" "$w/resumed/metrics.json" <<'PY' || fail "resume is not exact"
import json, sys
full = json.load(open(sys.argv[1]))["loss"]
resumed = json.load(open(sys.argv[2]))["loss"]
print("uninterrupted steps 3..5:", full[3:])
print("resumed       steps 3..5:", resumed)
sys.exit(0 if full[3:] == resumed else 1)
PY
echo "ok: resume is exact"

# The learning-rate schedule: metrics.json's lr is nanoGPT's (warm-up lr (s+1)/2, then cosine down
# to 0.1 lr at step 6), and a run resumed at step 3 goes on with the same lrs and losses, bitwise.
sched=(--warmup 2 --lr-decay cosine --lr 1e-3 --grad-clip 1)
mpi -np 2 "$w/gpt/build/train" --steps 6 "${sched[@]}" --save "$w/ck-sched" --save-every 3 \
  --out "$w/sched-full" --quiet || fail "scheduled run"
mpi -np 2 "$w/gpt/build/train" --steps 6 "${sched[@]}" --resume "$w/ck-sched/step-3" \
  --out "$w/sched-resumed" --quiet || fail "resumed scheduled run"
python3 - "$w/sched-full/metrics.json" "$w/sched-resumed/metrics.json" "$w/full/metrics.json" <<'PY' || fail "learning-rate schedule"
import json, math, sys
full, resumed, plain = (json.load(open(p)) for p in sys.argv[1:])
lr, floor = 1e-3, 1e-4
want = [lr / 2, lr] + [floor + (lr - floor) * (1 + math.cos(math.pi * (s - 2) / 4)) / 2 for s in range(2, 6)]
print("lr:", full["lr"])
checks = {
    "the schedule's lrs": all(math.isclose(a, b, rel_tol=1e-12) for a, b in zip(full["lr"], want)) and len(full["lr"]) == 6,
    "no flags: --lr every step": plain["lr"] == [lr] * 6,
    "resumed lrs": resumed["lr"] == full["lr"][3:],
    "resumed losses": resumed["loss"] == full["loss"][3:],
    # --grad-clip keeps no state: the resumed run given it clips as the uninterrupted one did.
    "resumed norms": resumed["grad_norm"] == full["grad_norm"][3:] and min(full["grad_norm"]) > 1,
    "no --grad-clip: no norms": "grad_norm" not in plain,
    # Step 0's loss is before any update; step 1's follows an update at lr/2.
    "the optimizer took the lr": full["loss"][0] == plain["loss"][0] and full["loss"][1] != plain["loss"][1],
}
for what, ok in checks.items():
    print(("ok: " if ok else "FAIL: ") + what)
sys.exit(0 if all(checks.values()) else 1)
PY
echo "ok: the learning-rate schedule, and its resume, are exact"
expect_error "--min-lr above --lr" "--min-lr: 0.01 is above --lr 0.001" mpi -np 2 "$w/gpt/build/train" \
  --steps 1 --lr-decay cosine --min-lr 1e-2

# --init: another run's parameters replace the initial ones (seed 99 would draw others); the
# step-0 save must hold exactly the step-3 tensors.
mpi -np 2 "$w/gpt/build/train" --steps 1 --seed 99 --init "$w/ck/step-3/model.safetensors" \
  --save "$w/init" --save-initial --quiet || fail "run with --init"
python3 - "$w/ck/step-3/model.safetensors" "$w/init/step-0/model.safetensors" <<'PY' || fail "--init did not load the parameters"
import json, struct, sys
def tensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    head = json.loads(b[8:8 + n])
    head.pop("__metadata__", None)
    return {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in head.items()}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
print(len(a), "tensors;", "equal" if a == b else "DIFFERENT")
sys.exit(0 if a == b and a else 1)
PY
echo "ok: --init loads the parameters"
expect_error "--init with --resume" "give one" mpi -np 2 "$w/gpt/build/train" --steps 4 \
  --init "$w/ck/step-3/model.safetensors" --resume "$w/ck/step-3"

ck="$w/ck/step-3/model.safetensors"
sum_before=$(md5sum "$ck")
# Another schema version, a corrupted plan.
sed 's/"version": 1/"version": 7/' "$w/plan.json" > "$w/plan-v7.json"
expect_error "plan of another version" "version" "$autoddl" codegen "$w/plan-v7.json" -o "$w/out-v7"
[ -e "$w/out-v7" ] && fail "a directory was created for a bad plan"
head -c 200 "$w/plan.json" > "$w/plan-cut.json"
expect_error "corrupted plan" "plan-cut.json" "$autoddl" codegen "$w/plan-cut.json" -o "$w/out-cut"
# A non-empty directory that is not an autoddl project stays untouched.
mkdir -p "$w/mine" && echo precious > "$w/mine/notes.txt"
expect_error "non-empty directory" "refusing" "$autoddl" codegen "$w/plan.json" -o "$w/mine"
[ "$(cat "$w/mine/notes.txt")" = precious ] && [ "$(ls "$w/mine")" = notes.txt ] || fail "mine/ was touched"
# Rank count, missing data, verify of a plan on the wrong rank count.
expect_error "rank count" "needs 2 ranks" mpi -np 1 "$w/gpt/build/train" --steps 1
# The same RANK exported to every rank (issue 49): named at start-up by every rank, not a hang.
expect_error "the same RANK on every rank" "RANK=0 on MPI rank 1 (as on MPI rank 0)" \
  env RANK=0 WORLD_SIZE=2 timeout 60 mpirun --oversubscribe --allow-run-as-root -np 2 \
  "$w/gpt/build/train" --steps 1
expect_error "missing data file" "no-such-file" mpi -np 2 "$w/gpt/build/train" --steps 1 --data "$w/no-such-file"
expect_error "run with another rank count" "runs on 2 ranks" "$autoddl" run "$w/plan.json" --ranks 3
# A checkpoint of another model.
"$autoddl" plan tiny-llama --cluster dgx-h100-ndr --gpus 1 --global-batch 8 --seq 16 --no-why \
  -o "$w/llama.json" > /dev/null || fail "plan llama"
"$autoddl" codegen "$w/llama.json" -o "$w/llama" > /dev/null || fail "codegen llama"
build "$w/llama"
expect_error "checkpoint of another model" "a checkpoint of model \"tiny-gpt\", not tiny-llama" mpi -np 1 "$w/llama/build/train" --steps 4 --resume "$w/ck/step-3"
expect_error "--init of another model" "another model" mpi -np 1 "$w/llama/build/train" --steps 1 --init "$ck"
[ "$(md5sum "$ck")" = "$sum_before" ] || fail "the checkpoint changed"
echo "ok: nothing overwritten"
