#!/usr/bin/env python3
"""Sets every stage of a plan to recompute its first N layers (at most its own).

The plan's `recompute` knob (full or selective) says how; the planner itself recomputes only what
memory needs, which for the small test models is nothing.
Usage: recompute_layers.py PLAN.json N
"""
import json
import sys

path, n = sys.argv[1], int(sys.argv[2])
with open(path) as f:
    plan = json.load(f)
for stage in plan["stages"]:
    stage["recompute_layers"] = min(n, stage["layers"][1] - stage["layers"][0])
with open(path, "w") as f:
    json.dump(plan, f, indent=1)
