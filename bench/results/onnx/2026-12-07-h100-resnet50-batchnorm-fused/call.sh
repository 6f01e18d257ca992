#!/usr/bin/env bash
# The batch norm's fused form (kernels/BatchNormFused.cuh): checks, per-shape times, ResNet-50
# default / split / fused against PyTorch (bench/cuda/batchnorm_ab.sh); beside it (niced) the
# fp32 runtime of the ONNX programs against the CPU program (resnet-mini's norms in the fused
# form, the residual add's one gradient), run after.
set -u
T0=$(date +%s); left() { echo $(( ${BUDGET:-570} - ($(date +%s) - T0) )); }
O=${OUT:-/tmp/out}; W=/tmp/s15n; mkdir -p $O $W; R=$W/resN; mkdir -p $R
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $O/call.log; }
trap 'log end; tar czf $O/res.tgz -C $W resN 2>/dev/null' EXIT
export NCCL_NVLS_ENABLE=0
tar xJf .gpu/s9/bn.txz -C $W && tar xJf .gpu/s9/cp.txz -C $W
log "gpu $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $O/gpu.txt)"
EXTRA_VARIANTS="tuned:AUTODDL_CONV_AUTOTUNE=1" timeout $(( $(left) - 150 )) bash bench/cuda/batchnorm_ab.sh $W/bn $R/bn > $R/bn.log 2>&1; log "batchnorm_ab rc $?"
cat $R/bn.log | head -60
OUT=$R/cp PRECISIONS=fp32 CASES="resnet-mini resnet-mini-dp2 cnn vgg" \
  timeout $(( $(left) - 8 )) bash bench/onnx/cuda_primitives.sh device $W/cp > $R/cp.log 2>&1; log "cuda_primitives rc $?"
tail -n 14 $R/cp.log
