#!/usr/bin/env python3
"""The bytes a generated project declares against what its plan predicts
(docs/cost-model.md §5.3), without running it: each stage struct's buffers
(train.cpp, `struct StageN`) times the activation sets the program allocates
for it (kSets[N]: the micro-batches its schedule keeps in flight; kMicroBatches
in projects from before the sets), summed per pipeline device from plan.json's
stage map,
against pipeline_ranks[].memory.activations (CUDA project); for a one-rank
CPU project, the same plus the fp32 parameter state (16 bytes an element of
the program's parameter table) against memory.host. A plan that recomputes
declares its layer struct's buffers as `held != LayerBuffers::X ? n : 0`: a
recomputed layer (`Stage0Layer(LayerBuffers::Kept)` in the layers' array)
holds those kept, and each stage's one scratch layer
(`stageN_scratch.emplace_back(LayerBuffers::Scratch)`, not per micro-batch)
the others. Members declared SetShared<T> (the gradients inside a stage,
backends/common/harness/StageSets.h) are one copy for all of a stage's sets.

usage: declared_buffers.py PROJECT [--tolerance F] [--json]
Exit 1 when a device's error exceeds the tolerance (default 0.01), or on bad
input (one line naming the file)."""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from scriptio import fail  # noqa: E402

CUDA = {"act_t": 2, "float": 4, "int32_t": 4}
CPU = {"float": 4, "int32_t": 4}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("project")
    ap.add_argument("--tolerance", type=float, default=0.01)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    try:
        src = open(a.project + "/train.cpp").read()
        plan = json.load(open(a.project + "/plan.json"))
    except (OSError, ValueError) as e:
        fail(f"{a.project}: {e}")
    cuda = "DeviceBuffer<" in src
    sizes = CUDA if cuda else CPU
    mb = re.search(r"kMicroBatches = (\d+)", src)
    if not mb:
        fail(f"{a.project}/train.cpp: no kMicroBatches")
    mbs = int(mb.group(1))
    held = r"(?:held != LayerBuffers::(\w+) \? )?"
    pat = (r"DeviceBuffer<(\w+)> \w+\{" + held + r"(\d+)" if cuda else
           r"std::vector<(\w+)> \w+ = std::vector<\w+>\(" + held + r"(\d+)")
    shared_pat = r"SetShared<(\w+)> \w+\{" + held + r"(\d+)"
    def buffer_bytes(body, holds="All", shared=False):
        # `held != LayerBuffers::X ? n : 0`: n unless the struct holds X.
        # SetShared members: one copy for all of the stage's sets.
        return sum(sizes[b.group(1)] * int(b.group(3))
                   for b in re.finditer(shared_pat if shared else pat, body)
                   if b.group(2) != holds)
    # A stage's identical layers are one struct StageNLayer held as an array
    # `StageNLayer layers[n]` inside struct StageN (the layer loop); with
    # recomputation its first entries are StageNLayer(LayerBuffers::Kept).
    layer_body = {int(m.group(1)): m.group(2) for m in
                  re.finditer(r"struct Stage(\d+)Layer \{(.*?)\n\};", src, re.S)}
    # Per stage, a set's own bytes; its shared bytes (once per stage) and
    # its scratch's (one layer, once per stage) apart.
    per_stage, shared, scratch = {}, {}, {}
    m = re.search(r"constexpr int kSets\[kStages\] = \{([\d, ]*)\};", src)
    sets = dict(enumerate(int(n) for n in m.group(1).split(","))) if m else {}
    for m in re.finditer(r"struct Stage(\d+) \{(.*?)\n\};", src, re.S):
        k = int(m.group(1))
        for into, sh in ((per_stage, False), (shared, True)):
            into[k] = buffer_bytes(m.group(2), shared=sh)
            for n in re.finditer(
                    r"Stage%dLayer layers\[(\d+)\]( = \{.*?\})?;" % k,
                    m.group(2)):
                kept = (n.group(2) or "").count("LayerBuffers::Kept")
                into[k] += (int(n.group(1)) - kept) * buffer_bytes(
                    layer_body[k], shared=sh)
                into[k] += kept * buffer_bytes(layer_body[k], "Kept", sh)
        if re.search(r"stage%d_scratch\.emplace_back" % k, src):
            scratch[k] = sum(buffer_bytes(layer_body[k], "Scratch", sh)
                             for sh in (False, True))
    # Stages whose code differs in numbers only share one struct, a template
    # over the stage (codegen/emit/StageTypes.cpp): kStageFunctions' row k
    # names stage k's instance, stage<r>_forward<k>, of struct Stage<r>.
    for m in re.finditer(r"\{stage(\d+)_forward<(\d+)>,", src):
        per_stage[int(m.group(2))] = per_stage[int(m.group(1))]
        shared[int(m.group(2))] = shared[int(m.group(1))]
    if plan["schedule"]["kind"] == "chimera":
        fail(f"{a.project}: Chimera's two pipelines are not checked here")
    rows = []
    for d, rank in enumerate(plan["pipeline_ranks"]):
        mine = [s["stage"] for s in plan["stages"] if s["device"] == d]
        declared = sum(sets.get(k, mbs) * per_stage[k] + shared[k] +
                       scratch.get(k, 0) for k in mine)
        mem = rank["memory"]
        if cuda:
            predicted = mem["activations"]
        else:
            if len(plan["pipeline_ranks"]) * plan["mesh"]["dp"] * \
                    plan["mesh"]["tp"] != 1:
                fail(f"{a.project}: the CPU check takes one-rank plans")
            params = parameter_elements(src)
            declared += 16 * params
            predicted = mem["host"]
        err = (predicted - declared) / declared if declared else 0.0
        rows.append({"device": d, "declared_bytes": declared,
                     "activation_sets": [sets.get(k, mbs) for k in mine],
                     "predicted_bytes": predicted, "error": err})
    if a.json:
        print(json.dumps(rows))
    else:
        for r in rows:
            print(f"device {r['device']}: declared {r['declared_bytes'] / 2**30:.3f} GiB, "
                  f"predicted {r['predicted_bytes'] / 2**30:.3f} GiB, "
                  f"error {100 * r['error']:+.2f}%")
    bad = [r for r in rows if abs(r["error"]) > a.tolerance]
    if bad:
        fail(f"{a.project}: device {bad[0]['device']} predicted "
             f"{bad[0]['predicted_bytes']:.0f} bytes, the project declares "
             f"{bad[0]['declared_bytes']:.0f} ({100 * bad[0]['error']:+.2f}%)")


def parameter_elements(src):
    """Elements of the program's parameter table: each specs.push_back's
    Shape, times the trip count of the layer loop it sits in."""
    total, trips = 0, 1
    for line in src.splitlines():
        loop = re.match(r"\s*for \(size_t l = (\d+); l < (\d+); \+\+l\) \{", line)
        if loop:
            trips = int(loop.group(2)) - int(loop.group(1))
            continue
        spec = re.search(r"specs\.push_back\(.*Shape\{([\d, ]+)\}, -?\d+, \"", line)
        if spec:
            total += trips * eval_shape(spec.group(1))
        elif trips != 1 and re.match(r"\s*\}\s*$", line):
            trips = 1  # the loop's closing brace
    return total


def eval_shape(text):
    n = 1
    for d in text.split(","):
        n *= int(d)
    return n


if __name__ == "__main__":
    main()
