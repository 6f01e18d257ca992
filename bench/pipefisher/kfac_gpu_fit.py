#!/usr/bin/env python3
"""K-FAC's item prices fitted to a traced GPU run of a generated K-FAC program (issue 47 item 2).

A plan prices each K-FAC item (plan.json kfac.devices[].items[]: curvature, reduction, inversion;
kfac.devices[].precondition_s a step). A program run with --trace records the same items on the
GPU (CUDA events: "curv_A <layer>", "inv_G <layer>", "precond <layer>", backends/cuda/harness/
KfacRun.cpp). Per group (curvature, inversion, precondition) this script sums the traced seconds
of one refresh (the mean over the refresh steps after the first WARMUP steps) and the plan's
priced seconds of one refresh, and prints measured / priced: the factor `gpu.kfac_time_scale`
holds (docs/cluster-format.md; the preconditioning's as `precondition_bf16`). With --cluster IN
-o OUT it writes the cluster with the factors multiplied into those it had.

usage: kfac_gpu_fit.py PLAN TRACE [--warmup 2] [--cluster IN -o OUT --source TEXT]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from scriptio import fail, load  # noqa: E402

# A GPU plan (bf16 or fp8) prices its preconditioning as bf16 GEMMs (planner/Kfac.cpp), the
# CUDA program's default (a run with AUTODDL_KFAC_PRECOND=fp32 does not fit this key: refused).
GROUPS = {"curv": "curvature", "inv": "inversion", "precond": "precondition_bf16"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("plan")
    ap.add_argument("trace")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--cluster")
    ap.add_argument("-o")
    ap.add_argument("--source", default="")
    a = ap.parse_args()
    plan, trace = load(a.plan), load(a.trace)
    # The run's metrics.json beside its trace says which preconditioning ran: only bf16's fits
    # the precondition_bf16 key.
    metrics = os.path.join(os.path.dirname(os.path.abspath(a.trace)), "metrics.json")
    ran = load(metrics).get("info", {}).get("kfac.precondition") if os.path.exists(metrics) else None
    if ran not in (None, "bf16"):
        fail(f"{metrics}: the run preconditioned in {ran}, not bf16; fit a bf16 run "
             "(without AUTODDL_KFAC_PRECOND=fp32, not an fp32 build)")
    kfac = plan.get("kfac")
    if not kfac:
        fail(f"{a.plan}: not a K-FAC plan")
    if kfac["refresh_steps"] != 1:
        fail(f"{a.plan}: refresh interval {kfac['refresh_steps']}: fit on a K = 1 plan "
             "(plan --kfac-overhead 0), where every step refreshes")
    priced = {g: 0.0 for g in GROUPS.values()}
    for d in kfac["devices"]:
        for it in d["items"]:
            g = GROUPS.get(it["item"].split("_")[0])
            if g:
                priced[g] += it["end_s"] - it["start_s"]
        priced["precondition_bf16"] += d["precondition_s"]
    # Steps: a rank's compute row (tid 0) starts each with its first forward F0.
    events = sorted((e for e in trace.get("traceEvents", []) if e.get("ph") == "X"),
                    key=lambda e: e["ts"])
    starts = [e["ts"] for e in events if e["name"] == "F0" and e.get("tid", 0) == 0 and e["pid"] == 0]
    if len(starts) <= a.warmup + 1:
        fail(f"{a.trace}: {len(starts)} steps traced, need more than warmup {a.warmup} + 1")
    measured = {g: 0.0 for g in GROUPS.values()}
    steps = starts[a.warmup:-1]  # whole steps: from one F0 to the next
    for e in events:
        g = GROUPS.get(e["name"].split(" ")[0].split("_")[0])
        if g and steps[0] <= e["ts"] < starts[-1]:
            measured[g] += e["dur"] / 1e6
    n = len(steps)
    out = {}
    for g in GROUPS.values():
        m = measured[g] / n
        if priced[g] > 0 and m > 0:
            out[g] = round(m / priced[g], 4)
        print(f"{g:17s} measured {m * 1e3:9.3f} ms a refresh, priced {priced[g] * 1e3:9.3f} ms"
              + (f", factor {out[g]}" if g in out else ""))
    if a.cluster:
        if not a.o:
            fail("--cluster needs -o OUT")
        doc = load(a.cluster)
        old = doc["gpu"].get("kfac_time_scale", {})
        new = {g: round(old.get(g, 1.0) * f, 4) for g, f in out.items()}
        new["source"] = a.source or f"bench/pipefisher/kfac_gpu_fit.py {a.plan} {a.trace}"
        doc["gpu"]["kfac_time_scale"] = new
        with open(a.o, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        print(f"wrote {a.o}: kfac_time_scale {json.dumps({k: v for k, v in new.items() if k != 'source'})}")


if __name__ == "__main__":
    main()
