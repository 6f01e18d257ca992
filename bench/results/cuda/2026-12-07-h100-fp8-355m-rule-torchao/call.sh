#!/usr/bin/env bash
# FP8 at 355M as planned (the size rule) with warm-up + cosine, two bf16 seeds for the spread;
# gpt2-xl bf16 / fp8 beside torchao float8 (tensorwise) under torch.compile, its compile given
# ~4 minutes (carry .gpu/torchao).
CALL=C; source .gpu/s8/common.sh
xz -dc $S/conv/corpus/train.txt.xz > $W/train.txt
( bash bench/cuda/build_projects.sh $W/xb $R/build_xl.log $S/fp8x/xl-bf16 $S/fp8x/xl-fp8 > /dev/null 2>&1; log "xl built" ) & XB=$!
OUT=$R/fp8loss VARIANTS="rule:AUTODDL_FP8=rule bf16-2:X=1" TRAIN_FLAGS="--warmup 100 --lr-decay cosine" LEFT=300 \
  timeout 340 bash bench/cuda/fp8_loss.sh device $S/fp8 $W/train.txt 2000 3e-4 > $R/fp8loss.log 2>&1; log "fp8 355M rc $?"
tail -n 8 $R/fp8loss.log; rm -f $R/fp8loss/*/*.safetensors
wait $XB
for p in xl-bf16 xl-fp8; do timeout 90 $W/xb/train_$p --steps 14 --quiet --out $R/$p > $R/$p.log 2>&1; log "$p rc $? $(med $R/$p)"; done
rm -f $R/xl-*/*.safetensors
export PYTHONPATH=$PWD/.gpu/torchao
timeout $(( $(left) - 10 )) python3 bench/cuda/pytorch_gpt2.py one --model gpt2-xl --mode compile --micro-batch 8 \
  --float8 tensorwise --steps 10 --warmup 4 --out $R/torch.jsonl > $R/torch-tensorwise.log 2>&1; log "torchao float8 rc $?"
