#!/usr/bin/env bash
# Eleventh session, call 3: FP8 against bf16 over 3,000 steps of text, two runs each (issue 48 item 3);
# ResNet-mini batch norms and running statistics on CUDA against the CPU program (issue 45 item 2).
set -u
source .gpu/s1/common.sh
trap 'log end; tar czf $O/res3.tgz -C $W res3 2>/dev/null' EXIT
R=$W/res3; mkdir -p $R
build_all || exit 1
( OUT=$R/cp PRECISIONS=bf16 CASES="resnet-mini resnet-mini-dp2" NODE_TESTS= timeout $(( $(left) - 10 )) \
  bash bench/onnx/cuda_primitives.sh device $S/cp > $R/cp.log 2>&1; log "cuda_primitives rc $?" ) &
cp_pid=$!
AUTODDL_PREBUILT=$W/bin OUT=$R/fp8 VARIANTS="all:AUTODDL_FP8=all bf16-2:X=1 all-2:AUTODDL_FP8=all" LEFT=$(( $(left) - 120 )) \
  timeout $(( $(left) - 60 )) bash bench/cuda/fp8_loss.sh device $S/fp8 $W/train.txt ${FP8_STEPS:-3000} 6e-4; log "fp8 rc $?"
wait $cp_pid
tail -15 $R/cp.log
