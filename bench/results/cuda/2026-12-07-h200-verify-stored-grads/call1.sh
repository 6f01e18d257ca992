#!/usr/bin/env bash
# Thirteenth session, call 1: function first (the stored gradients changed the GPT programs, the
# fused norm + add and one-pass max pool are new): kernel, primitive, K-FAC and FP8 checks, the
# verify matrix's subset, the ONNX cases against the CPU; image and conv kernels timed (main and
# the bnsmall branch's batch norm); every program of the session built once.
set -u
source .gpu/s4/common.sh
trap 'log end; tar czf $O/res1.tgz -C $W res1 2>/dev/null' EXIT
R=$W/res1; mkdir -p $R
B=$S/bin
( build_all > $R/build_all.log 2>&1; build_bnsmall >> $R/build_all.log 2>&1 ) & BP=$!
( timeout 280 bash tests/gpu/check_kernels.sh $R/kernels > $R/kernels.log 2>&1; echo "kernels rc $?" >> $R/kernels.log ) & KP=$!
$B/image_kernels_bench_main 256 > $R/image_main.jsonl 2> $R/image_main.err
$B/image_kernels_bench_bnsmall 256 > $R/image_bnsmall.jsonl 2> $R/image_bnsmall.err; log "image benches"
timeout 60 $B/conv_bench 256 nhwc > $R/conv_nhwc.jsonl 2> $R/conv_nhwc.err
AUTODDL_CONV_AUTOTUNE=1 timeout 90 $B/conv_bench 256 nhwc > $R/conv_nhwc_tuned.jsonl 2> $R/conv_nhwc_tuned.err; log "conv benches"
timeout 90 python3 bench/cuda/conv_torch.py 256 > $R/conv_torch.jsonl 2> $R/conv_torch.err; log "conv torch rc $?"
tail -3 $R/conv_nhwc.jsonl $R/conv_nhwc_tuned.jsonl $R/conv_torch.jsonl | cut -c1-300
for c in PrimitiveCheck PrimitiveCheckFp32 PrimitiveCheck_bnsmall KfacCheck KfacCheckFp32 Fp8Check; do
  timeout 60 $B/$c > $R/$c.txt 2>&1; echo "rc $?" >> $R/$c.txt; log "$c $(tail -2 $R/$c.txt | tr '\n' ' ')"
done
OUT=$R/verify timeout $(( $(left) - 150 )) bash tests/gpu/verify_gpu.sh device $S/verify 2 > $R/verify.log 2>&1; log "verify rc $?"
grep -c " ok" $R/verify.log; grep -v " ok" $R/verify.log | tail -15
OUT=$R/cp PRECISIONS="bf16 fp32" CASES="resnet-mini resnet-mini-dp2 cnn vgg gpt-unfused" NODE_TESTS= \
  timeout $(( $(left) - 30 )) bash bench/onnx/cuda_primitives.sh device $S/cp > $R/cp.log 2>&1; log "cuda_primitives rc $?"
tail -14 $R/cp.log
wait $KP; log "$(tail -1 $R/kernels.log)"; grep -h -c FAIL $R/kernels/check_*.txt 2>/dev/null
wait $BP; tail -3 $R/build_all.log
