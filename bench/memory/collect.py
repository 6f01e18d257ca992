#!/usr/bin/env python3
"""Predicted against measured peak memory of the memory matrix (bench/memory/run_matrix.sh):
per project and rank, the plan's predicted allocation (pipeline_ranks[].memory.allocated of the
rank's pipeline device: what the program's allocation wrapper counts) against the run's
peak_memory_bytes, and the predicted total (with the estimated overheads) against
peak_device_used_bytes (cudaMemGetInfo at that peak; not compared where two ranks share the GPU:
the device then holds both). Writes one JSON document and prints the table.

usage: collect.py PROJECTS RESULTS [-o matrix.json] [--tolerance 0.10]
  PROJECTS: the staged projects folder (or make_matrix.sh's matrix.tar.gz)
  RESULTS:  run_matrix.sh's results folder (runs/<project>/metrics.json, status.json)
Exit 1 on bad input; 0 otherwise (the table is the product)."""
import argparse
import json
import os
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from scriptio import fail, load  # noqa: E402


def rows_of(projects, results, tol):
    status = {}
    sp = os.path.join(results, "status.json")
    if os.path.exists(sp):
        status = load(sp)
    measured = {}
    rows = []
    names = sorted(os.listdir(projects))
    benches = {n: load(os.path.join(projects, n, "bench.json")) for n in names}
    for n in names:
        mp = os.path.join(results, "runs", n, "metrics.json")
        if os.path.exists(mp):
            measured[n] = load(mp)
    for n in names:
        b = benches[n]
        row = {"project": n, "model": b["model"], "ranks": b["ranks"], "fix": b["fix"],
               "share_gpu": b.get("share_gpu", False), "status": status.get(n, "not run")}
        if b["status"] == "refused":
            row["status"] = "refused"
            row["why"] = b.get("why", "")
            rows.append(row)
            continue
        plan = load(os.path.join(projects, n, "plan.json"))
        src = b.get("same_program_as", n)
        m = measured.get(src)
        if src != n:
            row["same_program_as"] = src
            row["status"] = status.get(src, row["status"]) if m else row["status"]
        row["recompute_layers"] = [s.get("recompute_layers") for s in plan["stages"]]
        mesh = plan["mesh"]
        per = mesh["dp"] * mesh["tp"]
        ranks = []
        for r in range(b["ranks"]):
            dev = plan["pipeline_ranks"][r // per]["memory"]
            x = {"rank": r, "predicted_bytes": dev["allocated"],
                 "predicted_total_bytes": dev["total"]}
            if m:
                peak = m.get("peak_memory_bytes", [])
                used = m.get("peak_device_used_bytes", [])
                if r < len(peak) and peak[r] > 0:
                    x["measured_bytes"] = peak[r]
                    x["error"] = (dev["allocated"] - peak[r]) / peak[r]
                if r < len(used) and used[r] > 0 and not b.get("share_gpu"):
                    x["measured_used_bytes"] = used[r]
                    x["used_error"] = (dev["total"] - used[r]) / used[r]
            ranks.append(x)
        row["per_rank"] = ranks
        errs = [abs(x["error"]) for x in ranks if "error" in x]
        if errs:
            row["worst_error"] = max(errs)
            row["within_tolerance"] = max(errs) <= tol
        rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("projects")
    ap.add_argument("results")
    ap.add_argument("-o", "--output")
    ap.add_argument("--tolerance", type=float, default=0.10)
    a = ap.parse_args()
    projects = a.projects
    tmp = None
    if projects.endswith(".tar.gz"):
        tmp = tempfile.TemporaryDirectory()
        try:
            with tarfile.open(projects) as t:
                t.extractall(tmp.name, filter="data")
        except (OSError, tarfile.TarError) as e:
            fail(f"{projects}: {e}")
        projects = os.path.join(tmp.name, "projects")
    if not os.path.isdir(projects):
        fail(f"{projects}: not a folder of staged projects")
    rows = rows_of(projects, a.results, a.tolerance)
    measured = [r for r in rows if "worst_error" in r]
    within = [r for r in measured if r["within_tolerance"]]
    doc = {"tolerance": a.tolerance,
           "summary": {"projects": len(rows), "measured": len(measured),
                       "within_tolerance": len(within),
                       "refused": sum(r["status"] == "refused" for r in rows),
                       "oom": sum(r["status"] == "oom" for r in rows),
                       "worst_error": max((r["worst_error"] for r in measured), default=None)},
           "rows": rows}
    if a.output:
        with open(a.output, "w") as f:
            json.dump(doc, f, indent=1)
    print(f"{'project':<26} {'status':<22} {'rc layers':<9} {'rank':>4} {'pred GiB':>9} "
          f"{'meas GiB':>9} {'error':>8} {'used err':>9}")
    gib = 2 ** 30
    for r in rows:
        rc = ",".join(str(x) for x in r.get("recompute_layers", []))
        for x in r.get("per_rank", [{}]):
            pred = x.get("predicted_bytes")
            meas = x.get("measured_bytes")
            print(f"{r['project']:<26} {r['status'][:22]:<22} {rc:<9} {x.get('rank', ''):>4} "
                  f"{pred / gib if pred else float('nan'):>9.2f} "
                  f"{meas / gib if meas else float('nan'):>9.2f} "
                  f"{100 * x['error'] if 'error' in x else float('nan'):>+7.1f}% "
                  f"{100 * x['used_error'] if 'used_error' in x else float('nan'):>+8.1f}%")
    s = doc["summary"]
    worst = "-" if s["worst_error"] is None else f"{100 * s['worst_error']:.1f}%"
    print(f"{s['measured']} measured, {s['within_tolerance']} within "
          f"{100 * a.tolerance:.0f}%, {s['refused']} refused by the planner, {s['oom']} out of "
          f"memory; worst |error| {worst}")

if __name__ == "__main__":
    main()
