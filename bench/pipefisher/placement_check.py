#!/usr/bin/env python3
"""Where a K-FAC program ran its items against where its plan put them (issue 47 item 1).

The plan records each K-FAC item of each pipeline device at an instruction slot of the device's
schedule list (plan.json kfac.devices[].items[]: item, layer, microbatch, step of the refresh
cycle, slot, start_s; docs/plan-format.md). A program run with --trace writes, per rank, its
instructions (F<mb>, B<mb>, W<mb>) and its K-FAC items ("curv_A h.0.attn.qkv", ...) in the order
they ran (a filling thread's items by their start among the instructions). This script splits
each rank's trace into steps (a step is the device's whole list of
instructions), takes the first refresh cycle (steps 0 .. K_d - 1), counts for every traced item
the instructions that ran before it in its step (its executed slot) and pairs the items with the
plan's in order (per device, cycle step, item kind and layer). It reports the items matched,
missing and extra, the largest slot deviation (executed - planned), and each item's start within
its step beside the plan's (the plan is priced for its cluster, so times compare as fractions of
the step, not as seconds).

usage: placement_check.py PLAN TRACE [--json OUT] [--max-slot-deviation N]
Exit 1 on a deviation above the bound (default 0), a missing item, or bad input (one line naming
the file).
"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from scriptio import fail, load  # noqa: E402

INSTRUCTION = re.compile(r"^[FBW]\d+$")


def device_of_rank(plan, rank):
    mesh = plan["mesh"]
    order = mesh.get("order", "pp,dp,tp").split(",")
    sizes = [mesh[a] for a in order]
    coord = {}
    for axis, size in zip(reversed(order), reversed(sizes)):
        coord[axis] = rank % size
        rank //= size
    return coord["pp"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("plan")
    ap.add_argument("trace")
    ap.add_argument("--json")
    ap.add_argument("--max-slot-deviation", type=int, default=0)
    a = ap.parse_args()
    plan, trace = load(a.plan), load(a.trace)
    kfac = plan.get("kfac")
    if not kfac:
        fail(f"{a.plan}: not a K-FAC plan (no kfac)")
    names = [l["name"] for l in kfac["layers"]]
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    if not events:
        fail(f"{a.trace}: no trace events (run the program with --trace)")
    by_rank = {}
    # Per rank (pid): its compute row (tid 0) and a K-FAC filling thread's (tid >= 2, placed
    # by start among the instructions); tid 1 is communication (a reduction's collective).
    for e in events:
        if e.get("tid", 0) != 1:
            by_rank.setdefault(e["pid"], []).append(e)
    rows, worst, missing, extra = [], 0, 0, 0
    for rank, evs in sorted(by_rank.items()):
        evs.sort(key=lambda e: e["ts"])
        device = device_of_rank(plan, rank)
        dplan = next((d for d in kfac["devices"] if d["device"] == device), None)
        if dplan is None:
            fail(f"{a.plan}: no kfac.devices entry for pipeline device {device}")
        K = dplan.get("refresh_steps", kfac["refresh_steps"])
        # A step is the device's whole list: the instruction names repeat with its length.
        instr = [e["name"] for e in evs if INSTRUCTION.match(e["name"])]
        n_instr = next((p for p in range(1, len(instr) + 1)
                        if len(instr) % p == 0 and
                        all(instr[i] == instr[i % p] for i in range(len(instr)))), 0)
        if not n_instr:
            fail(f"{a.trace}: rank {rank} traced no instruction (F<mb>, B<mb>, W<mb>)")
        # An item's executed slot: the instructions of its step that ran before it. Between two
        # steps, items before the step's end (its preconditioning) are the step's last slot (the
        # forced ones), those after it the next step's slot 0.
        steps, pending, in_step, ended = [], [], n_instr, False
        for e in evs:
            name = e["name"]
            if INSTRUCTION.match(name):
                if in_step == n_instr:
                    steps.append({"start": e["ts"], "items": pending})
                    pending, in_step, ended = [], 0, False
                in_step += 1
                continue
            kind, _, layer = name.partition(" ")
            if kind == "precond" and in_step == n_instr:
                ended = True
            if kind not in ("curv_A", "curv_G", "reduce_A", "reduce_G", "inv_A", "inv_G"):
                continue
            if steps and not (in_step == n_instr and ended):
                steps[-1]["items"].append((kind, layer, in_step, e["ts"] - steps[-1]["start"]))
            else:  # before the next step's first instruction
                pending.append((kind, layer, 0, 0.0))
        if len(steps) < K:
            fail(f"{a.trace}: rank {rank} ran {len(steps)} steps, fewer than its refresh cycle of {K}")
        planned = {}
        for it in dplan["items"]:
            if it["item"] == "precond":
                continue
            key = (it["step"], it["item"], names[it["layer"]])
            planned.setdefault(key, []).append(it)
        traced = {}
        for s in range(K):
            for kind, layer, slot, t in steps[s]["items"]:
                traced.setdefault((s, kind, layer), []).append((slot, t))
        for key in sorted(set(planned) | set(traced)):
            p = sorted(planned.get(key, []), key=lambda it: (it["slot"], it.get("microbatch", -1)))
            t = traced.get(key, [])
            missing += max(0, len(p) - len(t))
            extra += max(0, len(t) - len(p))
            for it, (slot, dt) in zip(p, t):
                dev = slot - it["slot"]
                worst = max(worst, abs(dev))
                rows.append({"rank": rank, "device": device, "step": key[0], "item": key[1],
                             "layer": key[2], "microbatch": it.get("microbatch", -1),
                             "planned_slot": it["slot"], "executed_slot": slot,
                             "slot_deviation": dev, "planned_start_s": it["start_s"],
                             "executed_start_in_step_s": dt / 1e6})
    summary = {"items": len(rows), "missing": missing, "extra": extra,
               "max_abs_slot_deviation": worst}
    print(f"K-FAC placement: {len(rows)} items matched, {missing} missing, {extra} extra; "
          f"largest slot deviation {worst}")
    if a.json:
        json.dump({"summary": summary, "items": rows}, open(a.json, "w"), indent=1)
    if worst > a.max_slot_deviation or missing:
        sys.exit(1)


if __name__ == "__main__":
    main()
