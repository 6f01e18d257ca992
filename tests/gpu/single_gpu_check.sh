#!/usr/bin/env bash
# The generated GPT-2 CUDA programs on one GPU (the projects of bench/cuda/make_projects.sh,
# carried in .gpu-calibrate/projects): build all four, 8 steps each, print metrics. The
# 2026-11-29 run's (vocabulary not yet padded) were bench/cuda/results/single_unpadded/, deleted
# as superseded (`git show bdc3f6d:bench/cuda/results/single_unpadded/gpt2.metrics.json`).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
P=.gpu-calibrate/projects
nvidia-smi -L
for n in gpt2 gpt2-medium gpt2-large gpt2-xl; do
  ( cmake -S $P/$n-single -B /tmp/q/$n -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/tmp/q-$n.log 2>&1 &&
    cmake --build /tmp/q/$n -j 4 >>/tmp/q-$n.log 2>&1 && echo "built $n" ) &
done
wait
for n in gpt2 gpt2-medium gpt2-large gpt2-xl; do
  if [ ! -x /tmp/q/$n/train ]; then echo "BUILD FAILED $n"; tail -30 /tmp/q-$n.log; continue; fi
  timeout 120 mpirun --allow-run-as-root -np 1 -x NCCL_NVLS_ENABLE /tmp/q/$n/train --steps 8 --out $OUT/$n 2>&1 | tail -12
  python3 - $OUT/$n/metrics.json <<'PY'
import json,sys
m=json.load(open(sys.argv[1]))
keys=[k for k in m if k not in ('loss','collectives','ranks')]
print({k:m[k] for k in keys})
print('loss',m['loss'])
PY
done
