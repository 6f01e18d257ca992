#!/usr/bin/env bash
# Every-step curvature against PipeFisher's refresh-step curvature, paired, same call.
set -u
# Ran at e705671 (--kfac-curvature, reverted in 1719df5) with .gpu/pf/call.sh taking DIR:FILL:CURVATURE[:K]:
# git show fa5f6c9:bench/results/pipefisher/2026-12-04-utilisation-cpu-every-lag/call.sh
mkdir -p /tmp/res
cd .gpu/pf
REPEATS=2 timeout 560 ./call.sh b64_i1:thread:every b64_i1:thread:every:4 b64_i1:thread:refresh b64_i1:thread:every:2
cat /tmp/res/summary.txt
