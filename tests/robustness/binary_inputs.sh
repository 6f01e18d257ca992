#!/usr/bin/env bash
# A generated CPU training program (tiny-gpt, one rank, no mpirun) over malformed flags, data,
# checkpoints, output folders and launcher variables (issue 23): each run must exit 1..123 with one
# line on stderr and leave every file as it was (check_lib.sh). Then the cases that must work:
# --save alone writes DIR/step-N (parameters, optimizer state apart), --lr 0 resumes, and a
# diverging run (--lr 1e30) stops with exit 1 and one line.
#
#   binary_inputs.sh AUTODDL WORKDIR     (AUTODDL_CACHE: where `autoddl run` builds the program)
set -u
A=$(realpath "$1")
W=$2
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$W" && mkdir -p "$W" && W=$(realpath "$W") && cd "$W" || exit 1
export AUTODDL_CACHE=${AUTODDL_CACHE:-$W/cache}

# --- the program: `autoddl run` of a model FILE plans, generates and builds it once in the cache;
# the plan it writes loads that file again without --model (the user path of issue 23).
cp "$HERE/../../examples/models/tiny-gpt.json" my-gpt.json
"$A" run my-gpt.json --ranks 1 --global-batch 4 --seq 16 --steps 2 --out first >run.log 2>&1 ||
  { cat run.log; echo "FAIL: autoddl run my-gpt.json"; exit 1; }
# Planned again (another search wall time), the same program is reused, not rebuilt (the cache
# may hold projects of earlier autoddl builds: count what the second run adds).
before=$(ls -d "$AUTODDL_CACHE"/*/build | wc -l)
"$A" run my-gpt.json --ranks 1 --global-batch 4 --seq 16 --steps 1 >run.log 2>&1 ||
  { cat run.log; echo "FAIL: the second autoddl run my-gpt.json"; exit 1; }
projects=$(ls -d "$AUTODDL_CACHE"/*/build | wc -l)
[ "$projects" -eq "$before" ] ||
  { echo "FAIL: planning again built $((projects - before)) more project(s)"; exit 1; }
(cd / && "$A" codegen "$W/first/plan.json" -o "$W/regenerated" >/dev/null) ||
  { echo "FAIL: codegen of a model file's plan without --model"; exit 1; }
rm -rf regenerated
# The binary `run` launched ("autoddl: mpirun -np 1 BINARY"): the cache may hold older builds.
T=$(sed -n 's/^autoddl: mpirun -np [0-9]* \([^ ]*\).*/\1/p' run.log | head -1)
[ -x "$T" ] || { echo "FAIL: no train binary in $AUTODDL_CACHE"; exit 1; }
"$T" --steps 2 --save ck --quiet || { echo "FAIL: --save alone"; exit 1; }
for f in model.safetensors optimizer.safetensors; do
  [ -s ck/step-2/$f ] || { echo "FAIL: --save alone wrote no ck/step-2/$f"; exit 1; }
done

# --- stopping autoddl stops its job (issue 49): SIGTERM to `run`, SIGINT to `verify` while the
# program trains; autoddl ends by that signal only once mpirun and its rank are gone, and its
# temporary folder ($TMPDIR/autoddl-*) is removed.
mkdir -p tmp
stop_test() { # stop_test SIGNAL CMD...
  local sig=$1 pid i rc left job="$AUTODDL_CACHE/[^ ]*/build/train --steps 100000000"
  shift
  TMPDIR=$W/tmp "$@" >stop.log 2>&1 &
  pid=$!
  for i in $(seq 300); do # the rank's command line starts with the binary
    pgrep -f -- "^$job" >/dev/null && break
    sleep 0.2
  done
  pgrep -f -- "^$job" >/dev/null ||
    { cat stop.log; kill "$pid"; echo "FAIL: $*: the program never started"; exit 1; }
  kill -s "$sig" "$pid"
  wait "$pid"
  rc=$?
  left=$(pgrep -f -- "$job")
  if [ -n "$left" ]; then
    kill -9 $left # the orphans this test started, by pid
    echo "FAIL: SIG$sig to $*: left $(echo $left | wc -w) process(es) of the job running"
    exit 1
  fi
  [ "$rc" -ge 128 ] || { cat stop.log; echo "FAIL: SIG$sig to $*: exit $rc"; exit 1; }
  [ -z "$(ls tmp)" ] || { echo "FAIL: SIG$sig to $*: left $(ls tmp) in \$TMPDIR"; exit 1; }
  echo "ok: SIG$sig to $1 $2 stopped its job (exit $rc), nothing left"
}
stop_test TERM "$A" run my-gpt.json --ranks 1 --global-batch 4 --seq 16 --steps 100000000
stop_test INT "$A" verify first/plan.json --steps 100000000
rm -rf first run.log my-gpt.json tmp stop.log

