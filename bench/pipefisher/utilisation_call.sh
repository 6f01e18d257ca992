#!/usr/bin/env bash
# usage: utilisation_call.sh DIR:FILL[:K]... : paired utilisation runs (FILL = waits|thread|placed; K the
# K-FAC binary's --kfac-refresh), results into $OUT. Runs in the current directory, which holds the
# DIRs staged by `utilisation_cpu.py stage` (the device calls used .gpu/pf; bench/pipefisher/calls/).
# TAG set: the traces of each DIR's runs are archived too, as $OUT/traces_$TAG.tgz.
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p /tmp/res
{ nproc; lscpu | head -20; date -u; } > /tmp/res/cpu.txt
for spec in "$@"; do
  IFS=: read -r d fill k <<< "$spec"
  args=(); name=${d}_$fill
  [ -n "$k" ] && { args+=(--kfac-refresh $k); name+=_k$k; }
  start=$(date +%s)
  python3 "$here/utilisation_cpu.py" run $d --paired --kfac-fill $fill "${args[@]}" --repeats ${REPEATS:-2} --warmup 6 --steps 18 > /tmp/res/$name.log 2>&1
  echo "$name rc $? $(( $(date +%s) - start )) s" | tee -a /tmp/res/summary.txt
  tail -1 /tmp/res/$name.log | tee -a /tmp/res/summary.txt
  cp $d/utilisation.json /tmp/res/$name.json 2>/dev/null
  (cd /tmp/res && tar czf $OUT/results.tgz .)
done
# Few files come back from a device call: the traces, and the results, as archives.
[ -n "${TAG:-}" ] && tar czf $OUT/traces_$TAG.tgz $(for s in "$@"; do echo ${s%%:*}/runs; done) 2>/dev/null
(cd /tmp/res && tar czf $OUT/results.tgz .)
