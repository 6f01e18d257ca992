#!/usr/bin/env bash
# Faults on 2 GPUs (issue 6 part 7): a CUDA or NCCL error, a kernel fault, a crash or a hang on
# rank 1 stops BOTH ranks, non-zero, within a bound, with a message naming the rank, the call and
# the place, and the last checkpoint stays intact.
#   [RANKS=2] tests/gpu/fault_gpu.sh TRAIN WORKDIR
# TRAIN: a built generated CUDA program of RANKS ranks (e.g. tiny-gpt dp=2); the last rank fails
# (RANKS=1: the one rank, where only its own exit is checked). Steps:
#  1. a clean run saves WORKDIR/ck/step-2 and step-4 (the md5 of step-4 is kept);
#  2. per fault (AUTODDL_FAULT_INJECT=1:2:KIND, Comm.h): a run resumed from step-4 that would
#     save step-8 fails at its step 2 (global step 6) on rank 1; started three ways: as torchrun
#     would (RANK/WORLD_SIZE/MASTER_* only, so the TCP world stops the ranks, not a launcher),
#     under torchrun itself, under mpirun; hangs with AUTODDL_WATCHDOG_TIMEOUT=$WATCHDOG (5);
#  3. step-4 has the same md5, no step-8 exists, and a run resumed from step-4 trains.
# Prints one line per case (FAIL: ... for a failed check) and exits non-zero if any failed.
# Exit 77 without 2 GPUs.
set -uo pipefail
train=$(realpath "$1") w=$2 n=${RANKS:-2}
last=$((n - 1))
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
# AUTODDL_SHARE_GPU=1: the ranks may share GPUs (Comm.cu: NCCL over loopback sockets).
shareArgs=()
if [ "${AUTODDL_SHARE_GPU:-}" = 1 ] && [ "${gpus:-0}" -ge 1 ]; then
  export AUTODDL_SHARE_GPU
  shareArgs=(-x AUTODDL_SHARE_GPU)
else
  [ "${gpus:-0}" -ge "$n" ] || { echo "skipped: $n GPUs needed, ${gpus:-0} found"; exit 77; }
