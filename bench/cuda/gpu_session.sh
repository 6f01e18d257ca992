#!/usr/bin/env bash
# One validation session of the CUDA backend in few device calls (bench/cuda/README.md).
#
#   bash bench/cuda/gpu_session.sh stage [--gpus 1|2|4] [--models a,b] [--micro m=B,..] DIR  # here
#   bash bench/cuda/gpu_session.sh checks DIR    # device: kernels, verify matrix, step graph e2e
#   bash bench/cuda/gpu_session.sh launchers DIR # device (staged --gpus 2): torchrun_gpu.sh, faults
#   bash bench/cuda/gpu_session.sh bench [--models a,b] DIR  # device: bench/cuda/run.sh --profile
#   bash bench/cuda/gpu_session.sh unpack TGZ DIR  # here: a call's results into DIR/results
#                                                  # (checks: the verify result file; bench: the
#                                                  # runs laid out for fit_check.sh)
#
# stage puts everything a call needs into DIR (one folder: name it alone in the device tool's
# `carry`, and have .git/info/exclude ignore it): KernelCheck binaries, the verify cases with their
# CPU reference losses and both precisions prebuilt (xz-compressed, ~8 MB instead of ~90), a
# tiny-gpt fp32 project for tests/e2e/cuda_step_graph.sh, and the GPT-2 benchmark projects of
# bench/cuda/make_projects.sh for that many GPUs. Staging builds with nvcc here (~10 minutes on 2
# cores). The device modes write every log and result under a work folder and return one
# tarball, $OUT/<mode>.tgz (the device tool brings back at most 8 files).
# --gpus 2: the verify cases, the torchrun/fault program and benchmark projects of two GPUs as well
#   (default 1); --gpus 4 adds the verify cases of four ranks (dp=2 x tp=2). On a device of fewer
#   GPUs, checks runs the ranks of a case on shared GPUs (AUTODDL_SHARE_GPU,
#   backends/cuda/Comm.cu): their functions, not their speed.
# --micro: other micro-batches for the benchmark (make_projects.sh --micro; bench runs PyTorch at
#   the same ones).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
mode=${1:?usage: gpu_session.sh stage|checks|bench|unpack ...}
shift

