#!/usr/bin/env bash
# Plans and generates the autoddl side of the CUDA benchmark (bench/cuda/run.sh --projects DIR).
# Runs here, where autoddl is built (the GPU machine has no MLIR): OUT_DIR/<model>-<plan>/ is the
# generated CUDA project (it carries plan.json) plus bench.json ({"model", "gpus", "plan",
# "micro_batch", "global_batch", "seq", "cluster", "predicted_step_s"}); the planner's report
# is OUT_DIR/.plans/<name>.txt.
#
#   bash bench/cuda/make_projects.sh [--autoddl BIN] [--cluster C] [--models a,b] [--fix K=V,..]
#                                    [--micro m=B,..] [--plans p,..] [OUT_DIR]
#
# C (default h200-fitted): the cluster the plans are priced on (bench/cuda/fit_check.sh makes it).
# --fix: knobs pinned in every plan besides those below (e.g. partition=uniform).
# --micro: another micro-batch B for a model (e.g. gpt2-xl=8); the projects are then named
#   <model>-b<B>-<plan>. --plans: which of single,dp2,tp2,pp2 (default all four).
#
# OUT_DIR (default .gpu-calibrate/projects) should be ignored by git (.git/info/exclude) and
# named in the device tool's `carry`. Plans, with PyTorch's micro-batch B per GPU (16 at every
# size; bench/cuda/pytorch_gpt2.py says why), no recomputation (PyTorch keeps every activation
# too) and --tp-mode tensor (only the tp splits the generated programs run, so each runs as its
# plan is priced):
#   single  1 GPU, global batch B                      vs PyTorch eager / torch.compile
#   dp2     2 GPUs, dp=2, global batch 2B              vs PyTorch DDP
#   tp2     2 GPUs, tp=2, global batch B               vs PyTorch tensor parallel
#   pp2     2 GPUs, pp=2 (1F1B), global batch 2B as 4 micro-batches of B/2  vs PyTorch DDP
set -uo pipefail
cd "$(dirname "$0")/../.."
autoddl=${AUTODDL:-}
cluster=h200-fitted
models=gpt2,gpt2-medium,gpt2-large,gpt2-xl
out=.gpu-calibrate/projects
extra="" micro_over="" plans=single,dp2,tp2,pp2
. bench/autoddl_bin.sh
while [ $# -gt 0 ]; do
  case "$1" in
  --fix) extra=${2:+,$2}; shift 2 ;;
  --micro) micro_over=$2; shift 2 ;;
  --plans) plans=$2; shift 2 ;;
  --cluster) cluster=$2; shift 2 ;;
  *) bench_arg make_projects.sh "$@"; shift "$used" ;;
  esac
done
autoddl_bin make_projects.sh
mkdir -p "$out"

micro() {
  local o
  for o in ${micro_over//,/ }; do
    [ "${o%%=*}" = "$1" ] && echo "${o#*=}" && return
  done
  case "$1" in gpt2 | gpt2-medium | gpt2-large | gpt2-xl) echo 16 ;; esac
}
wanted() { [[ ",$plans," == *",$1,"* ]]; }

failed=0
make_one() { # name model gpus global_batch micro_batch fix
  local name=$1 model=$2 gpus=$3 gb=$4 mb=$5 fix=$6
  local plan=$out/.plans/$name.json log=$out/.plans/$name.txt
  mkdir -p "$out/.plans"
  if ! "$autoddl" plan "$model" --cluster "$cluster" --gpus "$gpus" --global-batch "$gb" \
    --seq 1024 --fix "$fix,microbatch=$mb,recompute=none,zero=0$extra" --tp-mode tensor -o "$plan" \
    >"$log" 2>&1; then
    echo "$name: planning failed: $(tail -1 "$log")"
    failed=1
    return
  fi
  echo "$name: $(grep -m1 'predicted' "$log" | sed 's/^ *//')"
  # codegen writes into an empty folder or an earlier project of its own.
  if ! "$autoddl" codegen "$plan" --backend cuda -o "$out/$name" >>"$log" 2>&1; then
    echo "$name: codegen failed: $(tail -1 "$log")"
    failed=1
    return
  fi
  local predicted
  predicted=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["predicted"]["step_time_s"])' "$plan")
  printf '{"model": "%s", "gpus": %d, "plan": "%s", "micro_batch": %d, "global_batch": %d, "seq": 1024, "cluster": "%s", "predicted_step_s": %s}\n' \
    "$model" "$gpus" "${name##*-}" "$mb" "$gb" "$cluster" "$predicted" >"$out/$name/bench.json"
}

for m in ${models//,/ }; do
  b=$(micro "$m")
  n=$m
  [[ ",$micro_over," == *",$m="* ]] && n=$m-b$b
  wanted single && make_one "$n-single" "$m" 1 "$b" "$b" "tp=1,pp=1,dp=1"
  wanted dp2 && make_one "$n-dp2" "$m" 2 $((2 * b)) "$b" "tp=1,pp=1,dp=2"
  wanted tp2 && make_one "$n-tp2" "$m" 2 "$b" "$b" "tp=2,pp=1,dp=1"
  wanted pp2 && make_one "$n-pp2" "$m" 2 $((2 * b)) $((b / 2)) "tp=1,pp=2,dp=1,schedule=1f1b"
done
echo "projects under $out: bash bench/cuda/run.sh --projects $out (carry $out)"
exit $failed
