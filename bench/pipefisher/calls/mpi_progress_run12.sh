#!/usr/bin/env bash
# MPI progress: the probe (sender testing every 1 ms) and paired utilisation runs, K = 2,2,3,4, of the
# programs without (b64_i1) and with progress_sends between ops (b64_p), alternating, same call.
set -u
mkdir -p /tmp/res; rm -rf /tmp/res/*
B=$(cd "$(dirname "$0")/.." && pwd) # bench/pipefisher
cd .gpu/pf
(mkdir -p probe && cd probe && for p in progress progress_late progress_test; do mpicc -O2 "$B/mpi_progress/$p.c" -o $p && mpirun --allow-run-as-root --oversubscribe -np 2 ./$p; done) > /tmp/res/progress.txt 2>&1
cat /tmp/res/progress.txt
REPEATS=2 timeout 250 "$B/utilisation_call.sh" b64_i1:thread b64_p:thread
for f in /tmp/res/b64_*_thread.json /tmp/res/b64_*_thread.log; do mv $f ${f%.*}_a.${f##*.}; done
REPEATS=2 timeout 250 "$B/utilisation_call.sh" b64_p:thread b64_i1:thread
cat /tmp/res/summary.txt
for d in b64_i1 b64_p; do for r in first_order_0 kfac_0; do mkdir -p /tmp/res/traces/${d}_$r; cp $d/runs/$r/trace.json $d/runs/$r/metrics.json /tmp/res/traces/${d}_$r/; done; done
(cd /tmp/res && tar czf $OUT/results.tgz .)
