#!/usr/bin/env bash
# Eleventh session, last call: the resnet cases and PrimitiveCheck in bf16 and fp32 (buffers,
# bf16 weight gradients by default, the layout change if merged); ResNet-50's step, ours only.
set -u
T0=$(date +%s); left() { echo $(( ${BUDGET:-200} - ($(date +%s) - T0) )); }
O=${OUT:-/tmp/out}; W=/tmp/s12; mkdir -p $O $W
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/call.log; }
trap 'log end; tar czf $O/res4.tgz -C $W res 2>/dev/null' EXIT
export NCCL_NVLS_ENABLE=0
source bench/cuda/cudnn_env.sh 2>/dev/null || true
tar xJf .gpu/s2/stage.txz -C $W; S=$W/st; R=$W/res; mkdir -p $R
log "stage $(cat $S/commit) $(nvidia-smi --query-gpu=name --format=csv,noheader | tee $O/gpu.txt)"
( bash bench/cuda/build_projects.sh $W/rnb $R/rn-build.log $S/rn/resnet; log "resnet built" ) &
OUT=$R/cp PRECISIONS="bf16 fp32" CASES="resnet-mini resnet-mini-dp2 cnn vgg" NODE_TESTS= \
  timeout $(( $(left) - 60 )) bash bench/onnx/cuda_primitives.sh device $S/cp > $R/cp.log 2>&1; log "cuda_primitives rc $?"
tail -16 $R/cp.log
wait
med() { python3 -c "import json,statistics,sys;d=json.load(open(sys.argv[1]));s=d['step_seconds'];print('median %.2f ms loss %.4f'%(1e3*statistics.median(s[len(s)//2:]),d['loss'][-1]))" $1 2>/dev/null; }
rv() { local l=$1; shift; [ $(left) -gt 25 ] || { log "skip $l"; return; }
  env "$@" timeout 40 $W/rnb/train_resnet --steps 20 --quiet --out $R/rn-$l --overwrite $X > $R/rn-$l.log 2>&1; log "rn-$l rc $? $(med $R/rn-$l/metrics.json)"; }
X= rv default A=1
X= rv nchw AUTODDL_LAYOUT=nchw
X="--profile" rv profile A=1
