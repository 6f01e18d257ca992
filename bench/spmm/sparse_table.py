#!/usr/bin/env python3
"""Writes the measured sparse-kernel throughput table (gpu.sparse_gflops, docs/cluster-format.md
"Sparse throughput") into the H200 cluster presets from the benchmark's result file.

Per (op, precision, feature width): the median GFLOP/s of our kernels over the benchmark's
graphs (the "cases" of bench/results/spmm/2026-12-01-suite/sparse_h200.json, the default): "spmm"
and "sddmm" of the faster format variant per case, "spmm.hybrid", "spmm.all-tc", ... of each
variant (its time in variant_ms; a graph with one variant gives both the same). The cost model
prices spmm/sddmm at the rate of the variant the decider picks (docs/cost-model.md "Sparse ops").
Re-running it after a new benchmark run (give its result file) rewrites the table.

Usage: bench/spmm/sparse_table.py [RESULT_JSON] [CLUSTER_JSON...]
"""
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULT = os.path.join(ROOT, "bench/results/spmm/2026-12-01-suite/sparse_h200.json")
CLUSTERS = [os.path.join(ROOT, "examples/clusters", f + ".json")
            for f in ("h200x2-nvlink", "h200-calibrated", "dgx-h200-ndr")]
KEY = '"sparse_gflops": {'
OPS = ("spmm", "sddmm", "spmm.hybrid", "spmm.all-tc", "sddmm.hybrid", "sddmm.all-tc")


def table(result_path):
    doc = json.load(open(result_path))
    rates = {}
    for case in doc["cases"]:
        key = (case["op"], case["precision"], int(case["width"]))
        rates.setdefault(key, []).append(float(case["gflops"]))
        flops = 2.0 * case["nnz"] * case["width"]
        ms = case["variant_ms"]
        for variant in ("hybrid", "all-tc"):
            key = (case["op"] + "." + variant, case["precision"], int(case["width"]))
            rates.setdefault(key, []).append(flops / ms.get(variant, ms["hybrid"]) / 1e6)
    out = {}
    for (op, prec, width), values in sorted(rates.items()):
        out.setdefault(op, {}).setdefault(prec, []).append(
            [width, round(statistics.median(values), 1)])
    graphs = sorted({c["graph"] for c in doc["cases"]})
    source = ("measured: {} ({}, {}), median GFLOP/s of our W8 kernels over {} graphs per op, "
              "precision and width (FLOPs 2*nnz*width); written by bench/spmm/sparse_table.py"
              .format(os.path.relpath(result_path, ROOT), doc["date"], doc["device"]["name"],
                      len(graphs)))
    return out, source


def block(tab, source, indent):
    """The table as JSON text at `indent`, one precision per line."""
    pad, inner = " " * indent, " " * (indent + 2)
    lines = [pad + KEY]
    for op in OPS:
        if op not in tab:
            continue
        lines.append(inner + json.dumps(op) + ": {")
        precs = sorted(tab[op], key=lambda p: ("fp32", "tf32", "fp16", "bf16").index(p))
        for i, prec in enumerate(precs):
            comma = "," if i + 1 < len(precs) else ""
            lines.append(inner + "  " + json.dumps(prec) + ": " + json.dumps(tab[op][prec]) + comma)
        lines.append(inner + "},")
    lines.append(inner + '"source": ' + json.dumps(source))
    lines.append(pad + "},")
    return lines


def update(path, tab, source):
    lines = open(path).read().split("\n")
    # Drop an existing table (written by this script: it ends at its own indent's "},").
    for i, line in enumerate(lines):
        if line.strip() == KEY:
            indent = len(line) - len(line.lstrip())
            end = next(j for j in range(i + 1, len(lines)) if lines[j] == " " * indent + "},")
            del lines[i:end + 1]
            break
    # Insert it after the gpu's kernel_launch_us.
    at = next(i for i, line in enumerate(lines) if line.strip().startswith('"kernel_launch_us"'))
    indent = len(lines[at]) - len(lines[at].lstrip())
    lines[at + 1:at + 1] = block(tab, source, indent)
    text = "\n".join(lines)
    json.loads(text)  # still valid JSON
    open(path, "w").write(text)


def main():
    result = sys.argv[1] if len(sys.argv) > 1 else RESULT
    clusters = sys.argv[2:] or CLUSTERS
    tab, source = table(result)
    for path in clusters:
        update(path, tab, source)
        print("wrote gpu.sparse_gflops of", os.path.relpath(path, ROOT))
    for op, precs in tab.items():
        for prec, pts in precs.items():
            print(f"  {op:5} {prec}: " + ", ".join(f"N={w} {g:.0f}" for w, g in pts))


if __name__ == "__main__":
    main()
