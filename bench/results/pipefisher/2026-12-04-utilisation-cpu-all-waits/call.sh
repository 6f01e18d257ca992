#!/usr/bin/env bash
# usage: call.sh DIR:FILL... : paired utilisation runs (FILL = waits|thread|placed), results into $OUT
cd "$(dirname "$0")"
mkdir -p /tmp/res
{ nproc; lscpu | head -20; date -u; } > /tmp/res/cpu.txt
for spec in "$@"; do
  d=${spec%%:*}; fill=${spec##*:}
  start=$(date +%s)
  python3 utilisation_cpu.py run $d --paired --kfac-fill $fill --repeats ${REPEATS:-2} --warmup 6 --steps 18 > /tmp/res/${d}_$fill.log 2>&1
  echo "$d $fill rc $? $(( $(date +%s) - start )) s" | tee -a /tmp/res/summary.txt
  tail -1 /tmp/res/${d}_$fill.log | tee -a /tmp/res/summary.txt
  cp $d/utilisation.json /tmp/res/${d}_$fill.json 2>/dev/null
  (cd /tmp/res && tar czf $OUT/results.tgz .)
done
# The traces of each variant's runs, and the results, as archives (few files come back).
tar czf $OUT/traces_${TAG:-a}.tgz $(for s in "$@"; do echo ${s%%:*}/runs; done) 2>/dev/null
(cd /tmp/res && tar czf $OUT/results.tgz .)
