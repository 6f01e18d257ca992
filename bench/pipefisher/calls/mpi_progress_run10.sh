#!/usr/bin/env bash
# Traces kept: paired K=2,2,3,4 (2 repeats) and the first-order program alone on cores 0-3 and 0,2,4,6.
set -u
mkdir -p /tmp/res; rm -rf /tmp/res/*
B=$(cd "$(dirname "$0")/.." && pwd) # bench/pipefisher
cd .gpu/pf
lscpu -e > /tmp/res/lscpu_e.txt 2>&1; cat /sys/devices/system/cpu/cpu*/topology/thread_siblings_list > /tmp/res/siblings.txt 2>&1
REPEATS=2 timeout 300 "$B/utilisation_call.sh" b64_i1:thread
mkdir -p /tmp/res/traces
for r in b64_i1/runs/*; do n=$(basename $r); mkdir -p /tmp/res/traces/$n; cp $r/trace.json $r/metrics.json /tmp/res/traces/$n/ 2>/dev/null; done
T=b64_i1/first_order/build/train
for cores in 0,1,2,3 0,2,4,6; do
  o=/tmp/res/traces/alone_${cores//,/_}
  OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 4 \
    sh -c "exec taskset -c \$(echo $cores | cut -d, -f\$(( \${OMPI_COMM_WORLD_RANK} + 1 ))) \"\$0\" \"\$@\"" $T --steps 18 --trace --out $o --quiet
  echo "alone $cores rc $?" >> /tmp/res/summary.txt
done
(cd /tmp/res && tar czf $OUT/results.tgz .)
cat /tmp/res/summary.txt
