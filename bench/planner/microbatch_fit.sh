#!/usr/bin/env bash
# The plan's step against the measured one for the micro-batch table of one H100
# (bench/results/cuda/2026-12-07-h100-microbatch-fp8-7b/table.md): each row re-planned here with
# the same knobs (dgx-h100-ndr, one GPU, global batch 16, --fix tp=1,pp=1,dp=1,microbatch=M,
# recompute=none,zero=0; gpt2-large/-xl at sequence 1024, the LLaMA-2-7B 4-layer stack at 2048).
#   bash bench/planner/microbatch_fit.sh [AUTODDL]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
autoddl=${1:-$root/build/tools/autoddl/autoddl}
results=$root/bench/results/cuda/2026-12-07-h100-microbatch-fp8-7b
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| plan | measured step (s) | predicted (s) | predicted / measured |"
echo "|---|---|---|---|"
while IFS='|' read -r _ name measured _; do
  name=$(echo "$name" | xargs) measured=$(echo "$measured" | xargs)
  [[ $name =~ ^(gpt2-large|gpt2-xl|l7b4)-mb([0-9]+)$ ]] || continue
  model=${BASH_REMATCH[1]} mb=${BASH_REMATCH[2]} seq=1024
  [ "$model" = l7b4 ] && model=$results/llama-2-7b-4l.json seq=2048
  predicted=$("$autoddl" plan "$model" --cluster dgx-h100-ndr --gpus 1 --global-batch 16 \
    --seq "$seq" --fix "tp=1,pp=1,dp=1,microbatch=$mb,recompute=none,zero=0" --no-why \
    -o "$tmp/plan.json" | sed -n 's/.*predicted: step \([0-9.]*\) s.*/\1/p')
  python3 -c "print('| $name | $measured | $predicted | %.3f |' % ($predicted / $measured))"
done <"$results/table.md"
