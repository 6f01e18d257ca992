#!/usr/bin/env bash
# What BitSnap's encodings (backends/common/CheckpointCompress.h) would save on the checkpoints of
# GPT-2 124M and 355M trained on one GPU (issue 46 item 4): each checkpoint's parameters as a
# bitmask-sparse delta against the first checkpoint's (the full one), its AdamW moments
# cluster-quantized; the ratio, the share of parameters changed, the quantization's relative L2
# error and the encoding's time (bench/checkpoint/compress_ratio.cpp, on the host). The programs
# do not write compressed checkpoints yet (--checkpoint-compress is not wired): this measures
# the encodings on real checkpoints first.
#
#   bash bench/checkpoint/compress.sh stage DIR [AUTODDL]   # here: plans and CUDA projects into DIR
#   bash bench/checkpoint/compress.sh device DIR            # GPU machine: build, train, measure
#
# stage plans gpt2 and gpt2-medium for one GPU (global batch 8, seq 1024) and generates their CUDA
# projects into DIR/<model>/ (DIR ignored by git, named in the device tool's carry). device builds
# them on one shared runtime (bench/cuda/shared_runtime_cmake.sh), trains each STEPS steps
# (default 20) with --save-every EVERY (default 5) on DATA (a .bin token file; default synthetic
# tokens, say which in the results) and runs compress_ratio over the checkpoints against the first.
# Checkpoints go to CKPT (default DIR/ck; 124M: 1.5 GB each, 355M: 4.3 GB), removed after each
# model. Results to $OUT (or DIR/results): each run's metrics.json and log, and compress.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
mode=${1:?usage: compress.sh stage DIR [AUTODDL] | device DIR}
dir=${2:?DIR}
models=${MODELS:-gpt2 gpt2-medium}
. "$root/bench/checkpoint/lib.sh"
case $mode in
stage)
  stage_projects compress.sh "${3:-}"
  ;;
device)
  device_env 20
  projects=()
  for m in $models; do projects+=("$dir/$m"); done
  bash "$root/bench/cuda/shared_runtime_cmake.sh" "${projects[@]}" >"$build/src/CMakeLists.txt"
  echo "compress.sh: building ${projects[*]} (log $out/build.log)"
  { cmake -S "$build/src" -B "$build/build" -DCMAKE_BUILD_TYPE=Release &&
    nice cmake --build "$build/build" -j "$(nproc)"; } >"$out/build.log" 2>&1 ||
    { tail -20 "$out/build.log"; exit 1; }
  c++ -O2 -std=c++17 -I "$root" "$root/bench/checkpoint/compress_ratio.cpp" \
    "$root"/backends/common/{CheckpointCompress,Safetensors,FileIo,MiniJson}.cpp \
    -o "$build/compress_ratio"
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/gpu.txt"
  data=()
  [ -n "${DATA:-}" ] && data=(--data "$DATA")
  echo "data: ${DATA:-synthetic tokens}" | tee "$out/compress.txt"
  for m in $models; do
    rm -rf "${ck:?}/$m"
    echo "compress.sh: $m"
    mpirun --allow-run-as-root -np 1 -x NCCL_NVLS_ENABLE "$build/build/train_$m" --steps "$steps" \
      --save "$ck/$m" --save-every "$every" --out "$out/$m" --overwrite --quiet "${data[@]}" \
      >"$out/$m.log" 2>&1 || { tail -20 "$out/$m.log"; exit 1; }
    later=()
    for ((s = 2 * every; s <= steps; s += every)); do later+=("$ck/$m/step-$s"); done
    echo "$m: against $ck/$m/step-$every" | tee -a "$out/compress.txt"
    "$build/compress_ratio" "$ck/$m/step-$every" "${later[@]}" | tee -a "$out/compress.txt"
    rm -rf "${ck:?}/$m"
  done
  ;;
*) echo "compress.sh: unknown mode $mode (stage or device)" >&2; exit 2 ;;
esac
