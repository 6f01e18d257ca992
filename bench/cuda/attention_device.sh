#!/usr/bin/env bash
# What one GPU-machine call runs (repository root, H200): build if the carried binaries do
# not run there, check correctness (bf16 and fp32 against the CPU kernel, the bf16 build on each
# path: own kernels, cuDNN, and each mixed; memcheck and racecheck on the small cases unless
# ATTENTION_SANITIZE is set empty), then time ours (own kernels and cuDNN path) against PyTorch's
# cuDNN, flash and memory-efficient backends, every output checked against an fp32 reference.
# usage: bench/cuda/attention_device.sh PREBUILT_DIR OUT_DIR
set -uo pipefail
export NCCL_NVLS_ENABLE=0
bin=${1:?usage: attention_device.sh PREBUILT_DIR OUT_DIR}
out=${2:?usage: attention_device.sh PREBUILT_DIR OUT_DIR}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu \
  --format=csv | tee "$out/gpu.txt"
source bench/cuda/cudnn_env.sh # libcudnn for the cuDNN path (PyTorch's wheel where no other)
# A usage error (2) says the carried binary loads here (its libraries found).
"$bin/attention_bench" --probe >/dev/null 2>&1; rc=$?
if [ "$rc" != 2 ]; then
  echo "carried binaries do not run here (rc $rc): building"
  bin=/tmp/attention-build
  bash bench/cuda/attention_build.sh "$bin" 2>&1 | tail -20 || exit 1
fi
status=0
checks=${ATTENTION_CHECKS:-"bf16 fp32 $(cd "$bin" && ls AttentionCheck_bf16_* 2>/dev/null | sed 's/^AttentionCheck_//' | tr '\n' ' ')"}
for mode in $checks; do
  AUTODDL_ATTENTION_VERBOSE=1 "$bin/AttentionCheck_$mode" 2>&1 | tee "$out/check_$mode.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
done
for tool in memcheck racecheck; do
  for mode in ${ATTENTION_SANITIZE-bf16}; do
    timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 \
      "$bin/AttentionCheck_$mode" --quick >"$out/sanitizer_${tool}_$mode.txt" 2>&1
    echo "compute-sanitizer $tool $mode: rc $? ($(grep -c -E 'ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards' "$out/sanitizer_${tool}_$mode.txt") clean summaries)"
  done
done
variants=()
for b in "$bin"/attention_bench_*; do
  [ -x "$b" ] && variants+=(--variant "${b##*/attention_bench_}=$b")
done
python3 bench/cuda/attention_compare.py --bench "$bin/attention_bench" "${variants[@]}" \
  --out "$out/attention_h200.json" --nvcc-version "$(nvcc --version | tail -2 | head -1)" \
  --dump-dir "${ATTENTION_DUMP:-/tmp/attention_dump}" 2>&1 | tee "$out/compare.txt"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
exit $status
