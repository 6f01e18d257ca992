#!/usr/bin/env bash
# The CUDA benchmark of issue 6 (docs/calibrate.md "Benchmark"): on one machine, in one run,
# PyTorch (eager, torch.compile; on 2 GPUs DDP and tensor parallel) and the autoddl-generated
# CUDA programs on GPT-2 124M/355M/774M/1.5B, seq 1024, bf16, AdamW, same micro-batches; and,
# with --probe, the calibration probe (autoddl calibrate's project, built standalone).
#
#   bash bench/cuda/run.sh [--gpus 1|2|all] [--projects DIR] [--probe] [--steps N]
#                          [--warmup N] [--models a,b] [--compile-wait S] [--dist-compile]
#                          [--modes eager,compile] [--dist-models a,b] [--profile]
#                          [--micro m=B,..] [--build-first] [--ab-autotune]
#
# --profile: run the generated programs with --profile --trace as well and keep their metrics.json
#   and trace.json in $OUT/validate-<project>/, for `autoddl validate PLAN --measured DIR` here;
#   the timed (unprofiled) run's metrics.json goes to $OUT/run-<project>/ (a step replayed as a
#   CUDA graph there fits gpu.graph_op_overhead_us: validate --graph-run, fit_check.sh).
# --modes: the one-GPU PyTorch modes (default eager,compile; none: skip them).
# --dist-models: the models of the two-GPU PyTorch runs (default: --models).
# --micro: PyTorch's micro-batch per GPU for these models (e.g. gpt2-xl=8; default 16 each),
#   to match projects made with make_projects.sh --micro.
#
# --build-first: build the generated projects before PyTorch runs rather than beside it, so the
#   peer is timed on an idle machine (the builds take a few minutes of the call).
# --ab-autotune: run each generated program a second time with AUTODDL_GEMM_AUTOTUNE=0 (the
#   cuBLASLt heuristic's first algorithm, docs/runtime.md) -> autoddl_rows_heuristic.jsonl.
# --compile-wait S: how long the torch.compile children may compile (all four at once) before
#   the ones not done are given up; 1.5B took over 100 s on the H200 machine (default 240).
# --dist-compile: on 2 GPUs also DDP and TP of torch.compile(model) (compiled one at a time).
# --gpus 1: eager and compile on one GPU; 2: DDP and TP with torchrun on two; all: both.
# --projects DIR: generated projects (bench/cuda/make_projects.sh), one folder each with a
#   bench.json ({"model", "gpus", "plan", "micro_batch", "global_batch"}); each is built with
#   CMake and run under mpirun for --steps + --warmup steps; autoddl_tokens_per_s is computed
#   from its metrics.json step times after the warm-up steps. Only the projects of --models run.
# Results go to $OUT (the device tool's folder) when set, else bench/results/cuda/<date>-run/
# (rename it to say what ran, and add its README: bench/results/README.md):
#   cuda_vs_pytorch.json (issue 6 part 5's schema), pytorch_rows.jsonl, autoddl_rows.jsonl,
#   h200-calibrated.json + calibrate_raw.json (--probe), run.log (every log), info.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source bench/cuda/cudnn_env.sh # the programs' attention loads libcudnn (cuDNN path)
export PYTHONUNBUFFERED=1

args="$*"
gpus=1 projects="" probe=0 steps=10 warmup=3 compile_wait=240 dist_compile=0
models=gpt2,gpt2-medium,gpt2-large,gpt2-xl
modes=eager,compile dist_models="" profile=0 build_first=0 ab_autotune=0
while [ $# -gt 0 ]; do
  case "$1" in
  --gpus) gpus=$2; shift 2 ;;
  --projects) projects=$2; shift 2 ;;
  --probe) probe=1; shift ;;
  --steps) steps=$2; shift 2 ;;
  --warmup) warmup=$2; shift 2 ;;
  --models) models=$2; shift 2 ;;
  --compile-wait) compile_wait=$2; shift 2 ;;
  --dist-compile) dist_compile=1; shift ;;
  --modes) modes=$2; shift 2 ;;
  --dist-models) dist_models=$2; shift 2 ;;
  --profile) profile=1; shift ;;
  --build-first) build_first=1; shift ;;
  --ab-autotune) ab_autotune=1; shift ;;
  --micro) export BENCH_MICRO_BATCHES=$2; shift 2 ;;
  *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
dist_models=${dist_models:-$models}
case "$gpus" in 1 | 2 | all) ;; *) echo "run.sh: --gpus takes 1, 2 or all" >&2; exit 2 ;; esac

