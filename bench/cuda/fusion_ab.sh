#!/usr/bin/env bash
# On a GPU machine: what each kernel-level fusion of the generated CUDA programs gains, measured
# on one binary per project by turning the fusions off in turn through the runtime's switches:
#
#   all            every fusion on (the default)
#   no-gelu        AUTODDL_GEMM_NO_GELU_EPILOGUE=1: the MLP's GELU as its own kernels
#   no-residual    AUTODDL_GEMM_NO_RESIDUAL_EPILOGUE=1: the residual adds as their own kernel
#   none           both switches
#
# usage: bench/cuda/fusion_ab.sh [--build-only] OUT_DIR PROJECT...
#   PROJECT: a generated CUDA project (bench/cuda/make_projects.sh makes them, bench.json beside
#   train.cpp). Each is built with CMake for sm_90 and run on one GPU for STEPS (default 13)
#   steps per variant; the first WARMUP (default 3) do not count. A profiled run of `all`
#   (--profile) keeps the op-kind times. OUT_DIR/fusion_ab.json: per project and variant the
#   mean step and tokens/s; OUT_DIR/<project>/<variant>/metrics.json the runs' own files.
#   --build-only: build the projects (in /tmp/fusion-ab, where a later run finds them), all at
#   once, and stop (to build while the GPU does something else).
set -uo pipefail
build_only=0
[ "${1:-}" = --build-only ] && build_only=1 && shift
out=${1:?usage: fusion_ab.sh [--build-only] OUT_DIR PROJECT...}
shift
[ $# -gt 0 ] || { echo "fusion_ab.sh: no project given" >&2; exit 2; }
steps=${STEPS:-13} warmup=${WARMUP:-3}
export NCCL_NVLS_ENABLE=0
mkdir -p "$out"
out=$(realpath "$out")
jobs=$(nproc)
variants="all no-gelu no-residual none"
envs_of() {
  case $1 in
  all) echo "" ;;
  no-gelu) echo "AUTODDL_GEMM_NO_GELU_EPILOGUE=1" ;;
  no-residual) echo "AUTODDL_GEMM_NO_RESIDUAL_EPILOGUE=1" ;;
  none) echo "AUTODDL_GEMM_NO_GELU_EPILOGUE=1 AUTODDL_GEMM_NO_RESIDUAL_EPILOGUE=1" ;;
  esac
}
# One rank under mpirun (as bench/cuda/run.sh runs them), the variant's switches exported to it.
run_one() {
  local v=$1 e xs=()
  shift
  for e in $(envs_of "$v"); do
    export "${e?}"
    xs+=(-x "${e%%=*}")
  done
  mpirun --allow-run-as-root -np 1 -x NCCL_NVLS_ENABLE "${xs[@]}" "$@"
  local st=$?
  for e in $(envs_of "$v"); do unset "${e%%=*}"; done
  return $st
}
build() { # project: configure and build into /tmp/fusion-ab/<name>
  local name
  name=$(basename "$1")
  mkdir -p "/tmp/fusion-ab/$name"
  cmake -S "$1" -B "/tmp/fusion-ab/$name" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES=90 >"$out/$name.build.log" 2>&1 &&
    cmake --build "/tmp/fusion-ab/$name" -j "$jobs" >>"$out/$name.build.log" 2>&1
}
if [ "$build_only" = 1 ]; then
  for p in "$@"; do build "$p" & done
  wait
  exit 0
fi
rows=$out/rows.jsonl
: >"$rows"
for p in "$@"; do
  name=$(basename "$p")
  b=/tmp/fusion-ab/$name
  if ! build "$p"; then
    echo "$name: build failed (log $out/$name.build.log)"
    continue
  fi
  for v in $variants; do
    mkdir -p "$out/$name/$v"
    run_one "$v" "$b/train" --steps "$steps" --out "$out/$name/$v" --quiet \
      >"$out/$name/$v/log.txt" 2>&1
    st=$?
    python3 - "$p/bench.json" "$out/$name/$v/metrics.json" "$warmup" "$v" "$st" >>"$rows" <<'EOF'
import json, sys
bench, metrics, warmup, variant, status = sys.argv[1:6]
b = json.load(open(bench))
row = {"project": bench.split("/")[-2], "model": b["model"], "micro_batch": b["micro_batch"],
       "variant": variant, "status": int(status)}
try:
    m = json.load(open(metrics))
    t = m["step_seconds"][int(warmup):]
    step = sum(t) / len(t)
    row.update({"step_ms": round(step * 1e3, 3), "steps": len(t),
                "tokens_per_s": round(b["micro_batch"] * b.get("seq", 1024) / step, 1),
                "mfu": round(m["model_flops_per_step"] / step / 989.5e12, 4)})
except Exception as e:  # a failed run: its status and log say why
    row["error"] = str(e)
print(json.dumps(row))
EOF
    tail -1 "$rows"
  done
  run_one all "$b/train" --steps "$steps" --out "$out/$name/profile" --profile --quiet \
    >"$out/$name/profile.log" 2>&1 || echo "$name: profiled run failed"
done
python3 - "$rows" "$out/fusion_ab.json" <<'EOF'
import json, subprocess, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                     capture_output=True, text=True).stdout.strip()
json.dump({"device": smi, "method": "one binary per project, each fusion switched off in turn "
           "by its environment switch; mean step after the warm-up steps", "rows": rows},
          open(sys.argv[2], "w"), indent=1)
EOF
echo "fusion_ab: $out/fusion_ab.json"
