#!/usr/bin/env bash
# K-FAC (bf16 preconditioning) against AdamW, GPT-2 124M, warm-up + cosine, clipping at 1.0.
# KfacCheck (bf16 preconditioning, the factor stride's row selection) built beside the programs;
# A/B over 120 steps (bf16 / fp32 preconditioning, stride 2, stagger + stride 2); then AdamW 5e-4
# over 1,500 steps against K-FAC (Adam grafting, F = 9, d = 0.95, stagger, stride 2) at 1e-3 and
# 2e-3 over 1,000 steps (its own shorter schedule), then AdamW 1e-3 if the call has time.
set -u
T0=$(date +%s); left() { echo $(( ${BUDGET:-570} - ($(date +%s) - T0) )); }
O=${OUT:-/tmp/out}; W=/tmp/s16k; mkdir -p $O $W; R=$W/resK; mkdir -p $R
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/call.log; }
trap 'log end; tar czf $O/res.tgz -C $W resK 2>/dev/null' EXIT
export NCCL_NVLS_ENABLE=0
source bench/cuda/cudnn_env.sh 2>/dev/null || true
tar xJf .gpu/s10/conv.txz -C $W; S=$W/st
log "stage $(cat $S/commit) $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $O/gpu.txt)"
xz -dc $S/conv/corpus/train.txt.xz > $W/train.txt
( cmake -S tests/unit/cuda/standalone -B $W/checks -G Ninja -DCMAKE_BUILD_TYPE=Release -DAUTODDL_CUDA_ATTENTION=OFF \
    -DAUTODDL_REF_BLAS_FALLBACK=ON > $R/kfaccheck_build.log 2>&1 &&
  cmake --build $W/checks -j 6 --target KfacCheck KfacCheckFp32 >> $R/kfaccheck_build.log 2>&1; echo "kfaccheck build rc $?" >> $R/kfaccheck_build.log ) & KB=$!
mkdir -p $W/projects; for o in adamw kfac; do ln -sfn $S/conv/$o $W/projects/conv-$o; done
bash bench/cuda/build_projects.sh $W/bin $R/build_conv.log $W/projects/* > /dev/null 2>&1
mkdir -p $W/pre/conv; for o in adamw kfac; do ln -sf $W/bin/train_conv-$o $W/pre/conv/train_$o; done; log "built"
wait $KB; tail -1 $R/kfaccheck_build.log
for c in KfacCheck KfacCheckFp32; do timeout 60 $W/checks/$c > $R/$c.txt 2>&1; log "$c rc $? $(grep -c FAIL $R/$c.txt) FAIL; $(tail -1 $R/$c.txt)"; done
timeout 40 $W/checks/KfacCheck --bench > $R/KfacCheckBench.txt 2>&1; tail -n 6 $R/KfacCheckBench.txt
K="--kfac-rule adam-graft --kfac-factor-every 3 --kfac-factor-decay 0.95 --kfac-refresh 12"
# (a) where a factor step's time goes: traced, plain against factor stride 2.
for v in "plain:" "stride2:--kfac-factor-stride 2"; do
  n=${v%%:*}
  timeout 60 $W/pre/conv/train_kfac --steps 40 --data $W/train.txt --lr 1e-3 $K ${v#*:} --trace --quiet --out $R/tr-$n > $R/tr-$n.log 2>&1
  log "tr-$n rc $? $(python3 -c "import json,statistics as st,sys;d=json.load(open(sys.argv[1]));s=d['step_seconds'][1:];print('mean %.2f max %.2f median %.2f ms'%(1e3*st.mean(s),1e3*max(s),1e3*st.median(s)))" $R/tr-$n/metrics.json 2>/dev/null)"
  gzip -f $R/tr-$n/trace.json 2>/dev/null
done
rm -f $R/tr-*/*.safetensors
# (b) with clipping: AdamW 1e-3, K-FAC 5e-4 and 1e-3 over AdamW's own 1,500 steps.
K="--kfac-rule adam-graft --kfac-factor-every 9 --kfac-factor-decay 0.95"
common() { STEPS=1500 EVAL_EVERY=250 KFAC_REFRESH=plan AUTODDL_PREBUILT=$W/pre/conv \
  KFAC_FLAGS="$K --kfac-stagger --kfac-factor-stride 2" TRAIN_FLAGS="--warmup 100 --lr-decay cosine --grad-clip 1 --seed 1" \
  timeout $(( $(left) - 12 )) bash bench/pipefisher/convergence.sh device $S/conv $R/seed-1 >> $R/conv.log 2>&1; }
ADAMW_LRS="1e-3" KFAC_LRS="1e-3" common; log "convergence rc $?"
python3 bench/pipefisher/convergence_report.py $R/seed-1/convergence.json 2>&1 | head -8
[ $(left) -gt 100 ] && { ADAMW_LRS= KFAC_LRS="5e-4" common; log "kfac 5e-4 rc $?"; }
python3 bench/pipefisher/convergence_report.py $R/seed-1/convergence.json 2>&1 | head -8
