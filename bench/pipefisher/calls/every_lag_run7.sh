#!/usr/bin/env bash
# Every-step curvature against PipeFisher's refresh-step curvature, paired, same call.
set -u
mkdir -p /tmp/res
cd .gpu/pf
REPEATS=2 timeout 560 ./call.sh b64_i1:thread:every b64_i1:thread:every:4 b64_i1:thread:refresh b64_i1:thread:every:2
cat /tmp/res/summary.txt
