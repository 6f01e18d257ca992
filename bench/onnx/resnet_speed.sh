#!/usr/bin/env bash
# A torchvision ResNet trained from its ONNX graph on one GPU against PyTorch (issue 45 item 4).
#
#   bash bench/onnx/resnet_speed.sh stage DIR [AUTODDL]   # here: the graph, its plan, CUDA project
#   bash bench/onnx/resnet_speed.sh device DIR            # GPU machine: build, time, PyTorch peer
#
# stage writes torchvision's resnet (DEPTH, default 50) as PyTorch's TorchScript exporter writes it
# in training mode (tests/onnx/torchvision_resnet.py: the architecture and parameter names, no
# values; the program initialises its own), plans it for one H100 at global batch BATCH (default
# 256; batch norms keep one micro-batch) with --loss cross_entropy, and generates the CUDA project
# into DIR/resnet (DIR ignored by git, named in the device tool's carry). device builds it, runs
# STEPS steps (default 40; the step median over the second half, the step graph replayed) and
# then bench/onnx/pytorch_resnet.py (torchvision's model, channels-last bf16 autocast, fused
# AdamW, cudnn.benchmark; eager and torch.compile) at the same batch, and prints images/s side by
# side. VARIANTS="name:VAR=value[,VAR=value] ..." runs the program again per variant with those
# variables set (e.g. "gemm:AUTODDL_CONV_GEMM=1 tuned:AUTODDL_CONV_AUTOTUNE=1"), before PyTorch,
# each a row of its own; PYTORCH_MODES (default "eager compile") picks the peer's modes. Results
# to $OUT (or DIR/results).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
mode=${1:?usage: resnet_speed.sh stage DIR [AUTODDL] | device DIR}
dir=${2:?DIR}
depth=${DEPTH:-50} batch=${BATCH:-256} steps=${STEPS:-40}
case $mode in
stage)
  autoddl=${3:-$root/build/tools/autoddl/autoddl}
  [ -x "$autoddl" ] || { echo "resnet_speed.sh: $autoddl is not an executable autoddl" >&2; exit 2; }
  rm -rf "${dir:?}/resnet" && mkdir -p "$dir"
  python3 "$root/tests/onnx/torchvision_resnet.py" "$depth" |
    protoc --encode=onnx.ModelProto -I/usr/include onnx/onnx.proto >"$dir/resnet$depth.onnx"
  "$autoddl" plan "$dir/resnet$depth.onnx" --loss cross_entropy --cluster dgx-h100-ndr --gpus 1 \
    --global-batch "$batch" --no-why -o "$dir/plan.json" >"$dir/plan.txt"
  "$autoddl" codegen "$dir/plan.json" --backend cuda --model "$dir/resnet$depth.onnx" -o "$dir/resnet" >/dev/null
  printf "depth=%s\nbatch=%s\n" "$depth" "$batch" >"$dir/params"
  echo "resnet$depth: $(grep -m1 predicted "$dir/plan.txt" | sed 's/^ *//')"
  ;;
device)
  dir=$(realpath "$dir")
  out=${OUT:-$dir/results}
  mkdir -p "$out"
  # shellcheck disable=SC1091 # the staged model's depth and batch
  source "$dir/params"
  export NCCL_NVLS_ENABLE=0
  source "$root/bench/cuda/cudnn_env.sh"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
  bash "$root/bench/cuda/build_projects.sh" "$dir/build/b" "$out/build.log" "$dir/resnet"
  "$dir/build/b/train_resnet" --steps "$steps" --quiet --out "$out/autoddl" --overwrite >"$out/autoddl.log" 2>&1 ||
    { tail -5 "$out/autoddl.log"; echo "resnet_speed.sh: the program failed" >&2; }
  for v in ${VARIANTS:-}; do # name:VAR=value[,VAR=value]
    IFS=, read -ra assign <<<"${v#*:}"
    env "${assign[@]}" "$dir/build/b/train_resnet" --steps "$steps" --quiet --out "$out/variant-${v%%:*}" \
      --overwrite >"$out/variant-${v%%:*}.log" 2>&1 || echo "resnet_speed.sh: variant ${v%%:*} failed" >&2
  done
  python3 "$root/bench/onnx/pytorch_resnet.py" --model "resnet$depth" --batch "$batch" \
    ${PYTORCH_MODES:+--modes $PYTORCH_MODES} --out "$out/pytorch.json" 2>&1 | tee "$out/pytorch.log" || true
  python3 - "$out" "$batch" <<'PY' | tee "$out/speed.txt"
import json, os, statistics, sys
out, batch = sys.argv[1], int(sys.argv[2])
rows = []
runs = [("autoddl (generated program)", "autoddl")] + [
    (f"autoddl, {v.split(':')[0]}", f"variant-{v.split(':')[0]}")
    for v in os.environ.get("VARIANTS", "").split()]
for name, folder in runs:  # the step: the median of the run's second half
    m = f"{out}/{folder}/metrics.json"
    if os.path.exists(m):
        s = json.load(open(m))["step_seconds"]
        rows.append((name, statistics.median(s[len(s) // 2:])))
p = f"{out}/pytorch.json"
if os.path.exists(p):
    for r in json.load(open(p))["runs"]:
        if "step_s" in r:
            rows.append((f"PyTorch {r['mode']}", r["step_s"]))
ours = rows[0][1] if rows and rows[0][0].startswith("autoddl") else None
for name, t in rows:
    ratio = (f"  ours {t / ours:.3f}x" if name.startswith("PyTorch") else
             f"  {ours / t:.3f}x the default" if name != rows[0][0] else "") if ours else ""
    print(f"{name:28s} {t * 1e3:8.2f} ms a step  {batch / t:8.0f} images/s{ratio}")
PY
  ;;
*) echo "usage: resnet_speed.sh stage DIR [AUTODDL] | device DIR" >&2; exit 2 ;;
esac
