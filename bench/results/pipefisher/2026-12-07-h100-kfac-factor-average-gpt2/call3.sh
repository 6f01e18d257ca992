#!/usr/bin/env bash
# Twelfth session, call 3: K-FAC vs AdamW on GPT-2 124M, warm-up + cosine, with the factor average.
set -u
source .gpu/s3/common.sh
trap 'log end; tar czf $O/res3.tgz -C $W res3 2>/dev/null' EXIT
R=$W/res3; mkdir -p $R
build_all || exit 1
AUTODDL_PREBUILT=$W/pre/conv STEPS=1500 EVAL_EVERY=500 ADAMW_LRS="6e-4" KFAC_LRS="2e-3 4e-3" KFAC_REFRESH=plan \
  KFAC_FLAGS="--kfac-factor-every 9 --kfac-factor-decay 0.95" TRAIN_FLAGS="--warmup 100 --lr-decay cosine" \
  timeout $(( $(left) - 100 )) bash bench/pipefisher/convergence.sh device $S/conv $R/avg; log "avg rc $?"
python3 bench/pipefisher/convergence_report.py $R/avg/convergence.json 2>&1 | tee $R/avg/report.txt | tail -8
AUTODDL_PREBUILT=$W/pre/conv STEPS=1500 EVAL_EVERY=500 ADAMW_LRS="" KFAC_LRS="2e-3" KFAC_REFRESH=10 \
  TRAIN_FLAGS="--warmup 100 --lr-decay cosine" \
  timeout $(( $(left) - 5 )) bash bench/pipefisher/convergence.sh device $S/conv $R/k10; log "k10 rc $?"
python3 bench/pipefisher/convergence_report.py $R/k10/convergence.json 2>&1 | tee $R/k10/report.txt | tail -8
