#!/usr/bin/env bash
# One run on 2 GPUs for issue 6 parts 3 and 7: the same generated program (tiny-gpt dp=2) started
# by mpirun, by torchrun (python3 -m torch.distributed.run --nproc_per_node=2 --no-python) and by
# the bare torchrun variables, with the losses compared (must be identical), then the fault cases
# of fault_gpu.sh. Prints the report (e.g. bench/results/cuda/2026-12-02-checks-graph-multirank/
# torchrun_fault.txt).
#
#   here:   autoddl plan tiny-gpt --cluster h200x2-nvlink --gpus 2 --global-batch 8 --seq 64 \
#             --fix tp=1,pp=1,dp=2 --no-why -o DIR/plan.json
#           autoddl codegen DIR/plan.json --backend cuda -o DIR/p
#           (optional, saves the device the build: cmake -S DIR/p -B DIR/p/build
#            -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build DIR/p/build; cp DIR/p/build/train DIR/bin/;
#            the same with -DAUTODDL_NO_MPI=ON into DIR/bin-nompi/: then that build runs under
#            torchrun too, and its losses join the comparison)
#   device: [RANKS=2] tests/gpu/torchrun_gpu.sh DIR [WORKDIR]   (RANKS: the plan's GPUs; RUNS,
#           and fault_gpu.sh's FAULT_CASES and WATCHDOG, choose fewer runs)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=$(realpath "$1") w=${2:-/tmp/autoddl-torchrun} n=${RANKS:-2}
export RANKS=$n
rm -rf "$w" && mkdir -p "$w"
export NCCL_NVLS_ENABLE=0
echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sed 's/^/device: /'
echo "torch: $(python3 -c 'import torch; print(torch.__version__, "nccl", torch.cuda.nccl.version())' 2>&1 | tail -1)"
echo "mpirun: $(mpirun --version 2>&1 | head -1)"
train=$dir/bin/train
if [ ! -x "$train" ] || ldd "$train" | grep -q "not found"; then
  echo "building $dir/p here"
  cmake -S "$dir/p" -B "$w/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    >"$w/build.log" 2>&1 && cmake --build "$w/build" -j "$(nproc)" >>"$w/build.log" 2>&1 ||
    { tail -30 "$w/build.log"; exit 1; }
  train=$w/build/train
fi
echo "torchrun's worker variables:"
python3 -m torch.distributed.run --nproc_per_node=1 --no-python env 2>/dev/null |
  grep -E '^(RANK|WORLD_SIZE|LOCAL_RANK|MASTER_ADDR|MASTER_PORT|TORCHELASTIC_USE_AGENT_STORE)=' |
  sort | sed 's/^/  /'

steps=10
# AUTODDL_SHARE_GPU=1 (exported): fewer GPUs than ranks (Comm.cu); torchrun and the bare
# variables pass it on by themselves.
shareArgs=() && [ "${AUTODDL_SHARE_GPU:-}" = 1 ] && shareArgs=(-x AUTODDL_SHARE_GPU)
run_mpi() { mpirun --allow-run-as-root --oversubscribe -np $n -x NCCL_NVLS_ENABLE "${shareArgs[@]}" "$train" "$@"; }
run_torch() { python3 -m torch.distributed.run --nproc_per_node=$n --no-python "$train" "$@"; }
run_env() { # the torchrun variables alone, no launcher
  local port; port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')
  local pids=() r rc=0
  for r in $(seq $((n - 1)) -1 0); do
    RANK=$r LOCAL_RANK=$r WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$train" "$@" &
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r" || rc=1; done
  return $rc
}
ok=1
runs=${RUNS:-mpi mpi2 torch env} # mpi2: mpirun again, run-to-run variation
[ -x "$dir/bin-nompi/train" ] && runs="$runs nompi"
for how in $runs; do
  start=$SECONDS
  case $how in
    mpi | mpi2) launcher=run_mpi ;;
    torch | nompi) launcher=run_torch ;; # nompi: the build without MPI
    env) launcher=run_env ;;
  esac
  [ $how = nompi ] && train_saved=$train train=$dir/bin-nompi/train
  if $launcher --steps $steps --out "$w/$how" --quiet >"$w/$how.log" 2>&1; then
    echo "$how: $steps steps in $((SECONDS - start)) s (start-up included)"
  else
    echo "$how: FAILED"; tail -20 "$w/$how.log"; ok=0
  fi
  [ $how = nompi ] && train=$train_saved
done
python3 - "$w" <<'PY' || ok=0
import json, os, sys
w = sys.argv[1]
names = [k for k in ("mpi", "mpi2", "torch", "env", "nompi") if os.path.exists(f"{w}/{k}.log")]
loss = {k: json.load(open(f"{w}/{k}/metrics.json"))["loss"] for k in names}
print("losses (mpirun):", " ".join(f"{x:.9f}" for x in loss["mpi"][:3]), "...", f"{loss['mpi'][-1]:.9f}")
for k in names[1:]:
    d = max(abs(a - b) for a, b in zip(loss["mpi"], loss[k]))
    print(f"{k} vs mpirun: {'identical' if loss[k] == loss['mpi'] else 'DIFFERENT'} (max |diff| {d:.3g} over {len(loss[k])} steps)")
sys.exit(0 if all(loss[k] == loss["mpi"] for k in names if k != "mpi2") else 1)
PY
echo "---- fault_gpu.sh"
"$here/fault_gpu.sh" "$train" "$w/fault" || ok=0
[ $ok = 1 ] && echo "ALL OK" || { echo "SOME CHECKS FAILED"; exit 1; }
