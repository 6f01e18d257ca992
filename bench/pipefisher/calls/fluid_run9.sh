#!/usr/bin/env bash
# The planner's own K with fluid packing (4,3,3,7) against its whole-item K (5,5,4,6) and the pinned
# K = 2,2,3,4, paired, refresh curvature, thread filling, same call.
set -u
mkdir -p /tmp/res
rm -f /tmp/res/*
B=$(cd "$(dirname "$0")/.." && pwd) # bench/pipefisher
cd .gpu/pf
REPEATS=3 timeout 580 "$B/utilisation_call.sh" b64_own_fluid:thread b64_own_items:thread b64_i1:thread
cat /tmp/res/summary.txt
