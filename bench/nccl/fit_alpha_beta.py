#!/usr/bin/env python3
"""Fits t(S) = a + S / B to an allreduce_busbw.cu result, per op, for the cost model.

Usage: fit_alpha_beta.py RESULT.json
Least squares on relative error (weights 1/t^2), so small and large messages count alike.
For each op prints a (the fixed time: launch + per-step latency, seconds) and B expressed as
bus bandwidth (GB/s) after nccl-tests' factor, which is what the cluster file's link bandwidth
means (docs/cost-model.md). Also prints busbw at the largest message.
"""
import json
import sys

doc = json.load(open(sys.argv[1]))
n = doc["gpus"]
factor = {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n,
          "reduce_scatter": (n - 1) / n, "send_recv": 1.0}
out = {}
for op in factor:
    rows = [r for r in doc["results"] if r["op"] == op]
    if not rows:
        continue
    # Weighted normal equations for t = a + b*S with weights w = 1/t^2.
    sw = swx = swxx = swy = swxy = 0.0
    for r in rows:
        t = r["time_us"] * 1e-6
        x = float(r["bytes"])
        w = 1.0 / (t * t)
        sw += w; swx += w * x; swxx += w * x * x; swy += w * t; swxy += w * x * t
    det = sw * swxx - swx * swx
    a = (swxx * swy - swx * swxy) / det
    b = (sw * swxy - swx * swy) / det
    algbw = 1.0 / b / 1e9
    worst = max(abs(a + b * r["bytes"] - r["time_us"] * 1e-6) / (r["time_us"] * 1e-6) for r in rows)
    out[op] = {"fixed_time_us": round(a * 1e6, 3), "fit_busbw_GBps": round(algbw * factor[op], 1),
               "max_rel_error": round(worst, 3),
               "busbw_at_largest_GBps": rows[-1]["busbw_GBps"]}
print(json.dumps(out, indent=2))
