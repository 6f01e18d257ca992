#!/usr/bin/env bash
# Runs every autoddl subcommand (and autoddl-opt) over malformed inputs: FIFOs,
# devices, directories, dangling and device symlinks, deep nesting, empty and
# binary files, inconsistent plans, bad numeric flags and unusable outputs.
# Each run must exit 1..123 within its timeout, print exactly one line on
# stderr, and leave every file in the work folder as it was (checksums and file
# types before and after). Inputs are generated here; inputs/ holds a few small
# hand-written ones.
#
#   malformed_inputs.sh AUTODDL AUTODDL_OPT WORKDIR
set -u
A=$(realpath "$1")
OPT=$(realpath "$2")
W=$3
HERE=$(cd "$(dirname "$0")" && pwd)
INPUTS=$HERE/inputs
C=dgx-a100-hdr
rm -rf "$W" && mkdir -p "$W" && cd "$W" || exit 1

# --- inputs ------------------------------------------------------------------
cp "$INPUTS"/* .
mkfifo fifo
mkdir dir
ln -s /dev/null devnull-link
ln -s missing-file dangling
: >empty.json
head -c 4096 /dev/urandom >binary.json
nest() { # nest OPEN CLOSE COUNT: OPEN x COUNT then CLOSE x COUNT
  head -c "$3" /dev/zero | tr '\0' "$1"
  head -c "$3" /dev/zero | tr '\0' "$2"
}
nest '[' ']' 100000 >deep.json
{ printf '{"model_type": "gpt2", "n_embd": '; nest '[' ']' 100000; printf '}'; } >deep-config.json
{ printf '{"name": "x", "gpus_per_node": '; nest '{' '}' 50000 | sed 's/{}/{"a":1}/'; printf '}'; } >deep-cluster.json
{ printf 'module {\n  "test.op"() {attr = '; nest '[' ']' 100000; printf '} : () -> ()\n}\n'; } >deep.mlir
printf 'func.func @f() {\n  return\n}\n' >good.mlir
for i in $(seq 300); do printf 'func.func @f%d() {\n  return\n}\n' "$i"; done >many-funcs.mlir
# A plan with two pipeline stages and tensor parallelism, then inconsistent
# copies of it, each one edit away.
"$A" plan gpt2 --cluster "$C" --global-batch 8 --fix pp=2,tp=2 --no-why \
  -o good-plan.json >/dev/null 2>&1 || { echo "FAIL: could not make the reference plan"; exit 1; }
python3 - "$INPUTS/../../../examples/clusters/$C.json" <<'PY' || exit 1
import json, sys
good = json.load(open("good-plan.json"))
def edit(name, change):
    plan = json.loads(json.dumps(good))
    change(plan)
    json.dump(plan, open(name, "w"), indent=1)
edit("plan-mesh.json", lambda p: p["mesh"].update(tp=3))
edit("plan-microbatches.json", lambda p: p.update(microbatches=p["microbatches"] + 1))
edit("plan-sbp.json", lambda p: p["ops"][0].update(result="S(x)"))
edit("plan-negative.json", lambda p: p["pipeline_ranks"][0].update(forward_s=-1.0))
edit("plan-memory.json", lambda p: p["pipeline_ranks"][1]["memory"].update(weights=-5))
edit("plan-stage-gap.json", lambda p: p["stages"][1].update(layers=[p["stages"][1]["layers"][0] + 1, p["stages"][1]["layers"][1]]))
edit("plan-stage-overlap.json", lambda p: p["stages"][1].update(layers=[0, p["stages"][1]["layers"][1]]))
edit("plan-stage-dup.json", lambda p: p["stages"][1].update(stage=0))
edit("plan-sha.json", lambda p: p["model"].update(source="model-small.json"))
edit("plan-moved.json", lambda p: p["model"].update(source="/nonexistent/moved-model.json",
                                                     sha256="0" * 64))
# Measured runs a real run cannot produce (validate --measured DIR).
import os
mesh = good["mesh"]
info = {"model": good["model"]["name"], "ranks": str(mesh["pp"] * mesh["dp"] * mesh["tp"])}
for name, extra in (("measured-negative", {"mean_step_seconds": -0.5}),
                    ("measured-negative-step", {"step_seconds": [0.1, -2.0]}),
                    ("measured-rank99", {"mean_step_seconds": 0.1, "op_profile_rank": 99})):
    os.makedirs(name)
    json.dump(dict(info=info, op_kinds={}, **extra), open(name + "/metrics.json", "w"))
cluster = json.load(open(sys.argv[1]))
cluster["intra_node"]["bandwidth_GBps"] = 1e300  # inf bytes/s: "too large"
json.dump(cluster, open("cluster-huge.json", "w"))
PY
rm -f good-plan.mlir
# Strict formats: a key given twice or a null where a value is required.
printf '{"template": "gpt", "config": {"hidden_size": 64, "num_layers": 2, "hidden_size": 32}}' >dup-model.json
printf '{"template": "gpt", "config": {"hidden_size": null}}' >null-model.json
sed '0,/{/s//{"name": "twice",/' "$INPUTS/../../../examples/clusters/$C.json" >dup-cluster.json
sed '0,/{/s//{"zero": 0,/' good-plan.json >dup-plan.json
cp good-plan.json old-plan.json
mkdir -p keep-full && echo mine >keep-full/notes.txt
printf 'x' >not-a-cache

. "$HERE/check_lib.sh"
before=$(snapshot)

BAD_FILES="fifo /dev/zero /dev/urandom dir dangling empty.json binary.json deep.json"
for f in $BAD_FILES deep-config.json; do
  check "$A" import "$f"
  check "$A" plan "$f" --cluster "$C" --global-batch 8
done
for f in $BAD_FILES deep-cluster.json cluster-huge.json; do
  check "$A" plan gpt2 --cluster "$f" --global-batch 8
  check "$A" cost cluster --cluster "$f"
done
for f in $BAD_FILES plan-*.json; do
  # inspect reads the plan alone: a moved model file does not concern it.
  [ "$f" = plan-moved.json ] || check "$A" inspect "$f"
  check "$A" codegen "$f" -o project
  check "$A" run "$f"
  check "$A" verify "$f"
  check "$A" validate "$f" --measured good-plan.json
done
for f in fifo /dev/zero dir deep.json; do
  check "$A" validate good-plan.json --measured "$f"
done
# Duplicate keys and nulls in the strict formats, named by their JSON pointer.
check_says "dup-model.json: at /config/hidden_size: duplicate key" "$A" import dup-model.json
check_says "null-model.json: at /config/hidden_size: expected a value, got null" \
  "$A" import null-model.json
check_says "dup-cluster.json: at /name: duplicate key" \
  "$A" plan gpt2 --cluster dup-cluster.json --global-batch 8
check_says "dup-plan.json: at /zero: duplicate key" "$A" codegen dup-plan.json -o project
# A plan runs only the model it was made for, --model or not.
for cmd in "codegen good-plan.json -o project" "run good-plan.json" "verify good-plan.json"; do
  # shellcheck disable=SC2086
  check_says "good-plan.json: at /model/sha256: the plan was made for another model" \
    "$A" $cmd --model model-small.json
done
# A data file that is no regular file is named before anything is built.
for d in dir fifo /dev/zero dangling; do
  check "$A" run good-plan.json --data "$d"
  check "$A" verify good-plan.json --data "$d"
done
# An earlier run's results are never overwritten by `run --out`.
mkdir -p earlier-run && echo '{}' >earlier-run/metrics.json
before=$(snapshot)
check "$A" run good-plan.json --out earlier-run
check "$A" run gpt2 --ranks 2 --out earlier-run

# Outputs that must be refused, never replaced: devices, FIFOs, directories,
# symlinks to devices or to nothing, the command's own input.
for o in /dev/full fifo dir devnull-link dangling; do
  check "$A" plan gpt2 --cluster "$C" --global-batch 8 -o "$o"
  check "$A" import gpt2 -o "$o"
  check "$A" inspect good-plan.json --trace "$o"
  check "$A" simulate --schedule 1f1b --stages 2 --microbatches 4 --trace "$o"
done
for o in /dev/full fifo devnull-link dangling model-small.json; do
  check "$A" codegen good-plan.json -o "$o"
done
check "$A" plan model-small.json --cluster "$C" --global-batch 8 -o model-small.json
check "$A" inspect good-plan.json --trace good-plan.json

# Every output flag is checked before the work (the search, the simulation,
# the build and profiled run of validate, the GPU probe), and the line names
# the flag and the path: without --measured, validate would build and run.
for o in /nonexistent/dir/x.json /dev/full fifo devnull-link; do
  check_says "-o $o:" "$A" plan gpt2 --cluster "$C" --global-batch 8 -o "$o"
  check_says "-o $o:" "$A" import gpt2 -o "$o"
  check_says "--trace $o:" "$A" inspect good-plan.json --trace "$o"
  check_says "--trace $o:" "$A" simulate --schedule 1f1b --stages 2 --microbatches 4 --trace "$o"
  check_says "--trace-out $o:" "$A" validate good-plan.json --trace-out "$o"
  check_says "--trace-out $o:" "$A" validate good-plan.json --measured x --trace-out "$o"
  check_says "--fit-cluster $o:" "$A" validate good-plan.json --cluster "$C" --fit-cluster "$o"
  check_says "--fit-cluster $o:" "$A" validate good-plan.json --measured x --cluster "$C" --fit-cluster "$o"
  check_says "-o $o:" "$A" calibrate -o "$o"
  check_says "--raw $o:" "$A" calibrate -o cluster-out.json --raw "$o"
done
check_says "--fit-cluster: needs --cluster" "$A" validate good-plan.json --fit-cluster fitted.json
check_says "--trace-out good-plan.json:" "$A" validate good-plan.json --trace-out good-plan.json

# Empty paths are no paths (issue 49): not "standard output", not "a temporary folder".
check_says "empty value" "$A" plan gpt2 --cluster "$C" --global-batch 8 -o ''
check_says "empty value" "$A" import gpt2 -o ''
check_says "empty value" "$A" codegen good-plan.json -o ''
check_says "empty value" "$A" verify good-plan.json --keep ''
check_says "empty value" "$A" run good-plan.json --out ''
# verify --keep: never a file, never a folder holding the user's files.
check_says "--keep good-plan.json: exists and is not a folder" "$A" verify good-plan.json \
  --keep good-plan.json
check_says "--keep keep-full: the folder holds files" "$A" verify good-plan.json --keep keep-full
# K-FAC's flags need --optimizer kfac, whatever their value.
check_says "--kfac-refresh: needs --optimizer kfac" "$A" plan gpt2 --cluster "$C" \
  --global-batch 8 --kfac-refresh 0
check_says "--kfac-damping: needs --optimizer kfac" "$A" plan gpt2 --cluster "$C" \
  --global-batch 8 --kfac-damping 0.1
check_says "--kfac-rule: needs --optimizer kfac" "$A" plan gpt2 --cluster "$C" \
  --global-batch 8 --kfac-rule sgd
# Every count bounded: a billion K-FAC layers is refused, not simulated for hours.
check_says "--kfac-layers: expected at most" "$A" simulate --schedule 1f1b --stages 2 \
  --microbatches 4 --pipefisher --kfac-layers 1000000000
# Environment variables: a bad value is refused by name, whatever the command.
check_says "AUTODDL_FUSE_SKIP: 'sbp-bogus'" env AUTODDL_FUSE_SKIP=sbp-bogus "$A" plan gpt2 \
  --cluster "$C" --global-batch 8
check_says "AUTODDL_CACHE=not-a-cache: cannot create the folder" env AUTODDL_CACHE=not-a-cache \
  "$A" run good-plan.json
check_says "AUTODDL_PRESETS_DIR=fifo: not a folder" env AUTODDL_PRESETS_DIR=fifo "$A" plan gpt2 \
  --cluster "$C" --global-batch 8
# Output folders that cannot be made: one line naming them, no "internal error".
check_says "--out good-plan.json: exists and is not a directory" "$A" run gpt2 --ranks 2 \
  --out good-plan.json
check "$A" run gpt2 --ranks 2 --out /proc/x
check "$A" verify good-plan.json --keep /proc/x
# validate --measured: times and ranks no run produces.
check_says "/mean_step_seconds: expected a non-negative number" "$A" validate good-plan.json \
  --measured measured-negative
check_says "/step_seconds/1: expected a non-negative number" "$A" validate good-plan.json \
  --measured measured-negative-step
check_says "rank 99 is not one of the plan's 8 ranks" "$A" validate good-plan.json \
  --measured measured-rank99
# A full disk (a file size limit: no root needed) leaves the earlier plan whole, and no temporary
# file beside it.
full_disk=(bash -c 'ulimit -f 4; trap "" XFSZ; exec "$@"' full_disk)
check_says "old-plan.json: cannot write" "${full_disk[@]}" "$A" plan gpt2 --cluster "$C" --global-batch 8 \
  --no-why -o old-plan.json

# Numeric flags out of range: one line naming the flag.
for v in 0 -8 99999999999 99999999999999999999 abc; do
  check "$A" plan gpt2 --cluster "$C" --global-batch 8 --gpus "$v"
  check "$A" plan gpt2 --cluster "$C" --global-batch 8 --nodes "$v"
  check "$A" plan gpt2 --cluster "$C" --global-batch "$v"
  check "$A" plan gpt2 --cluster "$C" --global-batch 8 --seq "$v"
  check "$A" import gpt2 --batch "$v"
  check "$A" simulate --schedule 1f1b --stages "$v" --microbatches 4
  check "$A" simulate --schedule 1f1b --stages 2 --microbatches "$v"
  check "$A" cost collective --op all_reduce --bytes 1GiB --ranks "$v" --cluster "$C"
  check "$A" inspect good-plan.json --max-ranks "$v"
done
for v in 0 -8 99999999999999999999 abc; do # 64-bit flags
  check "$A" run good-plan.json --steps "$v"
  check "$A" verify good-plan.json --steps "$v"
done
for v in -1 nan inf 1e999; do
  check "$A" verify good-plan.json --loss-tolerance "$v"
  check "$A" validate good-plan.json --measured x --step-tolerance "$v"
done
check "$A" simulate --schedule 1f1b --stages 4 --microbatches 8 --fwd 1e308 --bwd 1e308

# Output to a full device or a closed standard output is an error.
cases=$((cases + 2))
for redirect in full closed; do
  if [ $redirect = full ]; then
    "$A" import gpt2 --summary >/dev/full 2>err.txt
  else
    "$A" import gpt2 --summary >&- 2>err.txt
  fi
  rc=$?
  if [ $rc -lt 1 ] || [ $rc -gt 123 ] || [ "$(wc -l <err.txt)" -ne 1 ]; then
    echo "FAIL: stdout $redirect: exit $rc, $(wc -l <err.txt) lines"
    failures=$((failures + 1))
  fi
done

# autoddl-opt: the same input rules, and nesting MLIR's parser cannot survive.
for f in fifo /dev/zero dir dangling deep.mlir; do
  check "$OPT" "$f"
done
for o in /dev/full fifo devnull-link good.mlir; do
  check "$OPT" good.mlir -o "$o"
done
# MLIR's own output flags pass the checks -o passes (a reproducer over the input destroyed it).
for o in /dev/full fifo devnull-link good.mlir; do
  check "$OPT" good.mlir --mlir-generate-reproducer="$o"
  check "$OPT" good.mlir --mlir-pass-pipeline-crash-reproducer "$o"
  check "$OPT" good.mlir --log-actions-to="$o"
done
check_says "-o: empty path" "$OPT" good.mlir -o ''
check_says "--mlir-generate-reproducer: empty path" "$OPT" good.mlir --mlir-generate-reproducer=
check_says "is also the output" "$OPT" good.mlir -o out.mlir --mlir-generate-reproducer=out.mlir
check_says "--mlir-print-ir-tree-dir good.mlir: exists and is not a folder" "$OPT" good.mlir \
  --mlir-print-ir-tree-dir=good.mlir --mlir-print-ir-after-all
# -o is written whole or not at all: a full disk leaves the earlier output.
cp good.mlir old.mlir
before=$(snapshot)
check "${full_disk[@]}" "$OPT" many-funcs.mlir -o old.mlir

echo "$cases cases, $failures failures"
[ "$failures" -eq 0 ]