res=${OUT:-bench/results/cuda/$(date -u +%F)-run}
mkdir -p "$res"
log=$res/run.log
: >"$log"
say() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$log"; }
t0=$(date +%s)
ngpu=${BENCH_GPUS:-$(nvidia-smi -L 2>/dev/null | wc -l)} # BENCH_GPUS: for dry runs without GPUs
jobs=$(nproc)

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv
  nvidia-smi topo -m
  nvcc --version | tail -2
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
  mpirun --version 2>&1 | head -1
} >"$res/info.txt" 2>&1
say "$(head -3 "$res/info.txt" | tail -1); $ngpu GPU(s)"

# The probe builds in the background while PyTorch runs (CPU only; its GPU run comes last).
probe_build=/tmp/autoddl-calibrate-build
if [ "$probe" = 1 ]; then
  (cmake -S backends/cuda/calibrate/probe -B "$probe_build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES=90 && nice cmake --build "$probe_build" -j "$jobs") \
    >"$res/probe_build.log" 2>&1 &
  probe_pid=$!
fi

# The generated projects this run needs build in the background too, nproc/4 at a time (one
# project compiles a handful of translation units and cannot fill 16 cores alone), niced so
# that the timed PyTorch processes keep their CPU; they run after PyTorch.
selected=()
if [ -n "$projects" ]; then
  for dir in "$projects"/*/; do
    [ -f "$dir/bench.json" ] || continue
    name=$(basename "$dir")
    want=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["gpus"])' "$dir/bench.json")
    model=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["model"])' "$dir/bench.json")
    [[ ",$models," == *",$model,"* ]] || continue # --models picks both sides' models
    if [ "$gpus" = 1 ] && [ "$want" != 1 ]; then continue; fi
    if [ "$gpus" = 2 ] && [ "$want" != 2 ]; then continue; fi
    if [ "$want" -gt "$ngpu" ]; then say "autoddl $name: needs $want GPUs, have $ngpu"; continue; fi
    selected+=("${dir%/}")
  done
fi
build_one() { # project dir -> /tmp/autoddl-bench/<name>{,.log,.ok}
  local b=/tmp/autoddl-bench/$(basename "$1")
  mkdir -p "$b"
  rm -f "$b.ok"
  cmake -S "$1" -B "$b" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$b.log" 2>&1 &&
    nice cmake --build "$b" -j 4 >>"$b.log" 2>&1 && touch "$b.ok"
}
export -f build_one
# Projects generated by one autoddl carry byte-identical runtimes: then one CMake build compiles
# the runtime once and links every project's train.cpp against it (the runtime's CUDA sources
# are most of a project's build time); otherwise each project builds on its own.
shared_runtime() { # project dirs... -> 0 when all runtime/ trees are identical
  local first=$1/runtime d
  shift
  for d in "$@"; do diff -rq "$first" "$d/runtime" >/dev/null || return 1; done
}
build_shared() { # project dirs... -> /tmp/autoddl-bench/<name>/train links into one build
  local top=/tmp/autoddl-bench/shared d n
  mkdir -p "$top/src"
  bash bench/cuda/shared_runtime_cmake.sh "$@" >"$top/src/CMakeLists.txt"
  if cmake -S "$top/src" -B "$top/build" -DCMAKE_BUILD_TYPE=Release >"$top.log" 2>&1 &&
    nice cmake --build "$top/build" -j "$jobs" -- -k >>"$top.log" 2>&1; then :; fi
  for d in "$@"; do
    n=$(basename "$d")
    mkdir -p "/tmp/autoddl-bench/$n"
    cp "$top.log" "/tmp/autoddl-bench/$n.log"
    if [ -x "$top/build/train_$n" ]; then
      ln -sf "$top/build/train_$n" "/tmp/autoddl-bench/$n/train"
      touch "/tmp/autoddl-bench/$n.ok"
    fi
  done
}
if [ ${#selected[@]} -gt 0 ]; then
  if shared_runtime "${selected[@]}"; then
    say "autoddl: building ${#selected[@]} project(s) on one shared runtime, in the background"
    build_shared "${selected[@]}" &
  else
    say "autoddl: building ${#selected[@]} project(s) in the background"
    printf '%s\0' "${selected[@]}" | xargs -0 -P $((jobs / 4 > 0 ? jobs / 4 : 1)) -I{} bash -c 'build_one "$1"' _ {} &
  fi
  builds_pid=$!
  if [ "$build_first" = 1 ]; then
    say "autoddl: waiting for the builds before PyTorch runs (--build-first)"
    wait "$builds_pid"
  fi
fi

pt_rows=$res/pytorch_rows.jsonl
: >"$pt_rows"
if { [ "$gpus" = 1 ] || [ "$gpus" = all ]; } && [ "$modes" != none ]; then
  say "PyTorch 1 GPU: $modes ($models)"
  python3 bench/cuda/pytorch_gpt2.py suite --models "$models" --modes "$modes" --steps "$steps" \
    --warmup "$warmup" --compile-wait-s "$compile_wait" --out "$pt_rows" >>"$log" 2>&1
fi
if { [ "$gpus" = 2 ] || [ "$gpus" = all ]; } && [ "$ngpu" -ge 2 ]; then
  variants=("")
  [ "$dist_compile" = 1 ] && variants+=(--compile)
  for m in ${dist_models//,/ }; do
    for mode in ddp tp; do
      for v in "${variants[@]}"; do
        say "PyTorch 2 GPUs: $mode $v $m"
        timeout 400 torchrun --standalone --nproc_per_node 2 bench/cuda/pytorch_gpt2.py one \
          --model "$m" --mode "$mode" $v --steps "$steps" --warmup "$warmup" --out "$pt_rows" \
          >>"$log" 2>&1 || say "  failed (status $?)"
      done
    done
  done
fi

ad_rows=$res/autoddl_rows.jsonl
: >"$ad_rows"
if [ ${#selected[@]} -gt 0 ]; then
  say "autoddl: waiting for the builds"
  [ "$build_first" = 1 ] || wait "$builds_pid"
  for dir in "${selected[@]}"; do
    name=$(basename "$dir")
    want=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["gpus"])' "$dir/bench.json")
    b=/tmp/autoddl-bench/$name
    cat "$b.log" >>"$log"
    if [ -f "$b.ok" ]; then
      say "autoddl $name: run on $want GPU(s)"
      rm -rf "$b/out"
      timeout 300 mpirun --allow-run-as-root --oversubscribe -np "$want" \
        -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS \
        "$b/train" --steps $((steps + warmup)) --out "$b/out" --quiet >>"$log" 2>&1
      st=$?
      python3 bench/cuda/results_table.py autoddl-row "$dir/bench.json" "$b/out/metrics.json" \
        "$warmup" "$st" >>"$ad_rows"
      if [ "$ab_autotune" = 1 ]; then
        say "autoddl $name: again with AUTODDL_GEMM_AUTOTUNE=0"
        rm -rf "$b/out0"
        AUTODDL_GEMM_AUTOTUNE=0 timeout 300 mpirun --allow-run-as-root --oversubscribe -np "$want" \
          -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS \
          -x AUTODDL_GEMM_AUTOTUNE "$b/train" --steps $((steps + warmup)) --out "$b/out0" --quiet \
          >>"$log" 2>&1
        python3 bench/cuda/results_table.py autoddl-row "$dir/bench.json" "$b/out0/metrics.json" \
          "$warmup" "$?" >>"$res/autoddl_rows_heuristic.jsonl"
      fi
      if [ "$profile" = 1 ]; then # a second, profiled run: op times for autoddl validate
        mkdir -p "$res/run-$name" && cp "$b/out/metrics.json" "$res/run-$name/" 2>/dev/null
        say "autoddl $name: profiled run"
        timeout 300 mpirun --allow-run-as-root --oversubscribe -np "$want" \
          -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS \
          "$b/train" --steps $((steps + warmup)) --out "$res/validate-$name" --profile --trace \
          --quiet >>"$log" 2>&1 || say "  profiled run failed"
      fi
    else
      say "autoddl $name: build failed (log: $b.log, copied into run.log)"
      python3 bench/cuda/results_table.py autoddl-row "$dir/bench.json" "" "$warmup" build >>"$ad_rows"
    fi
  done
fi

if [ "$probe" = 1 ]; then
  say "probe: waiting for its build"
  if wait "$probe_pid"; then
    np=$ngpu
    [ "$gpus" = 1 ] && np=1
    say "probe: mpirun -np $np"
    mpirun --allow-run-as-root -np "$np" -x NCCL_NVLS_ENABLE "$probe_build/calibrate" \
      -o "$res/h200-calibrated.json" --raw "$res/calibrate_raw.json" --name h200-calibrated \
      2>&1 | tee -a "$log"
  else
    say "probe: build failed"
    tail -30 "$res/probe_build.log" | tee -a "$log"
  fi
  cat "$res/probe_build.log" >>"$log"
  rm -f "$res/probe_build.log"
fi

python3 bench/cuda/results_table.py combine --pytorch "$pt_rows" --autoddl "$ad_rows" \
  --info "$res/info.txt" --command "bash bench/cuda/run.sh $args" --out "$res/cuda_vs_pytorch.json" \
  2>&1 | tee -a "$log"
say "done in $(($(date +%s) - t0)) s"
