#!/usr/bin/env python3
"""The table of bench/gnn: our generated program against PyTorch Geometric, per graph and model.

Reads OUT/ours-MODEL-GRAPH/metrics.json (the program: step_seconds, info.heldout_accuracy),
OUT/pyg-GRAPH.json (pyg_peer.py) and STAGE/MODEL-GRAPH.plan.json (the planner's predicted step);
writes OUT/gnn.json (one record per graph and model) and prints the table. Our epoch is the
median step after WARMUP steps (one step trains the whole graph); the peer's the median epoch of
its winning variant after the same warm-up. speedup = peer epoch / our epoch; accuracy points =
100 x (ours - peer) held-out accuracy, both from the last training forward.
"""
import argparse
import json
import os
import statistics


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stage", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--graphs", nargs="+", required=True)
    ap.add_argument("--models", nargs="+", required=True)
    a = ap.parse_args()
    rows, lines = [], []
    head = (f"{'graph':14s} {'model':16s} {'ours ms':>8s} {'plan ms':>8s} {'PyG ms':>8s} "
            f"{'speedup':>8s} {'ours acc':>9s} {'PyG acc':>8s} {'d pts':>6s}  PyG variant")
    lines.append(head)
    for g in a.graphs:
        peer = load(os.path.join(a.out, f"pyg-{g}.json")) or {}
        for m in a.models:
            rec = {"graph": g, "model": m}
            ours = load(os.path.join(a.out, f"ours-{m}-{g}", "metrics.json"))
            plan = load(os.path.join(a.stage, f"{m}-{g}.plan.json"))
            if plan:
                rec["plan_step_ms"] = plan["predicted"]["step_time_s"] * 1e3
            if ours:
                steps = ours["step_seconds"]
                timed = steps[a.warmup:] if len(steps) > a.warmup else steps[-1:]
                info = ours.get("info", {})
                rec.update({
                    "ours_epoch_ms": statistics.median(timed) * 1e3,
                    "ours_epoch_ms_mean": statistics.mean(timed) * 1e3,
                    "ours_heldout_accuracy": float(info.get("heldout_accuracy", "nan")),
                    "ours_train_accuracy": float(info.get("accuracy", "nan")),
                    "ours_loss_first_last": [ours["loss"][0], ours["loss"][-1]],
                    "ours_steps": len(steps),
                    "ours_graph_entries": info.get("graph_adjacency_entries"),
                    "ours_peak_device_bytes": ours.get("peak_device_used_bytes"),
                })
            pm = peer.get("models", {}).get(m, {})
            run = pm.get("run")
            if run:
                rec.update({
                    "pyg_variant": pm["winner"], "pyg_epoch_ms": run["epoch_ms_median"],
                    "pyg_epoch_ms_mean": run["epoch_ms_mean"],
                    "pyg_heldout_accuracy": run["heldout_accuracy_last_forward"],
                    "pyg_heldout_accuracy_eval": run["heldout_accuracy_eval"],
                    "pyg_peak_memory_bytes": run["peak_memory_bytes"],
                })
            rec["pyg_variants"] = pm.get("variants", [])
            for k in ("torch", "torch_geometric", "torch_sparse", "device"):
                if k in peer:
                    rec["pyg_" + k] = peer[k]
            if "ours_epoch_ms" in rec and "pyg_epoch_ms" in rec:
                rec["speedup"] = rec["pyg_epoch_ms"] / rec["ours_epoch_ms"]
                rec["accuracy_points"] = 100 * (rec["ours_heldout_accuracy"]
                                                - rec["pyg_heldout_accuracy"])
            rows.append(rec)

            def f(key, fmt, width):
                return format(rec[key], fmt).rjust(width) if key in rec else "-".rjust(width)
            lines.append(f"{g:14s} {m:16s} {f('ours_epoch_ms', '.2f', 8)} "
                         f"{f('plan_step_ms', '.2f', 8)} {f('pyg_epoch_ms', '.2f', 8)} "
                         f"{f('speedup', '.2f', 8)} {f('ours_heldout_accuracy', '.4f', 9)} "
                         f"{f('pyg_heldout_accuracy', '.4f', 8)} {f('accuracy_points', '+.2f', 6)}"
                         f"  {rec.get('pyg_variant', '-')}")
    with open(os.path.join(a.out, "gnn.json"), "w") as fh:
        json.dump(rows, fh, indent=1)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
