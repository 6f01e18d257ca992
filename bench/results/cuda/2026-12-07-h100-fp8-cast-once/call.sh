#!/usr/bin/env bash
# Thirteenth session, call 4: FP8 casts once a step (bench/cuda/fp8_cast_once.sh: the 7B layer
# stack and gpt2-xl, bf16 against fp8 three ways) and Fp8Check; K-FAC with Adam grafting on
# shorter cosine schedules (time to AdamW's loss), AdamW 1,500 steps again, same call.
set -u
T0=$(date +%s); left() { echo $(( ${BUDGET:-585} - ($(date +%s) - T0) )); }
O=${OUT:-/tmp/out}; W=/tmp/s13b; mkdir -p $O $W; R=$W/res; mkdir -p $R
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/call.log; }
trap 'log end; tar czf $O/res.tgz -C $W res 2>/dev/null' EXIT
export NCCL_NVLS_ENABLE=0
source bench/cuda/cudnn_env.sh 2>/dev/null || true
S=$W/st; rm -rf $S; tar xJf .gpu/s5/stage.txz -C $W; xz -dc $S/conv/corpus/train.txt.xz > $W/train.txt 2>/dev/null
log "stage $(cat $S/commit) $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $O/gpu.txt)"
# Builds first, in parallel: the conv projects, Fp8Check, the fp8 projects (inside the script).
mkdir -p $W/projects; for o in adamw kfac; do ln -sfn $S/conv/$o $W/projects/conv-$o; done
( bash bench/cuda/build_projects.sh $W/bin $R/build_conv.log $W/projects/* > /dev/null 2>&1;
  mkdir -p $W/pre/conv; for o in adamw kfac; do ln -sf $W/bin/train_conv-$o $W/pre/conv/train_$o; done; log "conv built" ) & CB=$!
( cmake -S tests/unit/cuda/standalone -B $W/chk -G Ninja -DCMAKE_BUILD_TYPE=Release -DAUTODDL_CUDA_ATTENTION=OFF > $R/chk.log 2>&1 &&
  cmake --build $W/chk -j8 --target Fp8Check >> $R/chk.log 2>&1; log "Fp8Check built rc $?" ) & FB=$!
OUT=$R/fp8ab timeout 300 bash bench/cuda/fp8_cast_once.sh device $S/fp8ab 12 > $R/fp8ab.log 2>&1; log "fp8ab rc $?"
tail -20 $R/fp8ab.log
wait $FB; timeout 60 $W/chk/Fp8Check > $R/Fp8Check.txt 2>&1; log "Fp8Check rc $? $(tail -1 $R/Fp8Check.txt)"
wait $CB
K="--kfac-rule adam-graft --kfac-factor-every 9 --kfac-factor-decay 0.95"; T="--warmup 100 --lr-decay cosine"
run_conv() { local name=$1 steps=$2 a=$3 k=$4; [ $(left) -gt 70 ] || { log "skip $name"; return; }
  mkdir -p $R/$name; AUTODDL_PREBUILT=$W/pre/conv STEPS=$steps EVAL_EVERY=$((steps/2)) ADAMW_LRS="$a" KFAC_LRS="$k" KFAC_REFRESH=plan \
    KFAC_FLAGS="$K" TRAIN_FLAGS="$T" timeout $(( $(left) - 10 )) bash bench/pipefisher/convergence.sh device $S/conv $R/$name > $R/$name/conv.log 2>&1
  log "$name rc $?"; python3 bench/pipefisher/convergence_report.py $R/$name/convergence.json 2>&1 | head -4; }
run_conv kfac1000 1000 "" "5e-4"
run_conv adamw1500 1500 "5e-4" ""
run_conv kfac1200 1200 "" "5e-4"
