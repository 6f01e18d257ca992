#!/usr/bin/env bash
# Measures NCCL bus bandwidth between the 2 GPUs of an nvidia-h200-x2 machine (device tool):
#   run kind=nvidia-h200-x2, carry build-cost/allreduce_busbw (built here with
#   `nvcc -O2 -arch=sm_90 -o build-cost/allreduce_busbw bench/nccl/allreduce_busbw.cu -lnccl`),
#   command: bash bench/nccl/run_h200x2.sh
# Writes $OUT/nccl_h200x2.json (default algorithm choice), $OUT/nccl_h200x2_ring.json and
# $OUT/nccl_h200x2_tree.json (NCCL_ALGO forced), and $OUT/topo.txt (nvidia-smi topo -m).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvidia-smi topo -m >"$out/topo.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv >>"$out/topo.txt" 2>&1
# The device image carries NCCL in PyTorch's wheel, not in /usr/local/cuda.
lib=$(find / -xdev -name 'libnccl.so.2' 2>/dev/null | head -1)
echo "libnccl: $lib" >>"$out/topo.txt"
export LD_LIBRARY_PATH=$(dirname "$lib"):${LD_LIBRARY_PATH:-}
bin=build-cost/allreduce_busbw
if ! "$bin" 4096 >/dev/null 2>>"$out/topo.txt"; then
  inc=$(dirname "$(find / -xdev -name nccl.h 2>/dev/null | head -1)")
  nvcc -O2 -arch=sm_90 -I"$inc" -L"$(dirname "$lib")" -o /tmp/allreduce_busbw \
    bench/nccl/allreduce_busbw.cu -l:libnccl.so.2 2>>"$out/topo.txt"
  bin=/tmp/allreduce_busbw
fi
"$bin" >"$out/nccl_h200x2.json"
NCCL_ALGO=Ring "$bin" >"$out/nccl_h200x2_ring.json"
NCCL_ALGO=Tree "$bin" >"$out/nccl_h200x2_tree.json"
cat "$out/topo.txt"
grep -E '"(all_reduce)".*"bytes": (1024|1048576|268435456|1073741824),' "$out/nccl_h200x2.json"
