#!/usr/bin/env bash
# On a GPU machine: the channels-last batch norm's two forms (kernels/BatchNormFused.cuh; the
# split form's three launches against the fused one's cooperative launch) checked and timed, per
# shape and in ResNet-50's step.
#
#   here:   DEPTH=50 BATCH=256 bash bench/onnx/resnet_speed.sh stage DIR
#           cp build/tests/unit/cuda/PrimitiveCheck{,Fp32} DIR/
#           nvcc ... -o DIR/image_kernels_bench      (the line in image_kernels_bench.cu's header)
#   device: bash bench/cuda/batchnorm_ab.sh DIR OUT
#
# OUT/PrimitiveCheck*.txt (both forms on ResNet's small shapes, each twice bit for bit),
# OUT/image_bn.jsonl (every shape in the default form and forced split and fused) and its table
# OUT/image_ab.txt, then resnet_speed.sh's run with variants split and fused (AUTODDL_BATCHNORM)
# and PyTorch: OUT/rn/speed.txt. EXTRA_VARIANTS: more of resnet_speed.sh's VARIANTS.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(realpath "${1:?usage: batchnorm_ab.sh DIR OUT}")
out=${2:?usage: batchnorm_ab.sh DIR OUT}
mkdir -p "$out"
out=$(realpath "$out")
for c in PrimitiveCheck PrimitiveCheckFp32; do
  timeout 120 "$dir/$c" >"$out/$c.txt" 2>&1
  echo "$c rc $? $(grep -c FAIL "$out/$c.txt") FAIL lines; $(tail -1 "$out/$c.txt")"
done
timeout 180 "$dir/image_kernels_bench" 256 >"$out/image_bn.jsonl" 2>&1
echo "image_kernels_bench rc $?"
python3 - "$out/image_bn.jsonl" <<'PY' | tee "$out/image_ab.txt"
import json, sys
rows, sums = {}, []
for line in open(sys.argv[1]):
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    if "summary" in r:
        if r["summary"].startswith("batchnorm"):
            sums.append(r)
        continue
    k = r["kernel"]
    if not k.startswith("batchnorm"):
        continue
    form = "auto"
    for f in ("split", "fused"):
        if k.endswith("_" + f):
            k, form = k[: -len(f) - 1], f
    rows.setdefault((k, r["dir"]), {})[form] = r
print(f"{'norm':34s} {'dir':3s} {'floor':>7s} {'split':>7s} {'fused':>7s} {'auto':>7s}  fused/split")
for (k, d), f in rows.items():
    ms = {n: f[n]["ms"] for n in f}
    ratio = ms["fused"] / ms["split"] if "fused" in ms and "split" in ms else float("nan")
    print(f"{k:34s} {d:3s} {f['auto']['floor_ms']:7.4f} {ms.get('split', 0):7.4f} "
          f"{ms.get('fused', 0):7.4f} {ms.get('auto', 0):7.4f}  {ratio:.2f}")
for s in sums:
    print(json.dumps(s))
PY
VARIANTS="split:AUTODDL_BATCHNORM=split fused:AUTODDL_BATCHNORM=fused ${EXTRA_VARIANTS:-}" OUT="$out/rn" \
  timeout 420 bash "$root/bench/onnx/resnet_speed.sh" device "$dir" >"$out/rn.log" 2>&1
echo "resnet_speed rc $?"
cat "$out/rn/speed.txt" 2>/dev/null
