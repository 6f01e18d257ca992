#!/usr/bin/env bash
# Lagged inversion (EXPERIMENT: the refresh step's curvature inverted during the next cycle).
set -u
# Ran at e705671 (--kfac-curvature, reverted in 1719df5) with .gpu/pf/call.sh taking DIR:FILL:CURVATURE[:K]:
# git show fa5f6c9:bench/results/pipefisher/2026-12-04-utilisation-cpu-every-lag/call.sh
mkdir -p /tmp/res
cd .gpu/pf
REPEATS=2 timeout 570 ./call.sh b64_k1122:thread:lag b64_i1:thread:refresh b64_k1:thread:lag b64_i1:thread:lag
cat /tmp/res/summary.txt
