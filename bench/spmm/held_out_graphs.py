#!/usr/bin/env python3
"""Writes graphs of kinds the benchmark's suite does not generate, as files for
`spmm_bench --graph` (backends/common/GraphFile.h), to check the kernels away from the suite:

  ba-200k-m8.txt     Barabasi-Albert preferential attachment, 200,000 vertices, 8 edges each,
                     both directions (edge list): hubs grown, not drawn from a degree profile
  lap3d-64.mtx       3-D 7-point Laplacian on a 64^3 grid (Matrix Market, real symmetric, lower
                     triangle stored): a PDE matrix
  hubs-300k.txt      300,000 vertices with 8 uniform random out-edges each, plus 16 hub rows of
                     30,000 random columns (edge list): a few dense rows
  ws-300k-k16.txt    Watts-Strogatz ring lattice, 300,000 vertices, 16 neighbours, 10 % of the
                     edges rewired, both directions (edge list): banded with shortcuts

Plain Python (no numpy), seeded; about a minute. Usage: held_out_graphs.py OUT_DIR [SEED]
"""
import os
import random
import sys


def write_edges(path, arcs):
    with open(path, "w") as f:
        f.write(f"# {os.path.basename(path)}: {len(arcs)} arcs, 0-based 'u v'\n")
        f.write("".join(f"{u} {v}\n" for u, v in arcs))


def both_directions(edges):
    return edges + [(v, u) for u, v in edges]


def barabasi_albert(rng, n, m):
    # Each new vertex links to m endpoints drawn from all edge endpoints so far (degree-
    # proportional); the seed is a star of m + 1 vertices.
    edges = [(0, k) for k in range(1, m + 1)]
    ends = [x for e in edges for x in e]
    for u in range(m + 1, n):
        picks = [ends[rng.randrange(len(ends))] for _ in range(m)]
        for v in picks:
            edges.append((u, v))
            ends.extend((u, v))
    return both_directions(edges)


def laplacian3d(path, side):
    n = side**3
    lines = []
    for i in range(n):
        x, y, z = i % side, (i // side) % side, i // (side * side)
        lines.append(f"{i + 1} {i + 1} 6.0\n")
        for ok, off in ((x > 0, 1), (y > 0, side), (z > 0, side * side)):
            if ok:  # the lower triangle only: the file is symmetric
                lines.append(f"{i + 1} {i - off + 1} -1.0\n")
    with open(path, "w") as f:
        f.write("%%MatrixMarket matrix coordinate real symmetric\n")
        f.write(f"% 3-D 7-point Laplacian on a {side}^3 grid\n{n} {n} {len(lines)}\n")
        f.write("".join(lines))


def hubs(rng, n, per_row, hub_rows, hub_len):
    arcs = [(u, rng.randrange(n)) for u in range(n) for _ in range(per_row)]
    for h in rng.sample(range(n), hub_rows):
        arcs.extend((h, rng.randrange(n)) for _ in range(hub_len))
    return arcs


def watts_strogatz(rng, n, k, p):
    edges = []
    for u in range(n):
        for d in range(1, k // 2 + 1):
            v = rng.randrange(n) if rng.random() < p else (u + d) % n
            edges.append((u, v))
    return both_directions(edges)


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    out = sys.argv[1]
    rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 7)
    os.makedirs(out, exist_ok=True)
    write_edges(os.path.join(out, "ba-200k-m8.txt"), barabasi_albert(rng, 200_000, 8))
    laplacian3d(os.path.join(out, "lap3d-64.mtx"), 64)
    write_edges(os.path.join(out, "hubs-300k.txt"), hubs(rng, 300_000, 8, 16, 30_000))
    write_edges(os.path.join(out, "ws-300k-k16.txt"), watts_strogatz(rng, 300_000, 16, 0.1))


if __name__ == "__main__":
    main()