# --- inputs -----------------------------------------------------------------------------------
mkdir -p in && cd in || exit 1
mkfifo fifo
mkdir dir empty-ck
ln -s missing dangling
echo text >file
: >empty.txt
printf 'abc' >odd.bin
printf '\377\377\377\377' >big-id.bin # ids 65535 > vocabulary 256
cp -r ../ck good-ck
mkdir partial-ck && cp ../ck/step-2/model.safetensors partial-ck/
mkdir cut-ck && head -c 100 ../ck/step-2/model.safetensors >cut-ck/model.safetensors
# Checkpoints with edited metadata or shapes (safetensors: 8-byte header length, JSON header).
python3 - ../ck/step-2 <<'PY' || exit 1
import json, os, shutil, struct, sys
src = sys.argv[1]
def edit(name, change, which="model.safetensors"):
    os.makedirs(name)
    for f in ("model.safetensors", "optimizer.safetensors"):
        shutil.copy(f"{src}/{f}", f"{name}/{f}")
    raw = open(f"{name}/{which}", "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    change(header)
    text = json.dumps(header).encode()  # data offsets count from the header's end
    text += b" " * (-len(text) % 8)
    open(f"{name}/{which}", "wb").write(struct.pack("<Q", len(text)) + text + raw[8 + n:])
def meta(key, value):
    return lambda h: h["__metadata__"].update({key: value})
edit("neg-step", meta("step", "-3"))
edit("late-step", meta("step", "99"))
edit("text-step", meta("step", "two"))
edit("huge-step", meta("step", "9" * 30))
edit("other-model", meta("model", "x" * 200))
edit("state-step", meta("step", "1"), "optimizer.safetensors")
def reshape(h):
    k = next(k for k in h if k.endswith("wte.weight"))
    h[k]["shape"] = list(reversed(h[k]["shape"]))
edit("wrong-shape", reshape)
def rename(h):
    k = next(k for k in h if k.endswith("wte.weight"))
    h["renamed"] = h.pop(k)
edit("missing-tensor", rename)
PY
# An earlier run's results in --out; a FIFO and a link to a device at their names; an SGD
# checkpoint (its momentum has AdamW's shapes: only the metadata tells them apart).
mkdir earlier fifo-out full-out trace-out
echo '{"loss": [1]}' >earlier/metrics.json
mkfifo fifo-out/metrics.json
ln -s /dev/full full-out/metrics.json
echo '{}' >trace-out/trace.json
"$T" --steps 2 --optimizer sgd --save sgd-ck --quiet || { echo "FAIL: an SGD run"; exit 1; }
cd .. || exit 1
. "$HERE/check_lib.sh"
CHECK_TIMEOUT=15
before=$(snapshot)

# --- flags ------------------------------------------------------------------------------------
long=$(head -c 100000 /dev/zero | tr '\0' 9)
for v in -1 99999999999999999999 abc "" 1.5 "$long"; do
  check "$T" --steps "$v"
done
for v in nan inf -1 -0.5 1e999 x ""; do
  check "$T" --steps 1 --lr "$v"
  check "$T" --steps 1 --weight-decay "$v"
  check "$T" --steps 1 --lr-decay cosine --min-lr "$v"
done
for f in "--warmup -1" "--lr-decay step" "--lr-decay cosine --decay-steps 0" "--min-lr 0" \
  "--lr-decay linear --min-lr 1" "--lr-decay cosine --warmup 4 --decay-steps 4"; do
  # shellcheck disable=SC2086 # the flags split into words
  check "$T" --steps 1 $f
done
check "$T" --steps 1 --save in/new --save-every 0
check "$T" --steps 1 --save-every 2
check "$T" --steps 1 --save-initial
for v in -1 abc 1e3; do check "$T" --steps 1 --seed "$v"; done
check "$T" --steps 1 --optimizer adam
check "$T" --steps 1 --bogus
check "$T" --steps 1 "$long"
check "$T" --steps
check "$T" --steps 1 --out
# --- data -------------------------------------------------------------------------------------
for d in in/fifo /dev/zero /dev/urandom in/dir in/dangling in/missing in/empty.txt in/odd.bin \
         in/big-id.bin ""; do
  check "$T" --steps 1 --data "$d"
done
# --- outputs: refused before the first step -----------------------------------------------------
for o in /dev/full in/fifo in/file in/dangling /proc/version/x in/file/sub ""; do
  check "$T" --steps 2 --out "$o"
  check "$T" --steps 2 --save "$o"
done
# An earlier run's results are refused unless --overwrite; a FIFO or a device link even then.
check "$T" --steps 1 --out in/earlier
check "$T" --steps 1 --out in/trace-out --trace
check "$T" --steps 1 --out in/fifo-out --overwrite
check "$T" --steps 1 --out in/full-out --overwrite
# --- checkpoints ------------------------------------------------------------------------------
for ck in in/missing in/file in/fifo in/empty-ck in/partial-ck in/cut-ck in/neg-step \
          in/late-step in/text-step in/huge-step in/other-model in/state-step in/wrong-shape \
          in/missing-tensor; do
  check "$T" --steps 4 --resume "$ck"
done
check "$T" --steps 1 --resume in/good-ck/step-2 # beyond --steps
check "$T" --steps 4 --resume in/sgd-ck/step-2   # AdamW resuming SGD's state
check "$T" --steps 4 --resume in/good-ck/step-2 --optimizer sgd
# --- launcher variables -------------------------------------------------------------------------
check env WORLD_SIZE=2 RANK=0 "$T" --steps 1
check env WORLD_SIZE=abc "$T" --steps 1
check env WORLD_SIZE=1 RANK=5 "$T" --steps 1
check env WORLD_SIZE=1 RANK=-1 "$T" --steps 1
check env WORLD_SIZE=99999999999999999999 "$T" --steps 1
# AUTODDL_* values a program does not take: refused by name, even where this backend (CPU) or this
# plan (first-order) would never read the variable.
check env AUTODDL_CUDA_GRAPH=off "$T" --steps 1
check env AUTODDL_KFAC_FILL=bogus "$T" --steps 1
check env AUTODDL_WATCHDOG_TIMEOUT=abc "$T" --steps 1
check env AUTODDL_CONNECT_TIMEOUT=0 "$T" --steps 1
# --- a run that diverges: one line, exit 1, no outputs ----------------------------------------
check "$T" --steps 3 --lr 1e30 --out in/diverged
# --- a checkpoint file that is a link to a device is refused, not replaced (the error comes after
# the steps, through MPI_Abort: more than one line) --------------------------------------------------
mkdir -p link-ck/step-1 && ln -s /dev/full link-ck/step-1/model.safetensors
if "$T" --steps 1 --save link-ck --quiet >out.txt 2>err.txt ||
   ! grep -q "link-ck/step-1/model.safetensors: a link to a device" err.txt ||
   [ "$(readlink link-ck/step-1/model.safetensors)" != /dev/full ]; then
  echo "FAIL: --save over a link to /dev/full: $(head -c 300 err.txt)"
  failures=$((failures + 1))
fi
rm -rf link-ck
# --- what must work: --help; --overwrite; --lr 0 evaluates a checkpoint --------------------------
if ! "$T" --help >out.txt 2>err.txt || ! grep -q -- "--overwrite" out.txt ||
   ! grep -q -- "--resume DIR/step-N" out.txt; then
  echo "FAIL: --help: $(head -c 300 err.txt)"
  failures=$((failures + 1))
fi
cp -r in/earlier again
if ! "$T" --steps 1 --out again --overwrite --quiet >out.txt 2>err.txt ||
   ! grep -q '"step_seconds"' again/metrics.json; then
  echo "FAIL: --out with --overwrite: $(head -c 300 err.txt)"
  failures=$((failures + 1))
fi
rm -rf again
if ! "$T" --resume in/sgd-ck/step-2 --steps 3 --optimizer sgd --quiet >out.txt 2>err.txt; then
  echo "FAIL: --resume of an SGD checkpoint with --optimizer sgd: $(head -c 300 err.txt)"
  failures=$((failures + 1))
fi
if ! "$T" --resume in/good-ck/step-2 --steps 3 --lr 0 --quiet >out.txt 2>err.txt; then
  echo "FAIL: --resume with --lr 0: $(head -c 300 err.txt)"
  failures=$((failures + 1))
fi

echo "$cases cases, $failures failures"
[ "$failures" -eq 0 ]
