#!/usr/bin/env bash
# autoddl-graph (tools/autoddl-graph) writes the graph a graph model's program generates: on
# gcn-cora's sizes and the programs' default seed, its files are well-formed (.npz members with
# the right CRCs, .npy headers with the right shapes, read with Python's standard library) and the
# gcn-cora program trained on them (--graph-adjacency/--graph-features/--graph-labels) equals the
# program on its own generated graph, loss for loss (to 1e-7) and in both accuracies; bad flags are one line.
# Usage: graph_tool.sh AUTODDL AUTODDL_GRAPH WORKDIR
set -uo pipefail
autoddl=$1 tool=$2 w=$3
rm -rf "$w" && mkdir -p "$w"
fail() { echo "FAIL: $*"; exit 1; }
"$tool" --nodes 2708 --nnz 13264 --features 1433 --classes 7 -o "$w/g" > "$w/tool.log" 2>&1 ||
  { cat "$w/tool.log"; fail "autoddl-graph"; }
cat "$w/tool.log"
python3 - "$w/g" <<'PY' || fail "the files"
import ast, json, struct, sys, zipfile
d = sys.argv[1]
def header(blob):
    assert blob[:6] == b"\x93NUMPY", "magic"
    n = struct.unpack("<H", blob[8:10])[0]
    assert (10 + n) % 64 == 0, "header padding"
    return ast.literal_eval(blob[10:10 + n].decode()), blob[10 + n:]
z = zipfile.ZipFile(d + "/adjacency.npz")
assert z.testzip() is None, "a member's CRC"
m = {n[:-4]: header(z.read(n)) for n in z.namelist()}
(hp, indptr), (hi, indices) = m["indptr"], m["indices"]
assert hp["shape"] == (2709,) and hp["descr"] == "<i4", hp
assert hi["shape"] == (13264,) and hi["descr"] == "<i4", hi
assert struct.unpack("<2q", m["shape"][1]) == (2708, 2708)
assert m["format"][1] == b"csr"
ptr = struct.unpack("<2709i", indptr)
assert ptr[0] == 0 and ptr[-1] == 13264 and all(a <= b for a, b in zip(ptr, ptr[1:]))
hx, _ = header(open(d + "/features.npy", "rb").read())
hy, y = header(open(d + "/labels.npy", "rb").read())
assert hx["shape"] == (2708, 1433) and hx["descr"] == "<f4", hx
assert hy["shape"] == (2708,) and set(struct.unpack("<2708i", y)) <= set(range(7)), hy
assert json.load(open(d + "/graph.json"))["adjacency_entries"] == 13264
print("ok: files well-formed")
PY
"$autoddl" run gcn-cora --ranks 1 --global-batch 1 --steps 3 --out "$w/generated" -- --quiet \
  > "$w/generated.log" 2>&1 || { cat "$w/generated.log"; fail "generated run"; }
train=$(sed -n 's/^autoddl: mpirun -np 1 //p' "$w/generated.log" | head -1)
[ -x "$train" ] || fail "no program path in $w/generated.log"
"$train" --steps 3 --out "$w/files" --quiet --graph-adjacency "$w/g/adjacency.npz" \
  --graph-features "$w/g/features.npy" --graph-labels "$w/g/labels.npy" > "$w/files.log" 2>&1 ||
  { cat "$w/files.log"; fail "run on the files"; }
python3 - "$w/generated/metrics.json" "$w/files/metrics.json" <<'PY' || fail "files != generated"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
keys = ("accuracy", "heldout_accuracy", "graph_nodes", "graph_adjacency_entries")
print("generated", a["loss"], [a["info"][k] for k in keys])
print("files    ", b["loss"], [b["info"][k] for k in keys])
# Equal up to float rounding (the reader's CSR is built apart from the generator's).
same = all(abs(x - y) <= 1e-7 * abs(x) for x, y in zip(a["loss"], b["loss"]))
sys.exit(0 if same and all(a["info"][k] == b["info"][k] for k in keys) else 1)
PY
echo "ok: the program trains the files as its own generated graph"
# "FLAGS|EXPECTED": the flags are split into words on purpose (no quoting inside them).
# shellcheck disable=SC2089,SC2090
for bad in "--like cora -o $w/x|--like: unknown graph 'cora'" "--nodes 5 -o $w/x|--nnz: required" \
  "--like reddit|-o: the output folder is required" "--nodes -3 -o $w/x|--nodes: '-3' is not"; do
  rc=0; "$tool" ${bad%%|*} > "$w/bad.log" 2>&1 || rc=$?
  [ "$rc" = 1 ] && [ "$(grep -c . "$w/bad.log")" = 1 ] && grep -qF -- "${bad#*|}" "$w/bad.log" ||
    { cat "$w/bad.log"; fail "bad flags ${bad%%|*}: exit $rc"; }
  [ ! -e "$w/x" ] || fail "${bad%%|*} wrote $w/x"
  echo "ok: $(cat "$w/bad.log")"
done
echo "PASS"
