#!/usr/bin/env bash
# MPI progress probe on the GPU machine, and the first-order program alone under MCA variants.
set -u
mkdir -p /tmp/res; rm -rf /tmp/res/*
B=$(cd "$(dirname "$0")/.." && pwd) # bench/pipefisher
cd .gpu/pf
{ ompi_info --version; ompi_info --param btl all --level 9 | grep -i "single_copy\|vader_eager_limit\|vader_max_send\|sm_eager\|sm_max_send"; cat /proc/sys/kernel/yama/ptrace_scope; } > /tmp/res/mpi.txt 2>&1
mkdir -p probe; cd probe; mpicc -O2 "$B/mpi_progress/progress.c" -o progress && mpicc -O2 "$B/mpi_progress/progress_late.c" -o progress_late
{ mpirun --allow-run-as-root --oversubscribe -np 2 ./progress; mpirun --allow-run-as-root --oversubscribe -np 2 ./progress_late; } > /tmp/res/progress.txt 2>&1
cd ..
cat /tmp/res/mpi.txt /tmp/res/progress.txt
T=b64_i1/first_order/build/train
[ -x $T ] || { cmake -S b64_i1/first_order -B b64_i1/first_order/build -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build b64_i1/first_order/build -j 16 >/dev/null; }
for v in default eager cma; do
  o=/tmp/res/traces/$v; env=()
  [ $v = eager ] && env=(-x OMPI_MCA_btl_vader_eager_limit=131072 -x OMPI_MCA_btl_vader_max_send_size=131072)
  [ $v = cma ] && env=(-x OMPI_MCA_btl_vader_single_copy_mechanism=cma)
  OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none "${env[@]}" -np 4 \
    sh -c 'exec taskset -c ${OMPI_COMM_WORLD_RANK} "$0" "$@"' $T --steps 18 --trace --out $o --quiet > /tmp/res/$v.log 2>&1
  echo "$v rc $?" | tee -a /tmp/res/summary.txt; tail -3 /tmp/res/$v.log
done
(cd /tmp/res && tar czf $OUT/results.tgz .)
