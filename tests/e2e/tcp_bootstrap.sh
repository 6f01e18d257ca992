#!/usr/bin/env bash
# The torchrun-style start of the CUDA program without MPI (backends/cuda/Bootstrap.cpp,
# MpiRoute.cpp), on the CPU, in a few seconds: tcp_bootstrap_test.cpp runs every MPI call the
# runtime makes over the TCP world as 3 processes given only RANK, WORLD_SIZE, MASTER_ADDR and
# MASTER_PORT, then the runtime's Mesh and a sharded checkpoint saved and loaded over them; then the same program under mpirun (the PMPI path); then the failures: a rank
# that calls MPI_Abort or crashes stops the others (blocked in a receive) within a few seconds,
# with a message naming it; a rank whose peers never come gives up at AUTODDL_CONNECT_TIMEOUT
# with a message naming the address. The program is also built without MPI (NoMpi.h for mpi.h,
# AUTODDL_NO_MPI) and runs as 3 torchrun-style processes. Without mpicxx only that part runs.
# Usage: tcp_bootstrap.sh WORKDIR
set -uo pipefail
w=$1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
rm -rf "$w" && mkdir -p "$w/nompi"
fail() { echo "FAIL: $*"; exit 1; }
sources=("$here/tcp_bootstrap_test.cpp" "$root/backends/cuda/Bootstrap.cpp"
  "$root/backends/cuda/MpiRoute.cpp" "$root/backends/host/CommStats.cpp")
for f in host/Mesh host/Checkpoint common/Safetensors common/FileIo common/MiniJson common/Init; do
  sources+=("$root/backends/$f.cpp")
done
cp "$root/backends/cuda/NoMpi.h" "$w/nompi/mpi.h"
# Through ccache where there is one (a second run compiles nothing).
launcher=()
command -v ccache >/dev/null && launcher=(ccache)
"${launcher[@]}" c++ -std=c++17 -O1 -Wall -Wextra -Werror -DAUTODDL_NO_MPI=1 -I"$root" -I"$w/nompi" "${sources[@]}" \
  -pthread -o "$w/t-nompi" || fail "build without MPI"
if command -v mpicxx >/dev/null; then
  "${launcher[@]}" mpicxx -std=c++17 -O1 -Wall -Wextra -Werror -DOMPI_SKIP_MPICXX=1 -I"$root" "${sources[@]}" \
    -pthread -o "$w/t" || fail "build"
else
  echo "no mpicxx: the build without MPI only"
  cp "$w/t-nompi" "$w/t"
fi
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'; }
# launch MODE N [RANKS...]: starts the given ranks (default all) of an N-rank world as torchrun
# would, waits; rc.R and log.R per rank in $w/MODE; prints the seconds taken. Peers wait up to
# $connect (default 20 s: three processes starting on a loaded 2-core CI machine) for each other.
launch() {
  local mode=$1 n=$2; shift 2
  local ranks=("$@") port d
  [ ${#ranks[@]} -gt 0 ] || ranks=($(seq 0 $((n - 1))))
  port=$(free_port) d=$w/$mode && mkdir -p "$d"
  local start=$SECONDS pids=()
  for r in "${ranks[@]}"; do
    env RANK=$r LOCAL_RANK=$r WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      AUTODDL_CONNECT_TIMEOUT=${connect:-20} timeout 30 "${prog:-$w/t}" "${mode%%-*}" "$d" >"$d/log.$r" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}"; echo $? >"$d/rc.${ranks[$i]}"
  done
  echo $((SECONDS - start))
}
rc() { cat "$w/$1/rc.$2"; }
has() { grep -q -- "$3" "$w/$1/log.$2" || { cat "$w/$1/log.$2"; fail "$1: rank $2 says no \"$3\""; }; }

t=$(launch ok 3)
for r in 0 1 2; do [ "$(rc ok $r)" = 0 ] || { cat "$w/ok/log.$r"; fail "ok: rank $r"; }; has ok $r "rank $r ok"; done
echo "ok: 3 torchrun-style ranks, every MPI call of the runtime over TCP, a Mesh and a sharded checkpoint saved and read back (${t} s)"
t=$(prog=$w/t-nompi launch ok-nompi 3)
for r in 0 1 2; do [ "$(rc ok-nompi $r)" = 0 ] || { cat "$w/ok-nompi/log.$r"; fail "ok-nompi: rank $r"; }; done
echo "ok: the same, built without MPI (${t} s)"

if command -v mpicxx >/dev/null && command -v mpirun >/dev/null; then
  env -u RANK -u WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT \
    timeout 60 mpirun --oversubscribe --allow-run-as-root -np 3 "$w/t" ok "$w" >"$w/mpirun.log" 2>&1 ||
    { cat "$w/mpirun.log"; fail "under mpirun"; }
  [ "$(grep -c ' ok$' "$w/mpirun.log")" = 3 ] || { cat "$w/mpirun.log"; fail "mpirun: not 3 ok"; }
  echo "ok: the same program under mpirun (the MPI library through PMPI)"
fi

for mode in abort crash; do
  t=$(launch $mode 3)
  [ "$t" -le 10 ] || fail "$mode: took $t s"
  for r in 0 2; do
    [ "$(rc $mode $r)" != 0 ] && [ "$(rc $mode $r)" != 124 ] || fail "$mode: rank $r exit $(rc $mode $r)"
  done
  [ "$(rc $mode 1)" = "$([ $mode = abort ] && echo 3 || echo 4)" ] || fail "$mode: rank 1 exit $(rc $mode 1)"
  want=$([ $mode = abort ] && echo "rank 1 failed" || echo "rank 1 exited or crashed")
  has $mode 0 "$want"
  has $mode 2 "stopping: rank 1 failed"
  echo "ok: $mode of rank 1 stops ranks 0 and 2 in ${t} s: $(head -1 "$w/$mode/log.0")"
done

t=$(connect=2 launch lonely-1 2 1)
[ "$(rc lonely-1 1)" = 1 ] && [ "$t" -le 6 ] || fail "rank 1 without rank 0: exit $(rc lonely-1 1) after $t s"
has lonely-1 1 "could not connect to rank 0 at 127.0.0.1"
echo "ok: rank 1 without rank 0 gives up after ${t} s: $(head -1 "$w/lonely-1/log.1")"
t=$(connect=2 launch lonely-0 2 0)
[ "$(rc lonely-0 0)" = 1 ] && [ "$t" -le 6 ] || fail "rank 0 alone: exit $(rc lonely-0 0) after $t s"
has lonely-0 0 "only 0 of 2 connections"
echo "ok: rank 0 alone gives up after ${t} s: $(head -1 "$w/lonely-0/log.0")"
