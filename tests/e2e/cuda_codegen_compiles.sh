#!/usr/bin/env bash
# The generated CUDA programs compile where there is no GPU (CI): for plans covering every code
# path of the emitter (dp x tp x pp with Megatron linears and gradient buckets, a tied
# vocab-parallel table over tp x pp, a padded vocabulary split over tp, sequence parallelism, ZeRO, zb-h1's split backward, Chimera, interleaved, llama's
# GQA + SwiGLU + RoPE on tp=2), generate the project and compile its train.cpp against the
# runtime headers with the host compiler, bf16 and --fp32, with -Wall -Wextra -Werror. Exits 77 (skipped) without the CUDA headers or MPI.
# Usage: cuda_codegen_compiles.sh AUTODDL WORKDIR
set -euo pipefail
autoddl=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/cuda_syntax.sh"
require_cuda
rm -rf "$work" && mkdir -p "$work"
cases=(
  "dp2_tp2_pp2 tiny-gpt 8 tp=2,pp=2,dp=2,microbatch=2,schedule=1f1b 1"
  "zero1_dp2 tiny-gpt 2 tp=1,pp=1,dp=2,zero=1 0"
  "dp2_pp2_zb-h1 tiny-gpt 4 tp=1,pp=2,dp=2,microbatch=2,schedule=zb-h1 0"
  "pp2_chimera tiny-gpt 2 tp=1,pp=2,dp=1,microbatch=2,schedule=chimera 0"
  "pp2_interleaved $here/gpt-4layer.json 2 tp=1,pp=2,dp=1,microbatch=2,schedule=interleaved,chunks=2 0"
  # Two layers a stage: the loop reads the received input (a per-set buffer) or the layer before's
  # output (its gradient shared by the stage's sets).
  "pp2_1f1b_layer_loop $here/gpt-4layer.json 2 tp=1,pp=2,dp=1,microbatch=1,schedule=1f1b 0"
  "llama_tp2 tiny-llama 2 tp=2,pp=1,dp=1 1"
  "tied_vocab_tp2_pp2 tiny-gpt 4 tp=2,pp=2,dp=1,microbatch=2,schedule=1f1b 2"
  "odd_vocab_dp2_tp2_zero1 $here/gpt-odd-vocab.json 4 tp=2,pp=1,dp=2,zero=1 2"
  "seqpar_dp2_tp2 tiny-gpt 4 tp=2,pp=1,dp=2 3"
  "rows_batch_llama_tp2 tiny-llama 2 tp=2,pp=1,dp=1 batch"
  "ulysses_gpt_dp2_tp2_pp2 tiny-gpt 8 tp=2,pp=2,dp=2,microbatch=2,schedule=1f1b sequence"
  "gcn gcn-cora 1 tp=1,pp=1,dp=1 0"
  "sage_dp2 $here/sage-widening.json 2 tp=1,pp=1,dp=2 0"
  "transformer_conv $here/../../examples/models/transformer_conv-cora.json 1 tp=1,pp=1,dp=1 0"
  # GATConv: the nodes split over dp (s_src and h gathered), the heads over tp.
  "gat_dp2_tp2 $here/../../examples/models/gat-cora.json 4 tp=2,pp=1,dp=2 1"
  # Recomputation: every layer of both stages, Megatron's linears (collectives in the rerun), and
  # the first of a stage's two layers (a recomputed layer beside the loop of the others).
  "recompute_full_dp2_tp2_pp2 tiny-gpt 8 tp=2,pp=2,dp=2,microbatch=2,schedule=1f1b,recompute=full 1 9"
  "recompute_first_layer $here/gpt-4layer.json 1 tp=1,pp=1,dp=1,recompute=full 0 1"
  # A Hugging Face config (kept compact, laid out again at save: json_indented), six layers a
  # stage, each closing its own gradient bucket inside the layer loop.
  "hf_gpt2_dp2_pp2 gpt2 4 tp=1,pp=2,dp=2,microbatch=2,schedule=1f1b,zero=0 0"
)
for c in "${cases[@]}"; do
  read -r name model gpus fix mega recompute <<<"$c"
  w=$work/$name
  # mega 1: Megatron's linears; 2: and the vocab-parallel embedding (a tied table split);
  # 3: and the norms and residual adds sequence-parallel; batch, sequence: every op on split rows
  plan_cuda_case "$autoddl" "$w" "$model" "$gpus" "$fix" "$mega"
  # recompute: every stage recomputes its first that many layers
  if [ -n "${recompute:-}" ]; then
    python3 "$here/recompute_layers.py" "$w/plan.json" "$recompute"
  fi
  codegen_cuda "$autoddl" "$w" "$model"
  compile_train_cuda "$w/p"
  echo "$name: train.cpp compiles (bf16, fp32)"
done
# An fp8 plan (--precision fp8): its block linears' weights handed to the harness
# (program.fp8_weights), the program compiling as the others; the CPU backend refuses it in one
# line (planner/Runnable.h precisionRefusal).
w=$work/fp8_dp2 && mkdir -p "$w"
"$autoddl" plan tiny-gpt --cluster h200x2-nvlink --gpus 2 --global-batch 8 --seq 16 \
  --fix tp=1,pp=1,dp=2 --precision fp8 --no-why -o "$w/plan.json" >/dev/null
grep -q '"precision": "fp8"' "$w/plan.json"
"$autoddl" codegen "$w/plan.json" --backend cuda -o "$w/p" >/dev/null
grep -q 'program.fp8_weights = {' "$w/p/train.cpp"
compile_train_cuda "$w/p"
if "$autoddl" codegen "$w/plan.json" --backend cpu -o "$w/cpu" 2>"$w/cpu.err"; then
  echo "the CPU backend generated an fp8 plan" >&2
  exit 1
fi
grep -q 'precision fp8: the CPU programs' "$w/cpu.err" && [ "$(wc -l <"$w/cpu.err")" -eq 1 ]
echo "fp8_dp2: train.cpp compiles (bf16, fp32); the CPU backend refuses it"
# The harness the programs hand themselves to (backends/cuda/harness over backends/common/harness),
# as a project carries it, under the same flags.
rt=$work/${cases[0]%% *}/p/runtime
for def in "" "-DAUTODDL_FP32=1"; do
  for f in "$rt"/backends/cuda/harness/*.cpp "$rt"/backends/common/harness/*.cpp; do
    c++ -std=c++17 -fsyntax-only -Wall -Wextra -Werror $def -DOMPI_SKIP_MPICXX=1 -I "$rt" \
      -I "$cuda_inc" -I "$mpi_inc" "$f"
  done
done
echo "the CUDA harness compiles (bf16, fp32)"
