#!/usr/bin/env bash
# usage: call.sh DIR:FILL[:K]... : paired utilisation runs (FILL = waits|thread|placed; K the K-FAC
# binary's --kfac-refresh), results into $OUT
cd "$(dirname "$0")"
mkdir -p /tmp/res
{ nproc; lscpu | head -20; date -u; } > /tmp/res/cpu.txt
for spec in "$@"; do
  IFS=: read -r d fill k <<< "$spec"
  args=(); name=${d}_$fill
  [ -n "$k" ] && { args+=(--kfac-refresh $k); name+=_k$k; }
  start=$(date +%s)
  python3 utilisation_cpu.py run $d --paired --kfac-fill $fill "${args[@]}" --repeats ${REPEATS:-2} --warmup 6 --steps 18 > /tmp/res/$name.log 2>&1
  echo "$name rc $? $(( $(date +%s) - start )) s" | tee -a /tmp/res/summary.txt
  tail -1 /tmp/res/$name.log | tee -a /tmp/res/summary.txt
  cp $d/utilisation.json /tmp/res/$name.json 2>/dev/null
  (cd /tmp/res && tar czf $OUT/results.tgz .)
done
(cd /tmp/res && tar czf $OUT/results.tgz .)
