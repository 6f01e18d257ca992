#!/usr/bin/env bash
# Planning time against model depth and op count (issue 23: near-linear in layers and ops).
#
#   bench/planner/planning_time.sh NAME=AUTODDL [NAME=AUTODDL ...]
#
# Plans, with each autoddl binary given (e.g. before=/tmp/autoddl.main after=build/tools/autoddl/autoddl):
#   - GPT templates of 12, 48, 96, 192, 384, 768 and 1,024 layers (hidden 4096, 32 heads, vocabulary
#     51200, sequence 2048) on 1,024 GPUs of dgx-a100-hdr, global batch 1024;
#   - a narrow GPT of 1,024 layers (hidden 256, 8 heads, sequence 256) on 1,024 GPUs of
#     dgx-h100-ndr, global batch 1024, --no-why: it fits everywhere, so nothing prunes;
#   - explicit JSON chains of 1,000, 10,000 and 100,000 ops (a linear, relu/gelu alternating, a
#     cross-entropy: no layers to collapse) on 8 GPUs, global batch 32;
# each `autoddl plan ... -o`, one run at a time on one core (taskset -c 0), and writes into OUT
# (default bench/results/planner/<date>-planning-time):
#   results.tsv   case, then per binary wall and CPU (user+sys) seconds, and whether every binary's
#                 plan.json and plan.mlir equal the first one's with the search's wall_time_s and the
#                 why table's reason sentences removed
#   machine.txt   date, host, CPU, commit
# CPU seconds are the number to read on a shared machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-bench/results/planner/$(date -u +%F)-planning-time}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[ $# -ge 1 ] || { echo "usage: $0 NAME=AUTODDL [NAME=AUTODDL ...]" >&2; exit 2; }

for l in 12 48 96 192 384 768 1024; do
  printf '{"template": "gpt", "description": "GPT of %s layers", "config": {"vocab_size": 51200, "max_positions": 2048, "hidden_size": 4096, "num_layers": %s, "num_heads": 32}}\n' \
    "$l" "$l" >"$work/gpt-$l.json"
done
printf '{"template": "gpt", "description": "GPT of 1024 layers, hidden 256", "config": {"vocab_size": 51200, "max_positions": 256, "hidden_size": 256, "num_layers": 1024, "num_heads": 8}}\n' \
  >"$work/gpt-narrow.json"
for n in 1000 10000 100000; do
  python3 - "$n" "$work/chain-$n.json" <<'PY'
import json, sys
n = int(sys.argv[1])
ops = [{"op": "linear", "name": "fc0", "inputs": ["x", "w0", "b0"], "outputs": ["t0"]}]
for i in range(1, n - 1):
    ops.append({"op": "relu" if i % 2 else "gelu", "name": f"a{i}", "inputs": [f"t{i-1}"],
                "outputs": [f"t{i}"]})
ops.append({"op": "cross_entropy", "name": "loss", "inputs": [f"t{n-2}", "labels"],
            "outputs": ["loss"]})
json.dump({"name": f"chain-{n}", "description": f"an explicit chain of {n} ops", "batch": 4,
           "graph": {"inputs": [{"name": "x", "shape": [4, 32]},
                                {"name": "labels", "shape": [4], "dtype": "i32"}],
                     "params": [{"name": "w0", "shape": [64, 32]},
                                {"name": "b0", "shape": [64], "init": "zeros"}],
                     "ops": ops, "loss": "loss"}}, open(sys.argv[2], "w"))
PY
done

{
  echo "# date: $(date -u +%FT%TZ)  host: $(uname -n)  cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  echo "# commit: $(git rev-parse HEAD)$(git diff --quiet HEAD || echo ' (with local changes)')"
  for b in "$@"; do echo "# ${b%%=*}: ${b#*=}"; done
} >"$out/machine.txt"

header="case"
for b in "$@"; do header+="\t${b%%=*}_wall_s\t${b%%=*}_cpu_s"; done
printf "%b\tsame_plans\n" "$header" >"$out/results.tsv"
# The plan less the search's wall time and the why table's wording (its reasons' sentences are
# the report's, not the plan's: the neighbours and their numbers still count).
norm() {
  sed -E 's/"wall_time_s": [0-9.e+-]+/"wall_time_s": 0/; s/"reason": ".*"/"reason": ""/' "$1" |
    sha256sum | cut -c1-16
}
run_case() { # run_case NAME MODEL, with flags=(...) set
  local model=$2 row=$1 first="" same=yes
  for b in "${bins[@]}"; do
    local bin=${b#*=} tag=${b%%=*}
    /usr/bin/time -f "%e %U %S" -o "$work/time" taskset -c 0 "$bin" plan "$model" "${flags[@]}" \
      -o "$work/$tag.json" >/dev/null
    read -r wall user sys <"$work/time"
    row+=$(printf '\t%s\t%.2f' "$wall" "$(echo "$user + $sys" | bc -l)")
    local h
    h="$(norm "$work/$tag.json") $(sha256sum <"$work/$tag.mlir" | cut -c1-16)"
    if [ -z "$first" ]; then first=$h; elif [ "$h" != "$first" ]; then same=no; fi
  done
  printf '%s\t%s\n' "$row" "$same" | tee -a "$out/results.tsv"
}
bins=("$@")
for l in 12 48 96 192 384 768 1024; do
  flags=(--cluster dgx-a100-hdr --gpus 1024 --global-batch 1024)
  run_case "gpt-$l-layers" "$work/gpt-$l.json"
done
# Narrow and deep (issue 44): it fits everywhere, so memory prunes nothing.
flags=(--cluster dgx-h100-ndr --gpus 1024 --global-batch 1024 --no-why)
run_case "gpt-1024-layers-hidden-256" "$work/gpt-narrow.json"
for n in 1000 10000 100000; do
  flags=(--cluster dgx-a100-hdr --gpus 8 --global-batch 32)
  run_case "chain-$n-ops" "$work/chain-$n.json"
done
