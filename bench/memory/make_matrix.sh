#!/usr/bin/env bash
# Plans and generates the memory matrix of issue 27 (docs/cost-model.md §5.3) for one H200: GPT-2
# 124M, 355M, 774M, 1.5B x micro-batch 4, 8, 16, 32, 64 (one micro-batch a step) x recompute
# none, selective, full, on one GPU (h200-fitted), plus pp=2 (1F1B, 4 micro-batches), tp=2
# (--tp-mode tensor) and dp=2 plans of GPT-2 124M and 355M at micro-batch 8 whose two ranks share
# the GPU (AUTODDL_SHARE_GPU: the per-rank figures). Runs here, where autoddl is built; the GPU
# machine has none. A plan the planner refuses (it would not fit with the margin) is recorded as
# refused: the planner's promise is that no returned plan runs out of memory.
#
#   bash bench/memory/make_matrix.sh [--autoddl BIN] [--models a,b] [--micro 4,8] [OUT]
#
# OUT (default .gpu/memory; ignored by git) holds matrix.tar.gz (one runtime/ and per project its
# train.cpp, plan.json, bench.json) and index.json; carry OUT to the GPU machine and run
# bench/memory/run_matrix.sh there. A project whose train.cpp is byte-identical to an earlier
# one but for comments (selective under a fused attention, which keeps no scores, and full where
# nothing needs recomputing: the same program as none) is
# not staged twice: its bench.json names the one it shares ("same_program_as").
set -euo pipefail
cd "$(dirname "$0")/../.."
autoddl="" models=gpt2,gpt2-medium,gpt2-large,gpt2-xl micros=4,8,16,32,64 out=.gpu/memory
. bench/autoddl_bin.sh
while [ $# -gt 0 ]; do
  case "$1" in
  --micro) micros=$2; shift 2 ;;
  *) bench_arg make_matrix.sh "$@"; shift "$used" ;;
  esac
done
autoddl_bin make_matrix.sh
rm -rf "$out" && mkdir -p "$out/stage/projects" "$out/plans"
stage=$out/stage
declare -A seen # sha256 of train.cpp -> project name
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)

one() { # name model gpus global_batch fix cluster share
  local name=$1 model=$2 gpus=$3 gb=$4 fix=$5 cluster=$6 share=$7
  local plan=$out/plans/$name.json log=$out/plans/$name.txt p=$stage/projects/$name
  mkdir -p "$p"
  local status=planned
  if ! "$autoddl" plan "$model" --cluster "$cluster" --gpus "$gpus" --global-batch "$gb" \
    --seq 1024 --fix "$fix" --tp-mode tensor --no-why -o "$plan" >"$log" 2>&1; then
    status=refused
    echo "$name: refused: $(tail -1 "$log")"
    python3 - "$p/bench.json" "$name" "$model" "$gpus" "$gb" "$fix" "$share" "$(tail -1 "$log")" <<'P'
import json, sys
f, name, model, gpus, gb, fix, share, why = sys.argv[1:]
json.dump({"name": name, "model": model, "ranks": int(gpus), "global_batch": int(gb),
           "fix": fix, "share_gpu": share == "1", "status": "refused", "why": why},
          open(f, "w"), indent=1)
P
    return
  fi
  echo "$name: $(grep -m1 'peak memory' "$log" | sed 's/.*peak memory/peak memory/')"
  local gen=$out/gen/$name
  rm -rf "$gen"
  "$autoddl" codegen "$plan" --backend cuda -o "$gen" >>"$log" 2>&1
  [ -d "$stage/runtime" ] || cp -r "$gen/runtime" "$stage/runtime"
  diff -rq "$gen/runtime" "$stage/runtime" >/dev/null ||
    { echo "make_matrix.sh: $name: a runtime/ unlike the first project's" >&2; exit 1; }
  local sum same=""
  # Comment lines aside (the header names the plan's knobs): the same program.
  sum=$(grep -v '^[[:space:]]*//' "$gen/train.cpp" | sha256sum | cut -d' ' -f1)
  if [ -n "${seen[$sum]:-}" ]; then
    same=${seen[$sum]}
  else
    seen[$sum]=$name
    cp "$gen/train.cpp" "$gen/CMakeLists.txt" "$p/"
  fi
  cp "$plan" "$p/plan.json"
  python3 - "$p/bench.json" "$name" "$model" "$gpus" "$gb" "$fix" "$share" "$same" <<'P'
import json, sys
f, name, model, gpus, gb, fix, share, same = sys.argv[1:]
d = {"name": name, "model": model, "ranks": int(gpus), "global_batch": int(gb), "fix": fix,
     "share_gpu": share == "1", "status": "planned"}
if same:
    d["same_program_as"] = same
json.dump(d, open(f, "w"), indent=1)
P
  rm -rf "$gen"
}

for m in ${models//,/ }; do
  for b in ${micros//,/ }; do
    for rc in none selective full; do
      one "$m-b$b-$rc" "$m" 1 "$b" "tp=1,pp=1,dp=1,microbatch=$b,recompute=$rc" h200-fitted 0
    done
  done
done
# Accumulation on one activation set whatever the micro-batch count (pipeline/ActivationSets.h).
for n in 4 16; do
  one "gpt2-medium-acc$n" gpt2-medium 1 $((8 * n)) "tp=1,pp=1,dp=1,microbatch=8,recompute=none" h200-fitted 0
done
# Two ranks on the one GPU: the per-rank peaks (each process counts its own buffers). pp=2: 1F1B
# keeps 2 sets on stage 0 and 1 on stage 1 whatever the micro-batch count, GPipe one per
# micro-batch.
for m in gpt2 gpt2-medium; do
  one "$m-pp2" "$m" 2 32 "tp=1,pp=2,dp=1,microbatch=8,schedule=1f1b,recompute=none" h200x2-nvlink 1
  one "$m-pp2-m16" "$m" 2 128 "tp=1,pp=2,dp=1,microbatch=8,schedule=1f1b,recompute=none" h200x2-nvlink 1
  one "$m-pp2-gpipe" "$m" 2 32 "tp=1,pp=2,dp=1,microbatch=8,schedule=gpipe,recompute=none" h200x2-nvlink 1
  one "$m-tp2" "$m" 2 8 "tp=2,pp=1,dp=1,microbatch=8,recompute=none" h200x2-nvlink 1
  one "$m-dp2" "$m" 2 16 "tp=1,pp=1,dp=2,microbatch=8,recompute=none" h200x2-nvlink 1
done
# Four ranks on the one GPU: pp=4 1F1B, 4 - s sets on stage s.
one "gpt2-medium-pp4" gpt2-medium 4 64 "tp=1,pp=4,dp=1,microbatch=8,schedule=1f1b,recompute=none" h200x2-nvlink 1
echo "$commit" >"$stage/commit"
tar -C "$stage" -czf "$out/matrix.tar.gz" .
python3 - "$stage" "$out/index.json" <<'P'
import json, os, sys
stage, out = sys.argv[1:]
rows = [json.load(open(os.path.join(stage, "projects", n, "bench.json")))
        for n in sorted(os.listdir(os.path.join(stage, "projects")))]
json.dump(rows, open(out, "w"), indent=1)
P
rm -rf "$stage" "$out/gen" "$out"/plans/*.json "$out"/plans/*.mlir
echo "staged $(du -h "$out/matrix.tar.gz" | cut -f1) in $out/matrix.tar.gz (commit $commit);" \
  "on the GPU machine: bash bench/memory/run_matrix.sh $out"
