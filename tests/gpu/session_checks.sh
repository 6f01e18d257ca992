#!/usr/bin/env bash
# One device call that checks a merged tree on one H200 (run from the repo root there), each part
# under its own time limit and skipped once the call's budget is spent; every log and result goes
# into one tarball, $OUT/session.tgz (the device tool returns at most 8 files). Stage here first:
#
#   VERIFY_MAX_GPUS=2 bash tests/gpu/verify_gpu.sh prepare build/tools/autoddl/autoddl .gpu/verify
#   AUTODDL=build/tools/autoddl/autoddl bash bench/cuda/make_projects.sh --plans single .gpu/p
#   tests/gpu/hf_checkpoint.sh prepare build/tools/autoddl/autoddl .gpu/hfck
#   python3 bench/pipefisher/utilisation_cpu.py stage .gpu/ub
#
# then, on the device with carry [".gpu"]:  bash tests/gpu/session_checks.sh [BUDGET_S]
# Parts (each runs only if its staged folder exists): kernels (KernelCheck bf16/fp32, built
# there, beside the verify matrix), verify (tests/gpu/verify_gpu.sh device .gpu/verify 2), speed
# (the generated GPT-2 programs alone: run.sh --modes none), utilisation (the CPU pipeline programs
# with and without K-FAC, one rank a core), hf (transformers' from_pretrained on the programs'
# checkpoints), onnx (tests/onnx/export_models.py).
set -uo pipefail
budget=${1:-560}
out=${OUT:-/tmp/session-out}
w=/tmp/session
rm -rf "$w" && mkdir -p "$w" "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source bench/cuda/cudnn_env.sh
t0=$(date +%s)
left() { echo $((budget - ($(date +%s) - t0))); }
stamp() { echo "[$(($(date +%s) - t0)) s] $*" | tee -a "$w/session.log"; }
part() { # name limit command...: runs when the budget has the limit left
  local name=$1 limit=$2
  shift 2
  if [ "$(left)" -lt "$limit" ]; then
    stamp "$name: skipped ($(left) s left, needs $limit)"
    return
  fi
  timeout "$limit" "$@" >"$w/$name.log" 2>&1
  stamp "$name: rc $?"
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$w/gpu.txt" 2>&1
git log -1 --format='%H %s' >"$w/commit.txt" 2>/dev/null
kpid=""
if [ -d .gpu/verify ]; then # KernelCheck builds and runs beside the verify matrix
  (timeout 240 bash tests/gpu/check_kernels.sh "$w/kernels" >"$w/kernels.log" 2>&1
   echo "kernels rc $?" >>"$w/kernels.log") &
  kpid=$!
  part verify 250 env OUT="$w/verify" bash tests/gpu/verify_gpu.sh device .gpu/verify 2
  wait "$kpid"
  stamp "$(tail -1 "$w/kernels.log"); $(grep -h -c FAIL "$w"/kernels/check_*.txt 2>/dev/null | paste -sd+) FAIL lines"
fi
[ -d .gpu/p ] && part speed 110 env OUT="$w/speed" bash bench/cuda/run.sh --gpus 1 --projects .gpu/p --modes none
if [ -d .gpu/ub ]; then
  part utilisation 90 python3 bench/pipefisher/utilisation_cpu.py run .gpu/ub --steps 10 --warmup 2
  cp .gpu/ub/utilisation.json "$w/" 2>/dev/null
fi
[ -d .gpu/hfck ] && part hf 45 tests/gpu/hf_checkpoint.sh check .gpu/hfck
part onnx 60 python3 tests/onnx/export_models.py --out "$w/onnx_exports"
tar czf "$out/session.tgz" -C "$w" .
stamp "done"
