#!/usr/bin/env bash
# A user's own graph (issue 50 item 4): the gcn-cora program trains on a graph read from files
# (--graph-adjacency/--graph-features/--graph-labels; docs/model-format.md "A graph from files"):
#  - a CSR .npz (written as np.savez writes it: stored ZIP64 members; and deflated, as
#    np.savez_compressed and scipy's save_npz write it: zlib, scripts/install-deps.sh) with .npy
#    features and labels, and the same adjacency as a symmetric Matrix Market .mtx and as an
#    edge_index .npz: each run trains, and metrics.json reports the nodes and entries it trained;
#  - malformed files (wrong sizes, indices out of range, a non-finite feature, a label outside the
#    classes, a missing file or flag, a truncated array): each one line naming the file and the
#    place, a non-zero exit, and no metrics.json.
# The files are written with Python's standard library (numpy's .npy/.npz layout, no numpy needed).
# Usage: graph_files.sh AUTODDL WORKDIR
set -uo pipefail
autoddl=$1 w=$2
rm -rf "$w" && mkdir -p "$w"
fail() { echo "FAIL: $*"; exit 1; }
train=""
# run OUT FLAGS...: the gcn-cora program on one rank (the e2e.accuracy.gcn build); after the first
# run, the binary alone (an MPI singleton), so that its own output is checked.
run() {
  local out=$1; shift
  if [ -z "$train" ]; then # the first run finds (or builds) the program
    "$autoddl" run gcn-cora --ranks 1 --global-batch 1 --steps 2 --out "$out" -- --quiet "$@" \
      > "$out.log" 2>&1 || return $?
    train=$(sed -n 's/^autoddl: mpirun -np 1 //p' "$out.log" | head -1)
    [ -x "$train" ] || fail "no program path in $out.log"
    return 0
  fi
  "$train" --steps 2 --out "$out" --quiet "$@" \
    > "$out.log" 2>&1
}
expect_error() { # expect_error WHAT PATTERN FLAGS...
  local what=$1 pattern=$2 rc=0; shift 2
  run "$w/bad" "$@" || rc=$?
  [ "$rc" -ge 1 ] && [ "$rc" -le 123 ] || { cat "$w/bad.log"; fail "$what: exit status $rc"; }
  [ "$(grep -c . "$w/bad.log")" -eq 1 ] || { cat "$w/bad.log"; fail "$what: not one line"; }
  grep -q -- "$pattern" "$w/bad.log" || { cat "$w/bad.log"; fail "$what: no \"$pattern\""; }
  [ ! -e "$w/bad/metrics.json" ] || fail "$what: metrics.json written"
  echo "ok: $what -> $(grep -m1 -- "$pattern" "$w/bad.log")"
  rm -rf "$w/bad" "$w/bad.log"
}

python3 - "$w" <<'PY' || fail "writing the graph files"
import array, random, struct, sys, zipfile
w = sys.argv[1]
N, F, K = 2708, 1433, 7

