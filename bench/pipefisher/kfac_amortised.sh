#!/usr/bin/env bash
# K-FAC where no bubble holds its work (one GPU, issue 47 item 2): the generated K-FAC program of
# the plan's amortised refresh interval (`plan --kfac-overhead`, default 5 %) against the K = 1
# plan it replaces (`--kfac-overhead 0`) and the AdamW program of the same configuration.
#
#   bash bench/pipefisher/kfac_amortised.sh stage DIR [AUTODDL]  # here: plans, CUDA projects
#   bash bench/pipefisher/kfac_amortised.sh device DIR [STEPS]   # GPU machine: build, run, table
#
# Each program runs STEPS steps (default 45: two refreshes at K ~ 21); the table gives its mean
# step after the first 3 (the average a run pays, refresh steps included), its median, and the
# plan's predicted step. Results to $OUT (or DIR/results): each run's metrics.json and the table.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
mode=${1:?usage: kfac_amortised.sh stage DIR [AUTODDL] | device DIR [STEPS]}
dir=${2:?DIR}
plan_args=(gpt2 --cluster dgx-h100-ndr --gpus 1 --global-batch 16 --seq 1024 --no-why)
case $mode in
stage)
  autoddl=${3:-$root/build/tools/autoddl/autoddl}
  rm -rf "$dir" && mkdir -p "$dir"
  for v in adamw kfac kfac_k1; do
    extra=()
    case $v in
    kfac) extra=(--optimizer kfac) ;;
    kfac_k1) extra=(--optimizer kfac --kfac-overhead 0) ;;
    esac
    "$autoddl" plan "${plan_args[@]}" "${extra[@]}" -o "$dir/$v.json" >"$dir/$v.txt"
    "$autoddl" codegen "$dir/$v.json" --backend cuda -o "$dir/src/$v" >/dev/null
    echo "$v: $(grep -m1 'predicted:' "$dir/$v.txt")"
  done
  ;;
device)
  steps=${3:-45} out=${OUT:-$dir/results} b=$dir-build
  mkdir -p "$out" "$b"
  bash "$root/bench/cuda/shared_runtime_cmake.sh" "$dir"/src/* >"$dir/src/CMakeLists.txt"
  cmake -S "$dir/src" -B "$b" -DCMAKE_BUILD_TYPE=Release >"$out/build.log" 2>&1
  cmake --build "$b" -j 16 >>"$out/build.log" 2>&1
  for v in adamw kfac_k1 kfac; do
    s=$steps
    [ $v = kfac_k1 ] && s=15 # every step a refresh: a few show it
    "$b/train_$v" --steps "$s" --out "$out/$v" --quiet \
      >"$out/$v.log" 2>&1 || { echo "kfac_amortised.sh: $v failed (see $out/$v.log)" >&2; exit 1; }
  done
  python3 - "$dir" "$out" <<'PY'
import json, statistics, sys
d, out = sys.argv[1:]
rows = []
for v in ("adamw", "kfac_k1", "kfac"):
    m = json.load(open(f"{out}/{v}/metrics.json"))
    p = json.load(open(f"{d}/{v}.json"))
    t = m["step_seconds"][3:]
    k = p.get("kfac", {}).get("refresh_steps", "-")
    rows.append((v, k, statistics.mean(t), statistics.median(t), p["predicted"]["step_time_s"], len(t)))
base = rows[0][2]
lines = [f"{'program':10s} {'K':>4s} {'mean s':>9s} {'median s':>9s} {'predicted s':>12s} {'mean/adamw':>11s} {'steps':>6s}"]
for v, k, mean, med, pred, n in rows:
    lines.append(f"{v:10s} {str(k):>4s} {mean:9.4f} {med:9.4f} {pred:12.4f} {mean / base:11.2f} {n:6d}")
print("\n".join(lines))
open(f"{out}/table.txt", "w").write("\n".join(lines) + "\n")
PY
  ;;
*) echo "kfac_amortised.sh: unknown mode $mode (stage or device)" >&2; exit 2 ;;
esac
