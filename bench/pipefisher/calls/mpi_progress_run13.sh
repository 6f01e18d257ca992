#!/usr/bin/env bash
# First-order A/B of the programs without and with progress_sends (b64_i1, b64_p), 6 repeats.
B=$(cd "$(dirname "$0")/.." && pwd) # bench/pipefisher
cd .gpu/pf && timeout 500 python3 "$B/progress_ab.py" 6
