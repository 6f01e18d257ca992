#!/usr/bin/env bash
# Lagged inversion (EXPERIMENT: the refresh step's curvature inverted during the next cycle).
set -u
mkdir -p /tmp/res
cd .gpu/pf
REPEATS=2 timeout 570 ./call.sh b64_k1122:thread:lag b64_i1:thread:refresh b64_k1:thread:lag b64_i1:thread:lag
cat /tmp/res/summary.txt