case $mode in
stage)
  gpus=1 models=gpt2,gpt2-medium,gpt2-large,gpt2-xl micro=""
  while [ $# -gt 1 ]; do
    case "$1" in
    --gpus) gpus=$2; shift 2 ;;
    --micro) micro=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    *) echo "gpu_session.sh stage: unknown option $1" >&2; exit 2 ;;
    esac
  done
  dir=${1:?usage: gpu_session.sh stage [--gpus N] [--models a,b] DIR}
  autoddl=$root/build/tools/autoddl/autoddl
  [ -x "$autoddl" ] || { echo "gpu_session.sh: build autoddl first (scripts/build.sh)" >&2; exit 2; }
  # Replaces an earlier stage only, never another folder.
  if [ -e "$dir" ] && ! [ -f "$dir/gpus" ]; then
    echo "gpu_session.sh: $dir exists and is not a staged session; give a new folder" >&2
    exit 2
  fi
  rm -rf "$dir" && mkdir -p "$dir"
  dir=$(realpath "$dir")
  echo "$gpus" >"$dir/gpus"
  echo "$micro" >"$dir/micro"
  cd "$root"
  echo "stage: KernelCheck"
  bash tests/gpu/check_kernels.sh --prebuild "$dir/kernels" >"$dir/kernels.log" 2>&1 || {
    tail -20 "$dir/kernels.log"
    exit 1
  }
  strip "$dir/kernels/KernelCheck" "$dir/kernels/KernelCheckFp32"
  rm -rf "$dir/kernels/build"
  echo "stage: verify cases on at most $gpus GPU(s)"
  VERIFY_MAX_GPUS=$gpus bash tests/gpu/verify_gpu.sh prepare "$autoddl" \
    "$dir/verify" >"$dir/verify.log" 2>&1 &&
    bash tests/gpu/verify_gpu.sh build "$dir/verify" >>"$dir/verify.log" 2>&1 || {
    tail -20 "$dir/verify.log"
    exit 1
  }
  strip "$dir"/verify/prebuilt-*/*
  tar cJf "$dir/verify/prebuilt.tar.xz" -C "$dir/verify" prebuilt-bf16 prebuilt-fp32
  rm -rf "$dir"/verify/prebuilt-* "$dir"/verify/build-* "$dir/verify/cpu"/*/build
  echo "stage: step-graph project"
  "$autoddl" plan tiny-gpt --cluster h200x2-nvlink --gpus 1 --global-batch 8 --seq 64 \
    --fix tp=1,pp=1,dp=1,microbatch=2 --no-why -o "$dir/step_graph_plan.json" >/dev/null &&
    "$autoddl" codegen "$dir/step_graph_plan.json" --backend cuda --fp32 \
      -o "$dir/step_graph" >/dev/null || exit 1
  if [ "$gpus" -ge 2 ]; then
    echo "stage: torchrun/fault program (tiny-gpt dp=2, tests/gpu/torchrun_gpu.sh)"
    t=$dir/torchrun
    mkdir -p "$t/bin"
    "$autoddl" plan tiny-gpt --cluster h200x2-nvlink --gpus 2 --global-batch 8 --seq 64 \
      --fix tp=1,pp=1,dp=2 --no-why -o "$t/plan.json" >/dev/null &&
      "$autoddl" codegen "$t/plan.json" --backend cuda -o "$t/p" >/dev/null &&
      cmake -S "$t/p" -B "$t/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CUDA_ARCHITECTURES=90 >"$dir/torchrun.log" 2>&1 &&
      cmake --build "$t/build" >>"$dir/torchrun.log" 2>&1 || {
      tail -20 "$dir/torchrun.log"
      exit 1
    }
    cp "$t/build/train" "$t/bin/" && strip "$t/bin/train" && rm -rf "$t/build"
  fi
  echo "stage: GPT-2 projects ($models)"
  bash bench/cuda/make_projects.sh --autoddl "$autoddl" --models "$models" \
    ${micro:+--micro "$micro"} "$dir/projects" \
    >"$dir/projects.log" 2>&1 || {
    tail -5 "$dir/projects.log"
    exit 1
  }
  if [ "$gpus" = 1 ]; then # two-GPU projects would only travel
    for p in "$dir"/projects/*/; do
      grep -q '"gpus": 1,' "$p/bench.json" || rm -rf "$p"
    done
  fi
  du -sh "$dir"
  ;;

checks | launchers | bench)
  models="" # bench: the models of this call (run.sh --models); all staged ones by default
  if [ "$mode" = bench ] && [ "${1:-}" = --models ]; then
    models=$2
    shift 2
  fi
  dir=${1:?usage: gpu_session.sh $mode DIR}
  gpus=$(cat "$dir/gpus")
  out=${OUT:-/tmp/gpu-session-out}
  w=/tmp/gpu-session/$mode
  rm -rf "$w" && mkdir -p "$w" "$out"
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  source "$root/bench/cuda/cudnn_env.sh" # the programs' attention loads libcudnn (cuDNN path)
  t0=$(date +%s)
  stamp() { echo "[$(($(date +%s) - t0)) s] $*" | tee -a "$w/session.log"; }
  cd "$root"
  if [ "$mode" = checks ]; then
    bash tests/gpu/check_kernels.sh "$w/kernels" "$dir/kernels" >"$w/kernels.log" 2>&1
    stamp "kernels: rc $?; $(cat "$w"/kernels/check_*.txt 2>/dev/null | grep -c FAIL) FAIL lines"
    tar xJf "$dir/verify/prebuilt.tar.xz" -C "$dir/verify"
    OUT=$w/verify bash tests/gpu/verify_gpu.sh device "$dir/verify" "$gpus" >"$w/verify.log" 2>&1
    stamp "verify: rc $?"
    bash tests/e2e/cuda_step_graph.sh "$dir/step_graph" "$w/step_graph" >"$w/step_graph.log" 2>&1
    stamp "step graph e2e: rc $?"
    rm -rf "$w/step_graph"
  elif [ "$mode" = launchers ]; then # two ranks, sharing the GPU of a one-GPU device
    have=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
    share="" && [ "${have:-0}" -lt 2 ] && share=1
    AUTODDL_SHARE_GPU=$share bash tests/gpu/torchrun_gpu.sh "$dir/torchrun" /tmp/gpu-torchrun \
      >"$w/torchrun_fault.txt" 2>&1
    stamp "torchrun + faults (2 ranks${share:+ on 1 GPU}): rc $?"
  else
    micro=$(cat "$dir/micro" 2>/dev/null)
    OUT=$w/bench bash bench/cuda/run.sh --gpus "$gpus" --profile --projects "$dir/projects" \
      ${micro:+--micro "$micro"} ${models:+--models "$models"}
    stamp "run.sh: rc $?"
  fi
  tar czf "$out/$mode.tgz" -C "$w" .
  cat "$w/session.log"
  ;;

unpack)
  tgz=${1:?usage: gpu_session.sh unpack TGZ DIR} dir=${2:?usage: gpu_session.sh unpack TGZ DIR}
  mode=$(basename "$tgz" .tgz)
  # A second bench call's tarball goes beside the first (bench-2, ...); the runs of all of them
  # gather in measured/ and graph_runs/.
  name=$mode
  for k in 2 3 4 5 6 7 8 9; do
    [ -e "$dir/results/$name" ] || break
    name=$mode-$k
  done
  mkdir -p "$dir/results/$name" && tar xzf "$tgz" -C "$dir/results/$name"
  if [ "$mode" = launchers ]; then
    cat "$dir/results/$name/torchrun_fault.txt"
  elif [ "$mode" = checks ]; then
    bash "$root/tests/gpu/verify_gpu.sh" compare "$dir/verify" "$dir/results/$name/verify" \
      "$dir/results/verify.json"
  else # fit_check.sh's layout: measured/<project>/ (profiled), graph_runs/<project>/ (timed)
    for d in "$dir/results/$name/bench"/validate-* "$dir/results/$name/bench"/run-*; do
      [ -f "$d/metrics.json" ] || continue
      n=$(basename "$d")
      sub=measured && [ "${n%%-*}" = run ] && sub=graph_runs
      mkdir -p "$dir/results/$sub/${n#*-}" && cp "$d/metrics.json" "$dir/results/$sub/${n#*-}/"
    done
    echo "fit: bash bench/cuda/fit_check.sh --graph-runs $dir/results/graph_runs" \
      "$dir/results/measured OUT_DIR"
  fi
  echo "results in $dir/results/$name"
  ;;

*)
  echo "gpu_session.sh: unknown mode $mode (stage, checks, launchers, bench or unpack)" >&2
  exit 2
  ;;
esac
