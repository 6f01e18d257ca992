#!/usr/bin/env bash
# The runtime at 0ce3235 (progress_sends everywhere): paired K-FAC utilisation at K = 2,2,3,4 and 3,3,3,5.
set -u
mkdir -p /tmp/res; rm -rf /tmp/res/*
B=$(cd "$(dirname "$0")/.." && pwd) # bench/pipefisher
cd .gpu/pf
REPEATS=3 timeout 560 "$B/utilisation_call.sh" b64_f2234:thread b64_f3335:thread
cat /tmp/res/summary.txt