def npy(typecode, descr, shape, values):
    data = array.array(typecode, values).tobytes()
    head = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, "".join("%d," % d for d in shape) if len(shape) == 1 else ", ".join(map(str, shape)))
    head += " " * (63 - (len(head) + 10) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode() + data

def npz(path, members, method=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, "w", method) as z:  # as np.savez: ZIP64 members
        for name, blob in members.items():
            with z.open(name + ".npy", "w", force_zip64=True) as f:
                f.write(blob)

rng = random.Random(5)
labels = [rng.randrange(K) for _ in range(N)]
mu = [[rng.gauss(0, 1) for _ in range(F)] for _ in range(K)]
x = [mu[labels[i]][f] * 0.05 + rng.gauss(0, 1) for i in range(N) for f in range(F)]
edges = set()
while len(edges) < 5000:
    i, j = rng.randrange(N), rng.randrange(N)
    if i != j and (labels[i] == labels[j] or rng.random() < 0.2):
        edges.add((min(i, j), max(i, j)))
rows = [[] for _ in range(N)]
for i, j in edges:
    rows[i].append(j)
    rows[j].append(i)
indptr, indices = [0], []
for r in rows:
    indices += sorted(r)
    indptr.append(len(indices))
open(w + "/entries.txt", "w").write(str(len(indices) + N))  # + self loops
csr = {"indptr": npy("q", "<i8", [N + 1], indptr), "indices": npy("i", "<i4", [len(indices)], indices),
       "format": npy("B", "|S3", [], b"csr"), "shape": npy("q", "<i8", [2], [N, N])}
npz(w + "/adj.npz", csr)
src = [i for i, j in sorted(edges)] + [j for i, j in sorted(edges)]
dst = [j for i, j in sorted(edges)] + [i for i, j in sorted(edges)]
npz(w + "/edges.npz", {"edge_index": npy("q", "<i8", [2, len(src)], src + dst)})
with open(w + "/adj.mtx", "w") as f:
    f.write("%%%%MatrixMarket matrix coordinate pattern symmetric\n%% a comment\n%d %d %d\n"
            % (N, N, len(edges)))
    f.writelines("%d %d\n" % (j + 1, i + 1) for i, j in sorted(edges))
open(w + "/x.npy", "wb").write(npy("f", "<f4", [N, F], x))
open(w + "/y.npy", "wb").write(npy("q", "<i8", [N], labels))
# Malformed files.
open(w + "/y_short.npy", "wb").write(npy("q", "<i8", [N - 1], labels[:-1]))
open(w + "/y_range.npy", "wb").write(npy("q", "<i8", [N], labels[:5] + [K] + labels[6:]))
bad = list(x)
bad[3 * F + 4] = float("nan")
open(w + "/x_nan.npy", "wb").write(npy("f", "<f4", [N, F], bad))
open(w + "/x_narrow.npy", "wb").write(npy("f", "<f4", [N, F - 1], x[: N * (F - 1)]))
open(w + "/x_cut.npy", "wb").write(npy("f", "<f4", [N, F], x)[:-100])
far = dict(csr, indices=npy("i", "<i4", [len(indices)], indices[:7] + [N] + indices[8:]))
npz(w + "/adj_range.npz", far)
npz(w + "/adj_zip.npz", csr, zipfile.ZIP_DEFLATED)
mtx = open(w + "/adj.mtx").read().splitlines()
open(w + "/adj_size.mtx", "w").write("\n".join(mtx[:2] + ["%d %d %d" % (N + 1, N + 1, len(edges))] + mtx[3:]) + "\n")
open(w + "/adj_short.mtx", "w").write("\n".join(mtx[:-1]) + "\n")
open(w + "/adj_far.mtx", "w").write("\n".join(mtx[:5] + ["%d 1" % (N + 1)] + mtx[6:]) + "\n")
PY
echo "ok: graph files written"

entries=$(cat "$w/entries.txt")
for adj in adj.npz adj_zip.npz edges.npz adj.mtx; do
  run "$w/good_$adj" --graph-adjacency "$w/$adj" --graph-features "$w/x.npy" \
    --graph-labels "$w/y.npy" || { cat "$w/good_$adj.log"; fail "run on $adj"; }
  python3 - "$w/good_$adj/metrics.json" "$entries" "$w/$adj" <<'PY' || fail "metrics of $adj"
import json, sys
info = json.load(open(sys.argv[1]))["info"]
got = (info["graph_nodes"], info["graph_adjacency_entries"], info["graph_source"])
print("trained", got)
sys.exit(0 if got == ("2708", sys.argv[2], sys.argv[3]) else 1)
PY
  echo "ok: trained on $adj"
done

ok_x=(--graph-features "$w/x.npy") ok_y=(--graph-labels "$w/y.npy") ok_a=(--graph-adjacency "$w/adj.npz")
expect_error "no label flag" "--graph-labels: missing" "${ok_a[@]}" "${ok_x[@]}"
expect_error "missing label file" "$w/nothere.npy" "${ok_a[@]}" "${ok_x[@]}" --graph-labels "$w/nothere.npy"
expect_error "short labels" "y_short.npy: expected shape \[2708\], got \[2707\]" "${ok_a[@]}" "${ok_x[@]}" --graph-labels "$w/y_short.npy"
expect_error "label outside the classes" "y_range.npy: entry 5: label 7 outside \[0, 7)" "${ok_a[@]}" "${ok_x[@]}" --graph-labels "$w/y_range.npy"
expect_error "non-finite feature" "x_nan.npy: row 3, feature 4: non-finite" "${ok_a[@]}" "${ok_y[@]}" --graph-features "$w/x_nan.npy"
expect_error "narrow features" "x_narrow.npy: expected shape \[2708, 1433\], got \[2708, 1432\]" "${ok_a[@]}" "${ok_y[@]}" --graph-features "$w/x_narrow.npy"
expect_error "truncated features" "x_cut.npy: holds" "${ok_a[@]}" "${ok_y[@]}" --graph-features "$w/x_cut.npy"
expect_error "column out of range" "adj_range.npz: member indices.npy: entry 7: index ([0-9]*, 2708) out of range" "${ok_x[@]}" "${ok_y[@]}" --graph-adjacency "$w/adj_range.npz"
expect_error "mtx of other nodes" "adj_size.mtx: a 2709 x 2709 matrix, the model has 2708 nodes" "${ok_x[@]}" "${ok_y[@]}" --graph-adjacency "$w/adj_size.mtx"
expect_error "mtx entry out of range" "adj_far.mtx:6: entry (2709, 1) outside the 2708 x 2708 matrix" "${ok_x[@]}" "${ok_y[@]}" --graph-adjacency "$w/adj_far.mtx"
expect_error "mtx short of entries" "adj_short.mtx: ends after 4999 of the 5000 declared entries" "${ok_x[@]}" "${ok_y[@]}" --graph-adjacency "$w/adj_short.mtx"
echo "PASS"
