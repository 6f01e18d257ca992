#!/usr/bin/env python3
"""Bytes a generated project declares, read from its train.cpp: every stage
struct's buffers times the micro-batches the program allocates (kMicroBatches),
plus the parameters' per-element state (the harness's Param). A check of the
memory model without a GPU (docs/cost-model.md §5): the CUDA program's
allocation wrapper counts exactly these (and the runtime's workspaces), the
CPU program holds them in std::vector.

usage: static_buffers.py PROJECT [--backend cuda|cpu] [--json]
Prints per pipeline device: stage buffers, parameter state, total (bytes)."""
import argparse
import json
import re
import sys

CUDA = {"act_t": 2, "float": 4, "int32_t": 4, "unsigned char": 1, "char": 1}
CPU = {"float": 4, "int32_t": 4, "act_t": 4}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("project")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    try:
        src = open(a.project + "/train.cpp").read()
        plan = json.load(open(a.project + "/plan.json"))
    except OSError as e:
        sys.exit(f"static_buffers.py: {e}")
    cuda = "DeviceBuffer<" in src
    sizes = CUDA if cuda else CPU
    mbs = int(re.search(r"kMicroBatches = (\d+)", src).group(1))
    k = plan["knobs"] if "knobs" in plan else plan
    stages = {}
    for m in re.finditer(r"struct Stage(\d+) \{(.*?)\n\};", src, re.S):
        total = 0
        if cuda:
            pat = r"DeviceBuffer<([\w ]+)> \w+\{(\d+)\}"
        else:
            pat = r"std::vector<(\w+)> \w+ = std::vector<\w+>\((\d+)\)"
        for b in re.finditer(pat, m.group(2)):
            total += sizes.get(b.group(1), 4) * int(b.group(2))
        stages[int(m.group(1))] = total
    # Parameters: elements per rank from the plan's memory parts are what we
    # check, so count them from the program's own table instead.
    params = 0
    for p in re.finditer(r"Shape\{([\d, ]+)\}, (-?\d+),", src):
        n = 1
        for d in p.group(1).split(","):
            n *= int(d)
        params += n
    out = {"micro_batches": mbs, "stage_bytes_per_microbatch": stages,
           "stage_bytes": {s: mbs * b for s, b in stages.items()},
           "parameter_elements_whole_model": params}
    if a.json:
        print(json.dumps(out))
    else:
        for s, b in sorted(stages.items()):
            print(f"stage {s}: {b / 2**30:.3f} GiB per micro-batch, "
                  f"{mbs * b / 2**30:.3f} GiB for {mbs}")
        print(f"parameters (whole model, unsharded): {params}")


if __name__ == "__main__":
    main()
