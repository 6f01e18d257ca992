# Sourced by the checkpoint benchmarks (stall.sh, compress.sh) with $root, $dir and $models set.
# stage_projects NAME [AUTODDL] plans each model for one GPU (global batch 8, seq 1024, the
# planner picks micro-batch and recomputation to fit) and generates its CUDA project into
# $dir/<model>/.
stage_projects() {
  local name=$1 autoddl=${2:-$root/build/tools/autoddl/autoddl} m
  [ -x "$autoddl" ] || { echo "$name: $autoddl is not an executable autoddl" >&2; exit 2; }
  mkdir -p "$dir"
  for m in $models; do
    rm -rf "${dir:?}/$m"
    "$autoddl" plan "$m" --cluster dgx-h100-ndr --gpus 1 --global-batch 8 --seq 1024 --no-why \
      -o "$dir/$m.plan.json" >"$dir/$m.plan.txt"
    "$autoddl" codegen "$dir/$m.plan.json" --backend cuda -o "$dir/$m" >/dev/null
    echo "$m: $(grep -m1 predicted "$dir/$m.plan.txt" | sed 's/^ *//')"
  done
}
# device_env STEPS: on the GPU machine, sets steps, every, ck, out (STEPS, EVERY, CKPT, OUT as
# given, else STEPS steps, a save every 5, DIR/ck, DIR/results), makes them, loads cuDNN's
# environment and sets build, the build folder beside DIR (ignored by git, not in the carry,
# which replaces DIR each call: a warm device machine keeps it between calls).
device_env() {
  steps=${STEPS:-$1} every=${EVERY:-5} ck=${CKPT:-$dir/ck} out=${OUT:-$dir/results}
  dir=$(realpath "$dir")
  mkdir -p "$out" "$ck"
  source "$root/bench/cuda/cudnn_env.sh" # the programs' attention loads libcudnn
  export NCCL_NVLS_ENABLE=0
  build=${dir%/}-build
  mkdir -p "$build/src"
}
