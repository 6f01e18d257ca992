#!/usr/bin/env bash
# The main job on a built-in default: installs what is missing, builds autoddl, then
#   1. imports a real model (GPT-2 124M, Hugging Face config) and prints its sbp IR summary,
#   2. prices a collective on a preset cluster and simulates a pipeline schedule,
#   3. plans GPT-3 175B for 1,024 GPUs of a Selene-class cluster (when the planner is built).
# Usage: ./scripts/quickstart.sh
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh --target autoddl autoddl-opt
bin=build/tools/autoddl/autoddl

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

step "autoddl import gpt2 --summary   (GPT-2 124M from its Hugging Face config.json)"
$bin import gpt2 --summary

step "autoddl import gpt2 -o build/gpt2.mlir   (the SBP-annotatable IR, first lines)"
$bin import gpt2 -o build/gpt2.mlir
head -n 25 build/gpt2.mlir

step "autoddl cost collective: 256 MiB all-reduce over 2 NVLink-joined H200s and 64 H100s"
$bin cost collective --op all_reduce --bytes 268435456 --ranks 2 --cluster h200x2-nvlink
$bin cost collective --op all_reduce --bytes 268435456 --ranks 64 --cluster dgx-h100-ndr

step "autoddl simulate: 1F1B vs zero-bubble ZB-H1, 4 stages, 8 micro-batches"
$bin simulate --schedule 1f1b --stages 4 --microbatches 8
$bin simulate --schedule zb-h1 --stages 4 --microbatches 8 --fwd 1 --bwd 2 --wgrad 1