fi
rm -rf "$w" && mkdir -p "$w"
export NCCL_NVLS_ENABLE=0
fail() { echo "FAIL: $*"; exit 1; }
status=0
bad() { echo "FAIL: $*"; status=1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'; }
bound=40 # seconds a faulty run may take in all (the hang: the watchdog, then the abort)
hang=${WATCHDOG:-5} # AUTODDL_WATCHDOG_TIMEOUT of the faulty runs (one digit)
# FAULT_CASES="env:cuda mpi:hang ...": only these (launcher:kind) cases; default every case.

# env_launch DIR ARGS...: the ranks given only the torchrun variables; DIR/rc.R, DIR/log.R.
env_launch() {
  local d=$1 port; shift
  mkdir -p "$d"; port=$(free_port)
  local pids=()
  for r in $(seq 0 $last); do
    env RANK=$r LOCAL_RANK=$r WORLD_SIZE=$n LOCAL_WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 \
      MASTER_PORT=$port timeout $((bound + 30)) "$train" "$@" >"$d/log.$r" 2>&1 &
    pids+=($!)
  done
  for r in $(seq 0 $last); do wait "${pids[$r]}"; echo $? >"$d/rc.$r"; done
}
rcs() { local d=$1 r; for r in $(seq 0 $last); do cat "$d/rc.$r"; done | tr -d '\n'; }
zeros=$(printf '0%.0s' $(seq 0 $last))
mpi_launch() { # DIR ARGS...
  local d=$1; shift; mkdir -p "$d"
  timeout $((bound + 30)) mpirun --allow-run-as-root --oversubscribe -np $n \
    -x NCCL_NVLS_ENABLE -x AUTODDL_FAULT_INJECT -x AUTODDL_WATCHDOG_TIMEOUT "${shareArgs[@]}" \
    "$train" "$@" >"$d/log" 2>&1
  echo $? >"$d/rc"
}
torch_launch() { # DIR ARGS...
  local d=$1; shift; mkdir -p "$d"
  timeout $((bound + 30)) python3 -m torch.distributed.run --nproc_per_node=$n --no-python \
    --master_port="$(free_port)" "$train" "$@" >"$d/log" 2>&1
  echo $? >"$d/rc"
}

ck=$w/ck
env_launch "$w/clean" --steps 4 --save "$ck" --save-every 2 --quiet
[ "$(rcs "$w/clean")" = "$zeros" ] || { cat "$w/clean/log."*; fail "clean run"; }
[ -f "$ck/step-4/model.safetensors" ] || fail "no checkpoint step-4"
sum=$(md5sum <"$ck/step-4/model.safetensors" | cut -d' ' -f1)
echo "clean run: checkpoints step-2, step-4 (md5 of step-4 $sum)"

# case LAUNCHER KIND PATTERN_RANK1: one faulty run; checks exits, time, messages.
case_run() {
  local launcher=$1 kind=$2 want=$3 d=$w/$1-$2 start=$SECONDS
  case " ${FAULT_CASES:-$launcher:$kind} " in *" $launcher:$kind "*) ;; *) return ;; esac
  AUTODDL_FAULT_INJECT=$last:2:$kind AUTODDL_WATCHDOG_TIMEOUT=$hang \
    ${launcher}_launch "$d" --steps 10 --resume "$ck/step-4" --save "$ck" --save-every 4 --quiet
  local took=$((SECONDS - start)) all
  if [ "$launcher" = env ]; then
    local rc0 rcl; rc0=$(cat "$d/rc.0") rcl=$(cat "$d/rc.$last")
    for r in $(seq 0 $last); do
      local rc; rc=$(cat "$d/rc.$r")
      [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$rc" != 137 ] ||
        { tail -5 "$d/log.$r"; bad "$launcher $kind: rank $r exit status $rc (0: not stopped; 124: hung)"; return; }
    done
    all="rank $last rc=$rcl: $(grep -m1 -- "$want" "$d/log.$last" | cut -c1-220)"
    grep -q -- "$want" "$d/log.$last" || { tail -5 "$d/log.$last"; bad "$launcher $kind: rank $last says no \"$want\""; return; }
    if [ $n -gt 1 ]; then
      grep -q "autoddl: rank 0" "$d/log.0" || { tail -5 "$d/log.0"; bad "$launcher $kind: rank 0 says nothing"; return; }
      all="rank 0 rc=$rc0: $(grep -m1 'autoddl: rank 0' "$d/log.0" | cut -c1-220) | $all"
    fi
  else
    local rc; rc=$(cat "$d/rc")
    [ "$rc" != 0 ] && [ "$rc" != 124 ] || { tail -8 "$d/log"; bad "$launcher $kind: exit status $rc"; return; }
    grep -q -- "$want" "$d/log" || { tail -8 "$d/log"; bad "$launcher $kind: no \"$want\""; return; }
    all="rc=$rc: $(grep -m1 -- "$want" "$d/log" | cut -c1-220)"
  fi
  [ "$took" -le "$bound" ] || { bad "$launcher $kind: took $took s (bound $bound)"; return; }
  [ "$(md5sum <"$ck/step-4/model.safetensors" | cut -d' ' -f1)" = "$sum" ] ||
    { bad "$launcher $kind: checkpoint step-4 changed"; return; }
  [ ! -e "$ck/step-8" ] || { bad "$launcher $kind: a step-8 checkpoint appeared"; return; }
  echo "ok: $launcher $kind: all $n ranks stopped in $took s; step-4 intact; $all"
}
# CUDA call failure, NCCL call failure, kernel fault (seen at a later call), crash, hang.
# (most telling first: the TCP world alone stopping the ranks).
case_run env cuda "rank $last: CUDA error cudaErrorMemoryAllocation.*in cudaMalloc.* at .*Comm.cu:[0-9]"
case_run env nccl "rank $last: NCCL error .* in ncclAllReduce(nullptr.* at .*Comm.cu:[0-9]"
case_run env hang "watchdog: no progress for [$hang-9] s"
case_run env exit "AUTODDL_FAULT_INJECT: exit at step 2"
[ $n = 1 ] || [ ! -d "$w/env-exit" ] || grep -q "rank $last exited or crashed" "$w/env-exit/log.0" ||
  bad "env exit: rank 0 does not name rank $last"
env_launch "$w/resume" --steps 6 --resume "$ck/step-4" --out "$w/resume/out" --quiet
if [ "$(rcs "$w/resume")" = "$zeros" ]; then
  echo "ok: step-4 still loads and trains: losses $(python3 -c "import json;print(json.load(open('$w/resume/out/metrics.json'))['loss'])")"
else
  tail -n 5 "$w/resume/log."*; bad "resume from step-4 after the faults"
fi
case_run torch cuda "rank $last: CUDA error cudaErrorMemoryAllocation.*in cudaMalloc.* at .*Comm.cu:[0-9]"
case_run mpi hang "watchdog: no progress for [$hang-9] s"
case_run env illegal "rank $last: CUDA error cudaErrorIllegalAddress.* in .* at .*:[0-9]"
case_run mpi nccl "rank $last: NCCL error .* in ncclAllReduce(nullptr.* at .*Comm.cu:[0-9]"
exit $status
