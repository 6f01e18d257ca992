#!/usr/bin/env bash
# K-FAC against a tuned AdamW on real English text, one H200 (issue 22 item 6b; docs/pipefisher.md).
#
#   bash bench/pipefisher/convergence.sh stage DIR       # here: corpus, plans, CUDA projects
#   bash bench/pipefisher/convergence.sh device DIR OUT  # GPU machine: build, sweep, evaluate
#   python3 bench/pipefisher/convergence_report.py OUT/convergence.json   # ratios, table
#
# The device mode ends with convergence_collect.py, which writes OUT/convergence.json from the
# runs' metrics; it can be rerun on what came back from a call that ran out of time.
#
# The model: a byte-level GPT (vocabulary 256, 6 layers, width 384, 6 heads, sequence 256; about
# 11M parameters), 64 sequences a step (16,384 tokens), bf16, one GPU; its text is GCIDE
# (corpus.sh: 38 MB to train on, 2 MB held out). Each optimizer gets the same budget: five runs
# (a learning-rate sweep) of STEPS steps. AdamW runs the planner's first-order plan (its program
# replays the step as a CUDA graph); K-FAC runs the plan of `autoddl plan --optimizer kfac`
# (K-FAC on every linear layer, LAMB on the preconditioned gradient as PipeFisher does, damping
# 1e-3), so each pays its own overheads. On one GPU the plan has no bubbles, so its planner sets
# the refresh interval K to 1 (everything at the step's end); the sweep runs K = KFAC_REFRESH
# (default 10, the usual choice of K-FAC implementations without bubbles to hide it in) through the
# program's --kfac-refresh, and the result records both step times.
#
# Other models (issue 47 item 3: GPT-2 124M and 355M): MODEL names a template (gpt2,
# gpt2-medium) instead of the byte-level GPT, SEQ and GLOBAL_BATCH its sequence (default 256) and
# global batch (64), CLUSTER the preset the plans are made for (h200-fitted; dgx-h100-ndr for an
# H100). The text stays GCIDE read as bytes (the template's vocabulary is larger than the 256 ids
# used). KFAC_REFRESH=plan runs K-FAC at the plan's own refresh intervals (`plan --kfac-overhead`
# picks them where there are no bubbles) instead of one K for all.
#
# Validation loss: the run saves a checkpoint every EVAL_EVERY steps; each checkpoint is resumed
# with --lr 0 (nothing changes: AdamW's and LAMB's steps, weight decay included, scale with lr)
# over EVAL_STEPS steps of the held-out text, and the mean of those losses is the validation loss
# at that step. Wall time at a checkpoint is the sum of the run's own step times up to it (the
# checkpoint writes are not in them).
#
# TRAIN_FLAGS (default none): more flags for each training run, not for the --lr 0 evaluations;
# e.g. TRAIN_FLAGS="--warmup 100 --lr-decay cosine" for nanoGPT's schedule (warm-up to each swept
# --lr, cosine down to 0.1 lr at step STEPS; docs/codegen.md "Running the program"). Recorded in
# convergence.json as train_flags, and each run's per-step lr in its metrics.json. KFAC_FLAGS
# (default none): flags for the K-FAC runs only, training and evaluation, e.g. "--kfac-damping 1e-2".
# KFAC_STEPS (default STEPS): the K-FAC runs' length, their schedule's horizon included, so that a
# K-FAC run with its own shorter schedule can be timed to AdamW's loss at STEPS (as users would
# shorten a run that gets there sooner).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
mode=${1:?usage: convergence.sh stage DIR | device DIR OUT}
dir=${2:?usage: convergence.sh stage DIR | device DIR OUT}
STEPS=${STEPS:-2000}
KFAC_STEPS=${KFAC_STEPS:-$STEPS}
EVAL_EVERY=${EVAL_EVERY:-250}
EVAL_STEPS=${EVAL_STEPS:-8}
# Set but empty: that optimizer is not run (only an unset one takes the default sweep).
ADAMW_LRS=${ADAMW_LRS-2.5e-4 5e-4 1e-3 2e-3 4e-3}
KFAC_LRS=${KFAC_LRS-5e-4 1e-3 2e-3 4e-3 8e-3}
KFAC_REFRESH=${KFAC_REFRESH:-10}
TRAIN_FLAGS=${TRAIN_FLAGS:-}
KFAC_FLAGS=${KFAC_FLAGS:-}
MODEL=${MODEL:-} SEQ=${SEQ:-256} GLOBAL_BATCH=${GLOBAL_BATCH:-64} CLUSTER=${CLUSTER:-h200-fitted}

