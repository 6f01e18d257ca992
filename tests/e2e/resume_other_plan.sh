#!/usr/bin/env bash
# Resume under another plan (issue 46, items 3 and 6): checkpoints hold full logical tensors (the
# parameters and the AdamW moments, ZeRO's shards included) under the model's names, each rank
# writing its own blocks, so any plan of the same model resumes them, each rank reading its block.
#  - tiny-gpt saved under dp2 + ZeRO-1 resumes under tp2 x pp2 (Megatron's splits, 1F1B), and the
#    reverse; `--resume auto` too; a 4-layer GPT saved under interleaved pp2 (2 chunks: device 0
#    holds layers 0 and 2) resumes under 1F1B (layers 0 and 1); a vocabulary of 251 rows over
#    tp2 with ZeRO-1 (the short block's shard padded) resumes under tp2 alone. The resumed run's losses equal the writing plan's own (resuming
#    under the original plan is exact, so its losses are the uninterrupted run's) within the
#    verify matrix's fp32 bound (relative 1e-5, driver/Verify.cpp);
#  - the tensors are the same files whichever plan wrote them: both plans' step-3 parameters and
#    moments equal within that bound (the optimizer file holds <param>.exp_avg, no ".zero");
#  - bad input under the other plan: another model, another vocabulary, a truncated optimizer
#    file, an older plan-specific ZeRO layout: one line naming the file, exit status 1..123,
#    nothing written or overwritten.
# The plans are e2e.verify's zero1_dp2, tp2_pp2, pp2_interleaved, pp2_1f1b_layer_loop,
# odd_vocab_dp2_tp2_zero1 and odd_vocab_tp2: their builds are in the cache (AUTODDL_CACHE). ~30 s on 2 cores once built.
# Usage: resume_other_plan.sh AUTODDL WORKDIR
set -uo pipefail
. "$(dirname "$0")/checkpoint_lib.sh"
checkpoint_test "$@"

# plan NAME MODEL RANKS FIX MEGATRON: the verify matrix's plan (the same bytes, one build).
plan() {
  "$autoddl" plan "$2" --cluster dgx-h100-ndr --gpus "$3" --global-batch 8 --seq 16 \
    --fix "$4" --no-why -o "$w/$1.json" > /dev/null || fail "plan $1"
  python3 "$here/../lit/codegen/megatron.py" "$w/$1.json" --level "$5" || fail "megatron.py $1"
}
plan zero tiny-gpt 2 tp=1,pp=1,dp=2,zero=1 0
plan tp2pp2 tiny-gpt 4 tp=2,pp=2,dp=1,microbatch=2,schedule=1f1b 1
# Four layers: interleaved (device 0 runs layers 0 and 2) and 1F1B (layers 0 and 1).
plan interleaved "$here/gpt-4layer.json" 2 tp=1,pp=2,dp=1,microbatch=2,schedule=interleaved,chunks=2 0
plan loop "$here/gpt-4layer.json" 2 tp=1,pp=2,dp=1,microbatch=1,schedule=1f1b 0
# A vocabulary tp does not divide (251 rows: 126 + 125), the table vocab-parallel: the short
# block's ZeRO shard ends in padding that is in no file.
plan odd_zero "$here/gpt-odd-vocab.json" 4 tp=2,pp=1,dp=2,zero=1 2
plan odd_tp2 "$here/gpt-odd-vocab.json" 2 tp=2,pp=1,dp=1 2
# run PLAN OUT TRAINING-FLAGS...: 6 steps through the driver (its build cached), quietly.
run() {
  local p=$1 out=$2 model=()
  shift 2
  case $p in
  interleaved | loop) model=(--model "$here/gpt-4layer.json") ;;
  odd_*) model=(--model "$here/gpt-odd-vocab.json") ;;
  esac
  "$autoddl" run "$w/$p.json" "${model[@]}" --steps 6 --out "$w/$out" -- --quiet "$@" \
    > "$w/$out.log" 2>&1 || { cat "$w/$out.log"; fail "run $out"; }
}
run zero full_zero --save "$w/ck_zero" --save-every 3
run tp2pp2 full_tp2pp2 --save "$w/ck_tp2pp2" --save-every 3

python3 - "$w/ck_zero/step-3" "$w/ck_tp2pp2/step-3" <<'PY' || fail "the two plans' checkpoints differ"
import json, struct, sys
def tensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    head = json.loads(b[8:8 + n])
    meta = head.pop("__metadata__", {})
    return meta, {k: (v["shape"], struct.unpack(f"<{(v['data_offsets'][1] - v['data_offsets'][0]) // 4}f",
                                                 b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]))
                  for k, v in head.items()}
for f in ("model", "optimizer"):
    (ma, a), (mb, b) = (tensors(f"{d}/{f}.safetensors") for d in sys.argv[1:3])
    assert a.keys() == b.keys(), f"{f}: other tensor names: {sorted(a.keys() ^ b.keys())[:4]}"
    assert not any(k.endswith(".zero") for k in a), f"{f}: ZeRO state in a plan's layout"
    assert ma["plan"] != mb["plan"] and ma["samples"] == mb["samples"] == "24", (ma, mb)
    # verify's bound on parameters: absolute 1e-4 (of each tensor's scale, when above 1).
    worst, where = 0.0, ""
    for k in a:
        assert a[k][0] == b[k][0], f"{f}: {k}: shape {a[k][0]} vs {b[k][0]}"
        scale = max([1.0] + [abs(x) for x in a[k][1]])
        d = max([0.0] + [abs(x - y) / scale for x, y in zip(a[k][1], b[k][1])])
        worst, where = max((worst, where), (d, k))
    print(f"  {f}.safetensors: {len(a)} tensors, the same names and shapes; worst difference {worst:.1e} ({where})")
    assert worst <= 1e-4, f"{f}: the plans' step-3 tensors differ by {worst} in {where}"
