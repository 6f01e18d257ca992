#!/usr/bin/env bash
# Twelfth session, call 2: 355M compressed vs exact resume with the noise floor (issue 46);
# FP8 at 124M with warm-up + cosine, two runs per precision (issue 48 item 3).
set -u
source .gpu/s3/common.sh
trap 'log end; tar czf $O/res2.tgz -C $W res2 2>/dev/null' EXIT
R=$W/res2; mkdir -p $R
build_all || exit 1
AUTODDL_PREBUILT=$W/bin OUT=$R/fp8 TRAIN_FLAGS="--warmup 100 --lr-decay cosine" LEFT=260 \
  VARIANTS="all:AUTODDL_FP8=all bf16-2:X=1 all-2:AUTODDL_FP8=all planned:X=1" \
  timeout 300 bash bench/cuda/fp8_loss.sh device $S/fp8 $W/train.txt 2000 6e-4 > $R/fp8.log 2>&1; log "fp8 rc $?"
tail -30 $R/fp8.log
AUTODDL_PREBUILT=$W/bin OUT=$R/compress DATA=$W/train.txt STEPS=160 EVERY=40 MODELS=gpt2-medium CKPT=$W/ck \
  timeout $(( $(left) - 5 )) bash bench/checkpoint/compress.sh device $S/ck; log "compress rc $?"
tail -30 $R/compress/compress.txt 2>/dev/null
rm -rf $W/ck
