#!/usr/bin/env python3
"""Extracts real networks from Debian's python3-graph-tool collection into compact files.

Reads graph_tool/collection/<name>.gt.gz (binary .gt format: magic, version, endianness,
comment, directed flag, uint64 N, then per vertex uint64 out-degree and neighbour ids of
1/2/4/8 bytes depending on N) without importing graph_tool, and writes
bench/spmm/data/<name>.agr:
  b"AGR1", uint32 N, uint32 directed, uint64 arcs, then per vertex:
  varint out-degree, varint gaps of its sorted, deduplicated out-neighbours.
Usage: extract_graph_tool.py <collection dir> <out dir> name...
"""
import gzip
import struct
import sys


def read_gt(path):
    data = gzip.open(path, "rb").read()
    magic = b"\xe2\x9b\xbe gt"
    if not data.startswith(magic):
        raise SystemExit(f"{path}: not a graph-tool binary file")
    pos = len(magic)
    _version, big_endian = data[pos], data[pos + 1]
    pos += 2
    end = ">" if big_endian else "<"
    (clen,) = struct.unpack_from(end + "Q", data, pos)
    pos += 8 + clen
    directed = data[pos] != 0
    pos += 1
    (n,) = struct.unpack_from(end + "Q", data, pos)
    pos += 8
    width, code = (1, "B") if n <= 0xFF else (2, "H") if n <= 0xFFFF else (4, "I") if n <= 0xFFFFFFFF else (8, "Q")
    adj = []
    for _ in range(n):
        (deg,) = struct.unpack_from(end + "Q", data, pos)
        pos += 8
        adj.append(list(struct.unpack_from(end + code * deg, data, pos)))
        pos += width * deg
    return n, directed, adj


def varint(x, out):
    while x >= 0x80:
        out.append((x & 0x7F) | 0x80)
        x >>= 7
    out.append(x)


def main():
    src, dst, names = sys.argv[1], sys.argv[2], sys.argv[3:]
    for name in names:
        n, directed, adj = read_gt(f"{src}/{name}.gt.gz")
        body = bytearray()
        arcs = 0
        for nbrs in adj:
            nbrs = sorted(set(nbrs))
            arcs += len(nbrs)
            varint(len(nbrs), body)
            prev = 0
            for v in nbrs:
                varint(v - prev, body)
                prev = v
        with open(f"{dst}/{name}.agr", "wb") as f:
            f.write(b"AGR1" + struct.pack("<IIQ", n, int(directed), arcs) + bytes(body))
        print(f"{name}: {n} vertices, {arcs} stored arcs, directed={directed}, {len(body)} bytes")


if __name__ == "__main__":
    main()
