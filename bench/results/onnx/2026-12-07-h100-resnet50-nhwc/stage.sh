#!/usr/bin/env bash
# Eleventh session, last call's stage: resnet cases of cuda_primitives (bf16, fp32), ResNet-50.
set -euo pipefail
cd /work/main
A=build/tools/autoddl/autoddl
S=.gpu/s2/st
rm -rf $S && mkdir -p $S
git rev-parse --short HEAD > $S/commit
( DEPTH=50 BATCH=256 bash bench/onnx/resnet_speed.sh stage $S/rn $A ) &
PRECISIONS="bf16 fp32" CASES="resnet-mini resnet-mini-dp2 cnn vgg" bash bench/onnx/cuda_primitives.sh stage $S/cp $A
wait
tar cJf .gpu/s2/stage.txz -C .gpu/s2 st
du -sh .gpu/s2/stage.txz
