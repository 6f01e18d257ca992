#!/usr/bin/env bash
# Utilisation with filling in every wait: K = 2,2,3,4 again, 2,2,2,3 and 2,2,2,2 (3 repeats each).
set -u
export NCCL_NVLS_ENABLE=0
mkdir -p /tmp/res
B=$(cd "$(dirname "$0")/.." && pwd) # bench/pipefisher
cd .gpu/pf
TAG=b REPEATS=3 timeout 560 "$B/utilisation_call.sh" b64_i1:thread b64_k2223:thread b64_k2222:thread
cat /tmp/res/summary.txt
