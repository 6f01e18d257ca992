#!/usr/bin/env bash
# Utilisation at K = 2,2,3,4 with the final runtime (review fixes of the filling in every wait).
set -u
mkdir -p /tmp/res
B=$(cd "$(dirname "$0")/.." && pwd) # bench/pipefisher
cd .gpu/pf
TAG=c REPEATS=2 timeout 400 "$B/utilisation_call.sh" b64_i1_nocap:thread b64_i1:thread
cat /tmp/res/summary.txt
