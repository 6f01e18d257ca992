#!/usr/bin/env bash
# ctest calibrate_probe_builds: `autoddl calibrate --emit` writes the probe, which builds with
# nvcc, cuBLASLt, NCCL and MPI; run with no GPU it must say so and exit 77 (ctest's skip), with
# a GPU it must write a cluster file the planner loads.
#   probe_builds.sh AUTODDL_BINARY WORK_DIR CUDA_COMPILER
set -euo pipefail
autoddl=$1 work=$2 nvcc=$3
rm -rf "$work"
"$autoddl" calibrate --emit "$work/probe" >/dev/null
cmake -S "$work/probe" -B "$work/build" -DCMAKE_CUDA_COMPILER="$nvcc" >"$work/configure.log" 2>&1 ||
  { tail -20 "$work/configure.log"; exit 1; }
cmake --build "$work/build" -j "$(nproc)" >"$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }
root=()
[ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
set +e
mpirun "${root[@]}" -np 1 "$work/build/calibrate" -o "$work/cluster.json" --quick --max-bytes 1048576 \
  >"$work/run.log" 2>&1
status=$?
set -e
if [ "$status" = 77 ]; then
  grep -q "no CUDA GPU found" "$work/run.log" || { cat "$work/run.log"; exit 1; }
  [ ! -e "$work/cluster.json" ] || { echo "wrote a cluster without a GPU"; exit 1; }
  echo "no GPU: the probe built and refused to measure, as it should"
  exit 77
fi
[ "$status" = 0 ] || { cat "$work/run.log"; exit 1; }
"$autoddl" cost op --kind linear --in 16384x768,3072x768 --params 1 --cluster "$work/cluster.json"
