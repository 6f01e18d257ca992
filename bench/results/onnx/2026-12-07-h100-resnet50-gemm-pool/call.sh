#!/usr/bin/env bash
# Thirteenth session, last call: ResNet-50 with 1x1 convolutions as cuBLASLt GEMMs, the block-grid
# max pool backward and the residual add writing one gradient; checks first (PrimitiveCheck, the
# ONNX programs against the CPU, KernelCheck's standalone build), then speed against PyTorch.
set -u
T0=$(date +%s); left() { echo $(( ${BUDGET:-585} - ($(date +%s) - T0) )); }
O=${OUT:-/tmp/out}; W=/tmp/s13c; mkdir -p $O $W; R=$W/res; mkdir -p $R
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/call.log; }
trap 'log end; tar czf $O/res.tgz -C $W res 2>/dev/null' EXIT
export NCCL_NVLS_ENABLE=0
source bench/cuda/cudnn_env.sh 2>/dev/null || true
S=$W/st; rm -rf $S; tar xJf .gpu/s6/stage.txz -C $W; B=$S/bin
log "stage $(cat $S/commit) $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $O/gpu.txt)"
( bash bench/cuda/build_projects.sh $W/bin $R/build.log $S/rn/resnet > /dev/null 2>&1; log "resnet built" ) & RB=$!
( timeout 200 bash tests/gpu/check_kernels.sh $R/kernels > $R/kernels.log 2>&1; echo "kernels rc $?" >> $R/kernels.log ) & KP=$!
for c in PrimitiveCheck PrimitiveCheckFp32; do timeout 60 $B/$c > $R/$c.txt 2>&1; log "$c rc $? $(tail -1 $R/$c.txt)"; done
$B/image_kernels_bench_base 256 > $R/image_base.jsonl 2>&1; $B/image_kernels_bench 256 > $R/image_new.jsonl 2>&1
grep -h maxpool $R/image_base.jsonl $R/image_new.jsonl | cut -c1-160
timeout 90 $B/conv_bench 256 nhwc > $R/conv_nhwc.jsonl 2> $R/conv_nhwc.err; log "conv_bench rc $?"; grep summary $R/conv_nhwc.jsonl | cut -c1-200
wait $RB
rv() { local l=$1; shift; [ $(left) -gt 60 ] || { log "skip $l"; return; }
  env "$@" timeout 60 $W/bin/train_resnet --steps 40 --quiet --out $R/rn-$l --overwrite $X > $R/rn-$l.log 2>&1
  log "rn-$l rc $? $(python3 -c "import json,statistics,sys;d=json.load(open(sys.argv[1]));s=d['step_seconds'];print('median %.2f ms loss %.4f'%(1e3*statistics.median(s[len(s)//2:]),d['loss'][-1]))" $R/rn-$l/metrics.json 2>/dev/null)"; }
X= rv main A=1
X= rv gemm AUTODDL_CONV_GEMM=1
X= rv gemm-dgrad AUTODDL_CONV_GEMM=dgrad
X= rv tuned AUTODDL_CONV_AUTOTUNE=1
X= rv gemm-tuned AUTODDL_CONV_GEMM=1 AUTODDL_CONV_AUTOTUNE=1
AUTODDL_PREBUILT=$W/bin OUT=$R/rn STEPS=40 timeout 200 bash bench/onnx/resnet_speed.sh device $S/rn > $R/rn.log 2>&1; log "resnet+pytorch rc $?"
cat $R/rn/speed.txt
X=--profile rv profile A=1
X=--profile rv gemm-profile AUTODDL_CONV_GEMM=1
OUT=$R/cp PRECISIONS="bf16 fp32" CASES="resnet-mini resnet-mini-dp2 cnn vgg" NODE_TESTS= \
  timeout $(( $(left) - 15 )) bash bench/onnx/cuda_primitives.sh device $S/cp > $R/cp.log 2>&1; log "cuda_primitives rc $?"
tail -12 $R/cp.log
wait $KP; log "$(tail -1 $R/kernels.log) $(grep -h -c FAIL $R/kernels/check_*.txt 2>/dev/null | paste -sd+)"
