#!/usr/bin/env python3
"""PipeFisher's own table against our simulator (docs/pipefisher.md §5).

shared/reference/pipelines.md §4.7 derives, from pipe-fisher's profiled
per-layer costs (prof/bert-large_time_memory_v100.csv: micro-batch 32, seq 128;
T_F 10.4 ms, T_B 16.3 ms, curvature 27.4 ms per micro-batch, inversion 80.8 ms,
precondition 8.9 ms per layer) and its formulas with N = D micro-batches, the
utilisation before filling, the refresh ratio (t_inv + N t_kron) / bubble ~ K
and the precondition overhead for BERT-Base/Large under 1F1B and Chimera at
4/8/16 stages. This script:

  A. feeds the same BERT-Large per-layer costs to `autoddl simulate
     --pipefisher` (24 layers over D stages: every stage's times are L/D
     layers'; curvature and inversion split evenly between factors A and G) and
     reports the simulated utilisation before/after filling, K and the
     precondition overhead next to the reference's numbers. BERT-Base's
     per-layer costs are not in the reference, so Base has no part-A row;
  B. plans BERT-Base and BERT-Large with `autoddl plan --optimizer kfac`
     pinned to the same pipeline (tp=1, dp=1, pp=D, micro-batch 32, N = D,
     seq 128) on dgx-a100-hdr (no V100 preset exists), i.e. with the cost
     model's own layer costs, embedding and head included.

Usage: pipefisher_table.py path/to/autoddl [out_dir]
Writes out_dir/results.json and out_dir/results.md (default:
bench/results/pipefisher/<today>-bert-table/).
"""
import json
import os
import subprocess
import sys

REF = {  # pipelines.md §4.7 table: baseline util %, K ratio, precond overhead %
    ("bert-large", "1f1b"): {4: (57.1, 2.38, 4.8), 8: (53.3, 1.61, 2.2), 16: (51.6, 1.30, 1.1)},
    ("bert-large", "chimera"): {4: (76.6, 5.85, 6.4), 8: (68.6, 3.07, 2.9), 16: (65.2, 2.28, 1.4)},
    ("bert-base", "1f1b"): {4: (57.1, 2.40, 3.5), 8: (53.3, 1.62, 1.6), 16: (51.6, 1.30, 0.8)},
    ("bert-base", "chimera"): {4: (76.5, 5.85, 4.7), 8: (68.4, 3.06, 2.1), 16: (65.0, 2.26, 1.0)},
}
LARGE = dict(layers=24, f=10.4, b=16.3, kron=27.4, inv=80.8, prec=8.9)


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: {out.stderr.strip()}")
    return out.stdout


def part_a(autoddl):
    rows = []
    c = LARGE
    for sched in ("1f1b", "chimera"):
        for d in (4, 8, 16):
            per = c["layers"] / d
            j = json.loads(run([
                autoddl, "simulate", "--schedule", sched, "--stages", str(d),
                "--microbatches", str(d), "--fwd", f"{per * c['f']:g}",
                "--bwd", f"{per * c['b']:g}", "--pipefisher", "--kfac-layers", "1",
                "--curv", f"{per * c['kron'] / 2:g}", "--inv", f"{per * c['inv'] / 2:g}",
                "--precond", f"{per * c['prec']:g}", "--json"]))
            pf = j["pipefisher"]
            ref = REF[("bert-large", sched)][d]
            rows.append(dict(
                model="bert-large", schedule=sched, stages=d,
                util_first_order=100 * pf["utilisation_first_order"],
                util_kfac=100 * pf["utilisation"], K=pf["refresh_steps"],
                precond_overhead=100 * (pf["step_time_s"] - pf["first_order_step_time_s"])
                / pf["first_order_step_time_s"],
                unfitted=len(pf["unfitted"]),
                ref_util=ref[0], ref_K=ref[1], ref_precond=ref[2]))
    return rows


def part_b(autoddl):
    rows = []
    for model, layers in (("bert-base-uncased", 12), ("bert-large-uncased", 24)):
        for sched in ("1f1b", "chimera"):
            for d in (4, 8, 16):
                key = (model.split("-uncased")[0], sched)
                row = dict(model=model, schedule=sched, stages=d,
                           ref_util=REF[key][d][0], ref_K=REF[key][d][1])
                if d > layers:
                    row["note"] = f"{layers} layers < {d} stages"
                    rows.append(row)
                    continue
                p = json.loads(run([
                    autoddl, "plan", model, "--cluster", "dgx-a100-hdr", "--gpus", str(d),
                    "--global-batch", str(32 * d), "--seq", "128", "--optimizer", "kfac",
                    "--fix", f"tp=1,dp=1,pp={d},microbatch=32,schedule={sched},"
                    "recompute=none,zero=0", "--no-why", "--json"]))
                k = p["kfac"]
                row.update(util_first_order=100 * k["utilisation_first_order"],
                           util_kfac=100 * k["utilisation"], K=k["refresh_steps"],
                           step_overhead=100 * (p["predicted"]["step_time_s"]
                                                / k["first_order_step_time_s"] - 1),
                           unfitted=len(k["unfitted"]))
                rows.append(row)
    return rows


def main():
    autoddl = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    today = __import__("datetime").datetime.now(__import__("datetime").timezone.utc).strftime("%Y-%m-%d")
    out_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        here, "..", "results", "pipefisher", today + "-bert-table")
    os.makedirs(out_dir, exist_ok=True)
    a, b = part_a(autoddl), part_b(autoddl)
    json.dump({"reference_costs_bert_large_v100_ms": LARGE, "simulated_reference_costs": a,
               "planned_dgx_a100_hdr": b}, open(os.path.join(out_dir, "results.json"), "w"),
              indent=1)
    md = ["## A. BERT-Large, pipe-fisher's V100 per-layer costs through `simulate --pipefisher`", "",
          "| schedule | D | util first-order (ours / ref) | util with K-FAC | K (ours / ref ratio) "
          "| step overhead % (ours / ref precond) | items not fitting |", "|---|---|---|---|---|---|---|"]
    for r in a:
        md.append(f"| {r['schedule']} | {r['stages']} | {r['util_first_order']:.1f} / {r['ref_util']} "
                  f"| {r['util_kfac']:.1f} | {r['K']} / {r['ref_K']} "
                  f"| {r['precond_overhead']:.1f} / {r['ref_precond']} | {r['unfitted']} |")
    md += ["", "## B. `plan --optimizer kfac`, cost-model layer costs on dgx-a100-hdr "
           "(tp=1 dp=1 pp=D, micro-batch 32, N = D, seq 128)", "",
           "| model | schedule | D | util first-order (ours / ref) | util with K-FAC | K (ours / ref ratio) "
           "| step overhead % | items not fitting |", "|---|---|---|---|---|---|---|---|"]
    for r in b:
        if "note" in r:
            md.append(f"| {r['model']} | {r['schedule']} | {r['stages']} | n/a ({r['note']}) "
                      f"| | | | |")
            continue
        md.append(f"| {r['model']} | {r['schedule']} | {r['stages']} | {r['util_first_order']:.1f} / "
                  f"{r['ref_util']} | {r['util_kfac']:.1f} | {r['K']} / {r['ref_K']} "
                  f"| {r['step_overhead']:.1f} | {r['unfitted']} |")
    text = "\n".join(md) + "\n"
    open(os.path.join(out_dir, "results.md"), "w").write(text)
    print(text)


if __name__ == "__main__":
    main()
