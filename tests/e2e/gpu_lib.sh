#!/usr/bin/env bash
# Sourced by the e2e scripts that run CUDA programs on GPUs.
#   require_gpus N: exits 77 (skipped) unless this machine has at least N GPUs.
#   fail MESSAGE: prints FAIL: MESSAGE and exits 1.
require_gpus() {
  local have
  have=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  if [ "${have:-0}" -lt "$1" ]; then
    echo "skipped: $1 GPU(s) needed, ${have:-0} found"
    exit 77
  fi
}
fail() { echo "FAIL: $*"; exit 1; }
