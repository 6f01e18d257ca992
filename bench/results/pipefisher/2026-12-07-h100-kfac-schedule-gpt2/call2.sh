#!/usr/bin/env bash
# Eleventh session, call 2: K-FAC against AdamW to a target, GPT-2 124M, warm-up + cosine (issue 47 item 3).
set -u
source .gpu/s1/common.sh
trap 'log end; tar czf $O/res2.tgz -C $W res2 2>/dev/null' EXIT
R=$W/res2; mkdir -p $R
build_all || exit 1
AUTODDL_PREBUILT=$W/pre/conv STEPS=${CONV_STEPS:-2000} EVAL_EVERY=${CONV_EVERY:-250} ADAMW_LRS="3e-4 6e-4 1.2e-3" KFAC_LRS="1e-3 2e-3 4e-3" \
  KFAC_REFRESH=plan TRAIN_FLAGS="--warmup 100 --lr-decay cosine" \
  timeout $(( $(left) - 5 )) bash bench/pipefisher/convergence.sh device $S/conv $R/conv; log "conv rc $?"
python3 bench/pipefisher/convergence_report.py $R/conv/convergence.json 2>&1 | tee $R/conv/report.txt | tail -12