PY

# dp2 + ZeRO-1 -> tp2 x pp2, and the reverse; and --resume auto (a folder holding only step-3).
run tp2pp2 tp2pp2_from_zero --resume "$w/ck_zero/step-3"
losses_match "$w/full_zero/metrics.json" "$w/tp2pp2_from_zero/metrics.json" 1e-5 ||
  fail "tp2 x pp2 resumed from the dp2 + ZeRO-1 checkpoint: other losses"
echo "ok: a dp2 + ZeRO-1 checkpoint resumes under tp2 x pp2"
run zero zero_from_tp2pp2 --resume "$w/ck_tp2pp2/step-3"
losses_match "$w/full_tp2pp2/metrics.json" "$w/zero_from_tp2pp2/metrics.json" 1e-5 ||
  fail "dp2 + ZeRO-1 resumed from the tp2 x pp2 checkpoint: other losses"
echo "ok: a tp2 x pp2 checkpoint resumes under dp2 + ZeRO-1"
run interleaved full_interleaved --save "$w/ck_interleaved" --save-every 3
run loop loop_from_interleaved --resume "$w/ck_interleaved/step-3"
losses_match "$w/full_interleaved/metrics.json" "$w/loop_from_interleaved/metrics.json" 1e-5 ||
  fail "1F1B resumed from the interleaved checkpoint: other losses"
echo "ok: an interleaved pp2 x 2 chunks checkpoint resumes under 1F1B (other layers a device)"
run odd_zero full_odd_zero --save "$w/ck_odd_zero" --save-every 3
run odd_tp2 odd_tp2_from_zero --resume "$w/ck_odd_zero/step-3"
losses_match "$w/full_odd_zero/metrics.json" "$w/odd_tp2_from_zero/metrics.json" 1e-5 ||
  fail "tp2 resumed from the odd vocabulary's dp2 x tp2 + ZeRO-1 checkpoint: other losses"
echo "ok: an odd vocabulary's dp2 x tp2 + ZeRO-1 checkpoint resumes under tp2 alone"
mkdir -p "$w/auto" && cp -r "$w/ck_zero/step-3" "$w/auto/"
run tp2pp2 auto_run --save "$w/auto" --resume auto
grep -q "^--resume auto: resuming from $w/auto/step-3$" "$w/auto_run.log" ||
  { cat "$w/auto_run.log"; fail "--resume auto did not take step-3"; }
losses_match "$w/full_zero/metrics.json" "$w/auto_run/metrics.json" 1e-5 || fail "--resume auto: other losses"
echo "ok: --resume auto takes another plan's checkpoint"

# Bad input, each a copy of the dp2 + ZeRO-1 step-3 altered, resumed under tp2 x pp2.
bad=$w/bad && mkdir -p "$bad"
python3 - "$w/ck_zero/step-3" "$bad" "$here" <<'PY' || fail "making the altered checkpoints"
import json, os, shutil, struct, sys
src, bad, here = sys.argv[1:4]
sys.path.insert(0, here)
from safetensors_io import read, write
def altered(name, file, change):
    shutil.copytree(src, f"{bad}/{name}")
    head, data = read(f"{src}/{file}")
    head, data = change(head, data)
    write(f"{bad}/{name}/{file}", head, data)
def model(h, d):
    h["__metadata__"]["model"] = "tiny-llama"
    return h, d
def vocab(h, d):
    h["__metadata__"]["vocab"] = str(int(h["__metadata__"]["vocab"]) + 1)
    return h, d
def flat_zero(h, d):  # before this format: ZeRO state flat per plan, "<name>.exp_avg.zero"
    return {(k if k == "__metadata__" else k + ".zero"): v for k, v in h.items()}, d
altered("model", "model.safetensors", model)
altered("vocab", "model.safetensors", vocab)
altered("old_zero", "optimizer.safetensors", flat_zero)
shutil.copytree(src, f"{bad}/truncated")
b = open(f"{src}/optimizer.safetensors", "rb").read()
open(f"{bad}/truncated/optimizer.safetensors", "wb").write(b[:len(b) - 100])
PY
sums() { find "$bad" -type f | sort | xargs md5sum; }
before=$(sums)
# The tp2 x pp2 program itself (the driver adds a line of its own when a run fails).
train=$(sed -n 's/^autoddl: mpirun -np 4 \(.*\)$/\1/p' "$w/full_tp2pp2.log" | head -1)
[ -x "$train" ] || { cat "$w/full_tp2pp2.log"; fail "no program named in the log"; }
bad_run() {
  mpirun --oversubscribe --allow-run-as-root -np 4 "$train" --steps 6 --quiet --save "$bad/out" --resume "$@"
}
expect_error "another model" "$bad/model/model.safetensors: a checkpoint of model \"tiny-llama\"" \
  bad_run "$bad/model"
expect_error "another vocabulary" "$bad/vocab/model.safetensors: a checkpoint of a vocabulary of" \
  bad_run "$bad/vocab"
expect_error "a truncated optimizer file" "$bad/truncated/optimizer.safetensors: " \
  bad_run "$bad/truncated"
expect_error "an older plan-specific ZeRO layout" \
  "$bad/old_zero/optimizer.safetensors: ZeRO state in an older plan-specific layout" \
  bad_run "$bad/old_zero"
[ "$(sums)" = "$before" ] || fail "a bad run changed a file under $bad"
[ ! -e "$bad/out" ] || fail "a bad run created its --save folder"
echo "ok: bad checkpoints under another plan are one line naming the file; nothing written"
