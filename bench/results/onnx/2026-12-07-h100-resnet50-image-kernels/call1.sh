#!/usr/bin/env bash
# Twelfth session, call 1: the channel-innermost image kernels (checks, old vs new timing),
# one runtime build for the session, the resnet cases against the CPU, ResNet-50 against PyTorch.
set -u
source .gpu/s3/common.sh
trap 'log end; tar czf $O/res1.tgz -C $W res 2>/dev/null' EXIT
R=$W/res; mkdir -p $R
( build_all > $R/build_all.log 2>&1 ) & BP=$!
( cd .gpu/image && ./PrimitiveCheck > $R/pc_bf16.txt 2>&1; echo "rc $?" >> $R/pc_bf16.txt
  ./PrimitiveCheckFp32 > $R/pc_fp32.txt 2>&1; echo "rc $?" >> $R/pc_fp32.txt
  ./image_kernels_bench_main 256 > $R/image_old.jsonl 2> $R/image_old.err
  ./image_kernels_bench 256 > $R/image_new.jsonl 2> $R/image_new.err ); log "image checks: $(tail -1 $R/pc_bf16.txt) $(tail -1 $R/pc_fp32.txt)"
tail -3 $R/pc_bf16.txt $R/pc_fp32.txt; cat $R/image_new.jsonl | head -30
OUT=$R/cp PRECISIONS="bf16 fp32" CASES="resnet-mini resnet-mini-dp2 cnn vgg" NODE_TESTS= \
  timeout 200 bash bench/onnx/cuda_primitives.sh device $S/cp > $R/cp.log 2>&1; log "cuda_primitives rc $?"
tail -14 $R/cp.log
wait $BP; tail -2 $R/build_all.log
AUTODDL_PREBUILT=$W/bin OUT=$R/rn timeout $(( $(left) - 60 )) bash bench/onnx/resnet_speed.sh device $S/rn; log "resnet rc $?"
cat $R/rn/speed.txt 2>/dev/null
rv() { local l=$1; shift; [ $(left) -gt 25 ] || { log "skip $l"; return; }
  env "$@" timeout 40 $W/bin/train_resnet --steps 20 --quiet --out $R/rn-$l --overwrite $X > $R/rn-$l.log 2>&1; log "rn-$l rc $? $(med $R/rn-$l/metrics.json)"; }
X="--profile" rv profile A=1