case $mode in
stage)
  autoddl=${AUTODDL:-$root/build/tools/autoddl/autoddl}
  [ -x "$autoddl" ] || { echo "convergence.sh: build autoddl first (scripts/build.sh)" >&2; exit 2; }
  if [ -e "$dir" ] && ! [ -f "$dir/convergence-stage" ]; then
    echo "convergence.sh: $dir exists and is not a staged convergence run; give a new folder" >&2
    exit 2
  fi
  rm -rf "$dir" && mkdir -p "$dir" && touch "$dir/convergence-stage"
  dir=$(realpath "$dir")
  bash "$root/bench/pipefisher/corpus.sh" "$dir/corpus" || exit 1
  xz -T2 -6 "$dir/corpus/train.txt" "$dir/corpus/val.txt" && rm -f "$dir/corpus/dict-gcide.deb"
  cat >"$dir/model.json" <<'JSON'
{
  "template": "gpt",
  "description": "byte-level GPT of the K-FAC convergence benchmark (bench/pipefisher/convergence.sh)",
  "config": {"vocab_size": 256, "max_positions": 256, "hidden_size": 384, "num_layers": 6, "num_heads": 6}
}
JSON
  model=$dir/model.json
  [ -n "$MODEL" ] && model=$MODEL
  for opt in adamw kfac; do
    extra=()
    [ $opt = kfac ] && extra=(--optimizer kfac --kfac-rule lamb)
    "$autoddl" plan "$model" --cluster "$CLUSTER" --gpus 1 --global-batch "$GLOBAL_BATCH" \
      --seq "$SEQ" "${extra[@]}" -o "$dir/$opt.plan.json" >"$dir/$opt.plan.txt" 2>&1 || {
      tail -5 "$dir/$opt.plan.txt"; exit 1; }
    "$autoddl" codegen "$dir/$opt.plan.json" --model "$model" --backend cuda \
      -o "$dir/$opt" >/dev/null || exit 1
  done
  git -C "$root" rev-parse HEAD >"$dir/commit"
  echo "staged $dir: $(du -sh "$dir" | cut -f1)"
  ;;
device)
  out=${3:?usage: convergence.sh device DIR OUT}
  mkdir -p "$out"
  dir=$(realpath "$dir")
  out=$(realpath "$out")
  # shellcheck source=/dev/null
  source "$root/bench/cuda/cudnn_env.sh"
  export NCCL_NVLS_ENABLE=0
  work=$(mktemp -d)
  xz -dc "$dir/corpus/train.txt.xz" >"$work/train.txt" && xz -dc "$dir/corpus/val.txt.xz" >"$work/val.txt" || exit 1
  bash "$root/bench/cuda/build_projects.sh" "$work/build" "$out/build.log" "$dir/adamw" "$dir/kfac" || exit 1
  launch() { timeout 600 mpirun --allow-run-as-root --oversubscribe -np 1 "$@"; }
  read -ra train_flags <<<"$TRAIN_FLAGS"
  for opt in adamw kfac; do
    lrs=$ADAMW_LRS
    [ $opt = kfac ] && lrs=$KFAC_LRS
    for lr in $lrs; do
      run=$opt-lr$lr
      bin=$work/build/train_$opt
      flags=()
      [ $opt = kfac ] && [ "$KFAC_REFRESH" != plan ] && flags=(--kfac-refresh "$KFAC_REFRESH")
      [ $opt = kfac ] && read -ra kfac_flags <<<"$KFAC_FLAGS" && flags+=("${kfac_flags[@]}")
      steps=$STEPS
      [ $opt = kfac ] && steps=$KFAC_STEPS
      echo "== $run: $steps steps"
      launch "$bin" --steps "$steps" --data "$work/train.txt" --lr "$lr" --quiet "${flags[@]}" \
        "${train_flags[@]}" --save "$work/ck/$run" --save-every "$EVAL_EVERY" --out "$out/runs/$run" \
        >"$out/runs-$run.log" 2>&1 || { echo "$run failed:"; tail -5 "$out/runs-$run.log"; continue; }
      # In step order, so that a call cut short has evaluated the earliest ones.
      for n in $(find "$work/ck/$run" -maxdepth 1 -name 'step-*' | sed 's/.*step-//' | sort -n); do
        ck=$work/ck/$run/step-$n
        launch "$bin" --resume "$ck" --steps $((n + EVAL_STEPS)) --data "$work/val.txt" --lr 0 "${flags[@]}" \
          --quiet --out "$out/eval/$run/step-$n" >>"$out/eval-$run.log" 2>&1 ||
          echo "eval of $run at step $n failed"
      done
      rm -rf "$work/ck/$run"
    done
  done
  # The plan's own K (1 here) for its step time: a short run without --kfac-refresh.
  launch "$work/build/train_kfac" --steps 30 --data "$work/train.txt" --lr 1e-3 --quiet \
    --out "$out/kfac-plan-refresh" >"$out/kfac-plan-refresh.log" 2>&1 || echo "kfac at the plan's K failed"
  TRAIN_FLAGS=$TRAIN_FLAGS KFAC_FLAGS=$KFAC_FLAGS python3 "$root/bench/pipefisher/convergence_collect.py" "$out" "$STEPS" "$EVAL_EVERY" "$EVAL_STEPS" "$(cat "$dir/commit")" "${KFAC_REFRESH/plan/0}"
  rm -rf "$work"
  ;;
*)
  echo "convergence.sh: unknown mode $mode (stage or device)" >&2
  exit 2
  ;;
esac
