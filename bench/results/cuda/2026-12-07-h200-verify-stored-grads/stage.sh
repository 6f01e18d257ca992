#!/usr/bin/env bash
# Thirteenth session: one stage for the session's device calls.
set -euo pipefail
cd /work/main
A=build/tools/autoddl/autoddl
S=.gpu/s4/st
rm -rf $S && mkdir -p $S
git rev-parse --short HEAD > $S/commit
[ -d .gpu/s4/verify ] && mv .gpu/s4/verify $S/verify
cp -r .gpu/s4/bin $S/bin
( DEPTH=50 BATCH=256 bash bench/onnx/resnet_speed.sh stage $S/rn $A ) &
( PRECISIONS="bf16 fp32" CASES="resnet-mini resnet-mini-dp2 cnn vgg gpt-unfused" bash bench/onnx/cuda_primitives.sh stage $S/cp $A ) &
( AUTODDL=$A bash bench/cuda/make_projects.sh --cluster dgx-h100-ndr --models gpt2,gpt2-medium --plans single $S/p ) &
wait
# The resnet project on the bnsmall branch's channels-last batch norm (its only runtime change).
cp -r $S/rn/resnet $S/rn/resnet-bnsmall
for f in PrimitiveImage.cuh PrimitiveImageLast.cuh; do
  cp /work/wt-bnsmall/backends/cuda/kernels/$f $S/rn/resnet-bnsmall/runtime/backends/cuda/kernels/$f
done
MODEL=gpt2 SEQ=1024 GLOBAL_BATCH=16 CLUSTER=dgx-h100-ndr KFAC_REFRESH=plan bash bench/pipefisher/convergence.sh stage $S/conv
du -sh $S/*
tar cJf .gpu/s4/stage.txz -C .gpu/s4 st
du -sh .gpu/s4/stage.txz
