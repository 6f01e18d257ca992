#!/usr/bin/env bash
# Fourteenth session, call C: FP8 at 355M on real text with warm-up + cosine (2,000 steps, bf16
# against fp8; issue 48 item 3), then gpt2-xl's bf16 and fp8 programs beside torchao's float8
# training (the FP8 peer, its source tree carried) and PyTorch bf16, torch.compile, same call.
set -u
T0=$(date +%s); left() { echo $(( ${BUDGET:-585} - ($(date +%s) - T0) )); }
O=${OUT:-/tmp/out}; W=/tmp/s14c; mkdir -p $O $W; R=$W/res; mkdir -p $R
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/call.log; }
trap 'log end; tar czf $O/res.tgz -C $W res 2>/dev/null' EXIT
export NCCL_NVLS_ENABLE=0
source bench/cuda/cudnn_env.sh 2>/dev/null || true
S=$W/st; rm -rf $S; tar xJf .gpu/s7/stage.txz -C $W; xz -dc $S/conv/corpus/train.txt.xz > $W/train.txt
log "stage $(cat $S/commit) $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $O/gpu.txt)"
( bash bench/cuda/build_projects.sh $W/xb $R/build_xl.log $S/fp8x/xl-bf16 $S/fp8x/xl-fp8 > /dev/null 2>&1; log "xl built" ) & XB=$!
OUT=$R/fp8loss VARIANTS="all:AUTODDL_FP8=all" TRAIN_FLAGS="--warmup 100 --lr-decay cosine" LEFT=400 \
  timeout 330 bash bench/cuda/fp8_loss.sh device $S/fp8 $W/train.txt 2000 3e-4 > $R/fp8loss.log 2>&1; log "fp8 355M rc $?"
tail -15 $R/fp8loss.log
rm -f $R/fp8loss/*/*.safetensors
wait $XB
med() { python3 -c "import json,statistics,sys;d=json.load(open(sys.argv[1]));s=d['step_seconds'];print('median %.2f ms'%(1e3*statistics.median(s[3:])))" $1/metrics.json 2>/dev/null; }
for p in xl-bf16 xl-fp8; do
  timeout 90 $W/xb/train_$p --steps 14 --quiet --out $R/$p > $R/$p.log 2>&1; log "$p rc $? $(med $R/$p)"
done
rm -f $R/xl-*/*.safetensors
export PYTHONPATH=$PWD/.gpu/torchao
for f in none tensorwise rowwise; do
  [ $(left) -gt 70 ] || { log "skip torch $f"; continue; }
  timeout $(( $(left) - 10 )) python3 bench/cuda/pytorch_gpt2.py one --model gpt2-xl --mode compile --micro-batch 8 \
    --float8 $f --steps 10 --warmup 4 --out $R/torch.jsonl > $R/torch-$f.log 2>&1; log "torch compile float8=$f rc $? $(tail -1 $R/torch-$f.log | cut -c1-200)"
done
