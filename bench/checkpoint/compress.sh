#!/usr/bin/env bash
# Compressed checkpoints (BitSnap, --checkpoint-compress; issue 46 item 4) of GPT-2 124M and 355M
# trained on one GPU. Per model, three runs:
#  - exact: STEPS steps, a full checkpoint every EVERY steps; compress_ratio
#    (bench/checkpoint/compress_ratio.cpp, on the host) then says what each later checkpoint
#    would take against the first: parameter delta ratio and share changed, moment quantization
#    ratio and relative L2 error, encoding time, and per element (log-domain levels as stored,
#    and the raw-value k-means of bitsnap version 1) the relative error of m and of sqrt(v)
#    and the error of AdamW's update direction;
#  - compressed: the same with --checkpoint-compress --checkpoint-full-every FULL (default 4):
#    metrics.json's info.checkpoint_compress (each compressed save's ratio) and checkpoints
#    (stall and write times) against the exact run's, and the folders' sizes on disk;
#  - resumed: from the compressed run's first compressed checkpoint (step 2*EVERY) and from the
#    exact run's checkpoint of that step, to STEPS: the two loss curves side by side, and a
#    second resume of the exact checkpoint beside them (the programs' run-to-run noise floor).
#
#   bash bench/checkpoint/compress.sh stage DIR [AUTODDL]   # here: plans and CUDA projects into DIR
#   bash bench/checkpoint/compress.sh device DIR            # GPU machine: build, train, measure
#
# stage plans gpt2 and gpt2-medium for one GPU (global batch 8, seq 1024) and generates their CUDA
# projects into DIR/<model>/ (DIR ignored by git, named in the device tool's carry). device builds
# them on one shared runtime (bench/cuda/shared_runtime_cmake.sh), trains each STEPS steps
# (default 20) with --save-every EVERY (default 5) on DATA (a .bin token file; default synthetic
# tokens, say which in the results) for the three runs above. Checkpoints go to CKPT (default
# DIR/ck; 124M: 1.5 GB each, 355M: 4.3 GB), removed after each model. Results to $OUT (or DIR/results): each run's metrics.json and log, and compress.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
mode=${1:?usage: compress.sh stage DIR [AUTODDL] | device DIR}
dir=${2:?DIR}
models=${MODELS:-gpt2 gpt2-medium}
. "$root/bench/checkpoint/lib.sh"
case $mode in
stage)
  stage_projects compress.sh "${3:-}"
  ;;
device)
  device_env 20
  projects=()
  for m in $models; do projects+=("$dir/$m"); done
  echo "compress.sh: building ${projects[*]} (log $out/build.log)"
  bash "$root/bench/cuda/build_projects.sh" "$build/build" "$out/build.log" "${projects[@]}"
  c++ -O2 -std=c++17 -pthread -I "$root" "$root/bench/checkpoint/compress_ratio.cpp" \
    "$root"/backends/common/{CheckpointCompress,Safetensors,FileIo,MiniJson}.cpp \
    -o "$build/compress_ratio"
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/gpu.txt"
  data=()
  [ -n "${DATA:-}" ] && data=(--data "$DATA")
  echo "data: ${DATA:-synthetic tokens}" | tee "$out/compress.txt"
  full=${FULL:-4}
  # --bind-to none: the checkpoint writer's encode threads need cores; mpirun binds a lone
  # rank to one core (a compressed save of 124M then took 37.5 s, 6.5 s on 8 threads).
  train() { # NAME ARGS...: one run of model $m, its metrics.json and log under $out
    local name=$1
    shift
    echo "compress.sh: $m $name"
    mpirun --allow-run-as-root --bind-to none -np 1 -x NCCL_NVLS_ENABLE "$build/build/train_$m" --steps "$steps" \
      --out "$out/$m-$name" --overwrite --quiet "${data[@]}" "$@" >"$out/$m-$name.log" 2>&1 ||
      { tail -20 "$out/$m-$name.log"; exit 1; }
  }
  for m in $models; do
    rm -rf "${ck:?}/$m" "${ck:?}/$m-z"
    train exact --save "$ck/$m" --save-every "$every"
    later=() # at most RATIO_SAVES (default 3) later checkpoints: each costs a host encode
    for ((s = 2 * every; s <= steps && ${#later[@]} < ${RATIO_SAVES:-3}; s += every)); do
      later+=("$ck/$m/step-$s")
    done
    echo "$m: against $ck/$m/step-$every" | tee -a "$out/compress.txt"
    "$build/compress_ratio" "$ck/$m/step-$every" "${later[@]}" | tee -a "$out/compress.txt"
    train compressed --save "$ck/$m-z" --save-every "$every" --checkpoint-compress \
      --checkpoint-full-every "$full"
    du -sb "$ck/$m"/step-* "$ck/$m-z"/step-* | tee -a "$out/compress.txt"
    train resumed-exact --resume "$ck/$m/step-$((2 * every))"
    train resumed-compressed --resume "$ck/$m-z/step-$((2 * every))"
    # The noise floor: the CUDA programs are not bitwise reproducible, so a second exact resume
    # says how far two resumes of one checkpoint drift apart (the compressed gap is read against it).
    train resumed-exact-2 --resume "$ck/$m/step-$((2 * every))"
    python3 - "$out" "$m" <<'PY' | tee -a "$out/compress.txt"
import json, sys
out, m = sys.argv[1:3]
r = {k: json.load(open(f"{out}/{m}-{k}/metrics.json")) for k in
     ("exact", "compressed", "resumed-exact", "resumed-compressed")}
print(f"{m}: {r['compressed']['info'].get('checkpoint_compress')}")
for k in ("exact", "compressed"):
    c = r[k]["checkpoints"]
    print(f"{m} {k:10s} stall_ms " + " ".join(f"{x['stall_seconds'] * 1e3:.1f}" for x in c) +
          "  write_s " + " ".join(f"{x['write_seconds']:.2f}" for x in c))
first = int(r["resumed-exact"]["info"]["first_step"])
a, b = r["resumed-exact"]["loss"], r["resumed-compressed"]["loss"]
c = json.load(open(f"{out}/{m}-resumed-exact-2/metrics.json"))["loss"]
print(f"{m}: loss from step {first + 1}: exact resume, compressed resume (relative difference), "
      "second exact resume (relative difference: the noise floor)")
for i, (x, y, z) in enumerate(zip(a, b, c)):
    if len(a) <= 40 or i % 10 == 0 or i == len(a) - 1:
        print(f"  {first + i + 1:5d} {x:.6f} {y:.6f} {abs(x - y) / abs(x):.2e} {z:.6f} {abs(x - z) / abs(x):.2e}")
w = 10  # a step's loss moves with its batch: the curves compared as means of w steps
for i in range(0, len(a) - w + 1, w):
    ma, mb, mc = (sum(v[i:i + w]) / w for v in (a, b, c))
    print(f"  steps {first + i + 1}-{first + i + w}: mean {ma:.5f} / {mb:.5f} ({(mb - ma) / ma:+.3%})"
          f" / exact again {mc:.5f} ({(mc - ma) / ma:+.3%})")
PY
    rm -rf "${ck:?}/$m" "${ck:?}/$m-z"
  done
  ;;
*) echo "compress.sh: unknown mode $mode (stage or device)" >&2; exit 2 ;;
esac
