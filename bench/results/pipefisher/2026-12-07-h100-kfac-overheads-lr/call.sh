#!/usr/bin/env bash
# Fourteenth session, call B: K-FAC (Adam grafting) against AdamW on GPT-2 124M, seeds 1 and 2,
# 1,500 steps each, warm-up 100 + cosine; a traced K-FAC run first (where its 7.6 ms a step go).
set -u
T0=$(date +%s); left() { echo $(( ${BUDGET:-585} - ($(date +%s) - T0) )); }
O=${OUT:-/tmp/out}; W=/tmp/s14b; mkdir -p $O $W; R=$W/res; mkdir -p $R
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/call.log; }
trap 'log end; tar czf $O/res.tgz -C $W res 2>/dev/null' EXIT
export NCCL_NVLS_ENABLE=0
source bench/cuda/cudnn_env.sh 2>/dev/null || true
S=$W/st; rm -rf $S; tar xJf .gpu/s7/stage.txz -C $W; xz -dc $S/conv/corpus/train.txt.xz > $W/train.txt
log "stage $(cat $S/commit) $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $O/gpu.txt)"
mkdir -p $W/projects; for o in adamw kfac; do ln -sfn $S/conv/$o $W/projects/conv-$o; done
bash bench/cuda/build_projects.sh $W/bin $R/build_conv.log $W/projects/* > /dev/null 2>&1
mkdir -p $W/pre/conv; for o in adamw kfac; do ln -sf $W/bin/train_conv-$o $W/pre/conv/train_$o; done; log "conv built"
K="--kfac-rule adam-graft --kfac-factor-every 9 --kfac-factor-decay 0.95"
for t in kfac adamw; do
  f=; [ $t = kfac ] && f=$K
  timeout 60 mpirun --allow-run-as-root -np 1 $W/pre/conv/train_$t --steps 40 --data $W/train.txt --lr 5e-4 $f --quiet --trace --out $R/trace-$t > $R/trace-$t.log 2>&1
  log "trace-$t rc $?"
  timeout 60 mpirun --allow-run-as-root -np 1 $W/pre/conv/train_$t --steps 40 --data $W/train.txt --lr 5e-4 $f --quiet --out $R/plain-$t > $R/plain-$t.log 2>&1
  log "plain-$t rc $? $(python3 -c "import json,statistics,sys;d=json.load(open(sys.argv[1]));s=d['step_seconds'];print('median %.2f mean %.2f ms'%(1e3*statistics.median(s[10:]),1e3*statistics.mean(s[10:])))" $R/plain-$t/metrics.json 2>/dev/null)"
done
# The factor steps' graph (AUTODDL_KFAC_FACTOR_GRAPH): equal losses graphed, eager and without graphs
# (refresh 12, factors every 3), then its A/B timing at the plan's K with F = 9 (100 steps).
KC="--kfac-rule adam-graft --kfac-factor-every 3 --kfac-factor-decay 0.95 --kfac-refresh 12"
for v in "fg:A=1" "eager:AUTODDL_KFAC_FACTOR_GRAPH=0" "nograph:AUTODDL_CUDA_GRAPH=0"; do
  env ${v#*:} timeout 60 mpirun --allow-run-as-root -np 1 -x ${v#*:} $W/pre/conv/train_kfac --steps 40 --data $W/train.txt --lr 5e-4 $KC --quiet --out $R/fgcheck-${v%%:*} > $R/fgcheck-${v%%:*}.log 2>&1
  log "fgcheck-${v%%:*} rc $? $(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['info'].get('kfac.factor_graph'))" $R/fgcheck-${v%%:*}/metrics.json 2>/dev/null)"
done
python3 - $R <<'PY' | tee -a $O/call.log
import json,sys
L={k:json.load(open(f'{sys.argv[1]}/fgcheck-{k}/metrics.json'))['loss'] for k in ('fg','eager','nograph')}
for k in ('eager','nograph'): print('factor graph vs',k,'max |dloss|',max(abs(a-b) for a,b in zip(L['fg'],L[k])),'steps',len(L[k]))
PY
for v in "fg:A=1" "eager:AUTODDL_KFAC_FACTOR_GRAPH=0"; do
  env ${v#*:} timeout 60 mpirun --allow-run-as-root -np 1 -x ${v#*:} $W/pre/conv/train_kfac --steps 100 --data $W/train.txt --lr 5e-4 $K --quiet --out $R/ab-${v%%:*} > $R/ab-${v%%:*}.log 2>&1
  log "ab-${v%%:*} rc $? $(python3 -c "import json,statistics,sys;d=json.load(open(sys.argv[1]));s=d['step_seconds'][10:];print('median %.2f mean %.2f ms eager %s'%(1e3*statistics.median(s),1e3*statistics.mean(s),d['info'].get('kfac.eager_steps')))" $R/ab-${v%%:*}/metrics.json 2>/dev/null)"
done
rm -f $R/trace-*/*.safetensors $R/plain-*/*.safetensors $R/fgcheck-*/*.safetensors $R/ab-*/*.safetensors
run_conv() { local name=$1 steps=$2 a=$3 k=$4 seed=$5; [ $(left) -gt 150 ] || { log "skip $name"; return; }
  mkdir -p $R/$name; AUTODDL_PREBUILT=$W/pre/conv STEPS=$steps EVAL_EVERY=500 ADAMW_LRS="$a" KFAC_LRS="$k" KFAC_REFRESH=plan \
    KFAC_FLAGS="$K" TRAIN_FLAGS="--warmup 100 --lr-decay cosine --seed $seed" timeout $(( $(left) - 10 )) bash bench/pipefisher/convergence.sh device $S/conv $R/$name > $R/$name/conv.log 2>&1
  log "$name rc $?"; python3 bench/pipefisher/convergence_report.py $R/$name/convergence.json 2>&1 | head -6; }
run_conv seed-1 1500 "5e-4" "5e-4 1e-3" 1
run_conv seed-2 1500 "5e-4" "5e-4" 2
python3 bench/pipefisher/convergence_seeds.py $R/seed-*/convergence.json 2>&1 | tail -8
