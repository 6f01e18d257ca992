#!/usr/bin/env bash
# Issue 46 items 4 and 5 on the CUDA program (the CPU program's are e2e.anomalies and
# e2e.compressed_checkpoint): --on-nan rollback (the test hook AUTODDL_TEST_NAN_DATA poisons the
# loss of the step reading batch 6) reloads step-4 and skips batches 4-6, and a run resumed from
# step-4 with --data-skip 3 has its losses; --checkpoint-compress saves compressed folders that
# resume (the device state copied back) within 1e-3 of the uninterrupted losses.
#   tests/gpu/anomalies_gpu.sh TRAIN WORKDIR
# TRAIN: a built generated CUDA program of one rank (e.g. tiny-gpt on one GPU). Exit 77 without a GPU.
set -uo pipefail
train=$(realpath "$1") w=$2
here=$(cd "$(dirname "$0")" && pwd)
nvidia-smi -L > /dev/null 2>&1 || { echo "skipped: no GPU"; exit 77; }
rm -rf "$w" && mkdir -p "$w"
export NCCL_NVLS_ENABLE=0
. "$here/../e2e/checkpoint_lib.sh"
run() { mpirun --allow-run-as-root -np 1 -x NCCL_NVLS_ENABLE "$train" --quiet "$@"; }
AUTODDL_TEST_NAN_DATA=6 run --steps 12 --save "$w/ck" --save-every 4 --on-nan rollback \
  --out "$w/rb" > "$w/rb.log" 2>&1 || { cat "$w/rb.log"; fail "rollback run"; }
grep -qx -- "--on-nan rollback 1 of 2: step 7: loss nan; reloaded $w/ck/step-4 (step 4); data batches 4-6 skipped" \
  "$w/rb.log" || { cat "$w/rb.log"; fail "no rollback line"; }
run --steps 12 --resume "$w/ck/step-4" --data-skip 3 --out "$w/replay" > "$w/replay.log" 2>&1 ||
  { cat "$w/replay.log"; fail "replay"; }
losses_match "$w/rb/metrics.json" "$w/replay/metrics.json" 1e-5 || fail "replayed losses differ"
echo "ok: the CUDA program rolls back past a poisoned batch; a replay has its losses"
run --steps 8 --out "$w/full" > /dev/null 2>&1 || fail "uninterrupted run"
run --steps 8 --save "$w/cz" --save-every 2 --checkpoint-compress --checkpoint-full-every 2 \
  --out "$w/cz_run" > "$w/cz.log" 2>&1 || { cat "$w/cz.log"; fail "compressed saves"; }
[ -f "$w/cz/step-4/bitsnap.safetensors" ] || fail "step-4 not compressed"
python3 -c "import json,sys; print('  ', json.load(open(sys.argv[1]))['info']['checkpoint_compress'])" \
  "$w/cz_run/metrics.json"
run --steps 8 --resume "$w/cz/step-4" --out "$w/resumed" > "$w/resumed.log" 2>&1 ||
  { cat "$w/resumed.log"; fail "resuming the compressed step-4"; }
losses_match "$w/full/metrics.json" "$w/resumed/metrics.json" 1e-3 || fail "resumed losses too far"
echo "ok: the CUDA program resumes a compressed checkpoint"
