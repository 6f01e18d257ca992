#!/usr/bin/env bash
# Twelfth session: one stage for the session's device calls.
set -euo pipefail
cd /work/main
A=build/tools/autoddl/autoddl
S=.gpu/s3/st
rm -rf $S && mkdir -p $S
git rev-parse --short HEAD > $S/commit
( DEPTH=50 BATCH=256 bash bench/onnx/resnet_speed.sh stage $S/rn $A ) &
( MODELS=gpt2-medium bash bench/checkpoint/compress.sh stage $S/ck $A ) &
( bash bench/cuda/fp8_loss.sh stage $A $S/fp8 gpt2=8 ) &
wait
MODEL=gpt2 SEQ=1024 GLOBAL_BATCH=16 CLUSTER=dgx-h100-ndr KFAC_REFRESH=plan bash bench/pipefisher/convergence.sh stage $S/conv
PRECISIONS="bf16 fp32" CASES="resnet-mini resnet-mini-dp2 cnn vgg" bash bench/onnx/cuda_primitives.sh stage $S/cp $A
du -sh $S/*
tar cJf .gpu/s3/stage.txz -C .gpu/s3 st
du -sh .gpu/s3/stage.txz
