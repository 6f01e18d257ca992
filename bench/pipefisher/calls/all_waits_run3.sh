#!/usr/bin/env bash
# Utilisation: the old runtime (filling only in pipeline receives) against the new (also in the
# step's other waits), the plan's own K and K = 2,2,3,4, interleaved, paired first-order runs.
set -u
export NCCL_NVLS_ENABLE=0
mkdir -p /tmp/res
B=$(cd "$(dirname "$0")/.." && pwd) # bench/pipefisher
cd .gpu/pf
TAG=a REPEATS=${REPEATS:-2} timeout 570 "$B/utilisation_call.sh" b64_own_old:thread b64_own:thread b64_i1_old:thread b64_i1:thread
cat /tmp/res/summary.txt
