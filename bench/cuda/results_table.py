#!/usr/bin/env python3
"""Result rows of the CUDA benchmark (bench/cuda/run.sh); no PyTorch needed.

  results_table.py autoddl-row BENCH_JSON METRICS_JSON WARMUP STATUS
      one JSON row for a generated program's run: tokens/s from its metrics.json step times
      after WARMUP steps (the program's own first-step exclusion is not relied on)
  results_table.py combine --pytorch ROWS... --autoddl ROWS... --info INFO --out FILE
      a cuda_vs_pytorch.json in issue 6 part 5's schema (e.g. bench/results/cuda/
      2026-12-01-gpt2-1gpu/cuda_vs_pytorch_1_and_2_gpus.json), from the rows
      of one run or several (e.g. a 1-GPU and a 2-GPU call)
  results_table.py markdown FILE...
      the one-GPU rows of cuda_vs_pytorch.json files as a markdown table: ours against the
      faster of PyTorch eager and torch.compile, MFU, the plan's predicted step over the measured
  results_table.py readme README.md [--write]
      README.md's tables between "<!-- speed-table FILE... -->" and "<!-- /speed-table -->",
      regenerated from their files: checked (exit 1 naming the line if stale) or rewritten

MFU: flops/token = 6*N + 12*L*T*C with N = every parameter but the position table (the tied
embedding once), over 989.5e12 bf16 FLOP/s per GPU (H200 SXM dense, NVIDIA datasheet); the
same definition as bench/cuda/pytorch_gpt2.py, whose rows carry their own.
"""
import argparse
import datetime
import json
import sys

VOCAB, SEQ, PEAK = 50257, 1024, 989.5e12
SHAPES = {"gpt2": (12, 768), "gpt2-medium": (24, 1024), "gpt2-large": (36, 1280),
          "gpt2-xl": (48, 1600)}
ORDER = ["gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl"]
# PyTorch mode -> the plan it is compared with, and which column it fills.
PT_PLAN = {"eager": ("single", "pytorch_eager_tokens_per_s"),
           "compile": ("single", "pytorch_compile_tokens_per_s"),
           "ddp": ("dp2", "pytorch_eager_tokens_per_s"),
           "ddp-compile": ("dp2", "pytorch_compile_tokens_per_s"),
           "tp": ("tp2", "pytorch_eager_tokens_per_s"),
           "tp-compile": ("tp2", "pytorch_compile_tokens_per_s")}


def flops_per_token(model, seq=SEQ):
    layers, c = SHAPES[model]
    n = VOCAB * c + layers * (12 * c * c + 13 * c) + 2 * c  # without the position table
    return 6 * n + 12 * layers * seq * c


def read_rows(path):
    rows = []
    if path:
        try:
            with open(path) as f:
                rows = [json.loads(l) for l in f if l.strip().startswith("{")]
        except OSError:
            pass
    return rows


def autoddl_row(bench_json, metrics_json, warmup, status):
    meta = json.load(open(bench_json))
    row = {k: meta.get(k) for k in ("model", "gpus", "plan", "micro_batch", "global_batch")}
    row["autoddl_tokens_per_s"] = None
    try:
        metrics = json.load(open(metrics_json)) if metrics_json else {}
    except (OSError, ValueError) as e:
        metrics = {}
        row["error"] = "no metrics.json: %s" % e
    steps = metrics.get("step_seconds", [])[int(warmup):]
    if status != "0":
        row["error"] = "status %s" % status
    elif steps:
        mean = sum(steps) / len(steps)
        tokens = meta["global_batch"] * meta.get("seq", SEQ)
        row["autoddl_tokens_per_s"] = round(tokens / mean, 1)
        row["autoddl_step_ms_mean"] = round(1e3 * mean, 3)
        row["autoddl_steps_timed"] = len(steps)
        if meta.get("predicted_step_s"):
            # issue 6 part 6: the calibrated prediction against the measured step
            row["predicted_step_ms"] = round(1e3 * meta["predicted_step_s"], 3)
            row["predicted_over_measured"] = round(meta["predicted_step_s"] / mean, 3)
    else:
        row.setdefault("error", "no step times after %s warm-up steps" % warmup)
    print(json.dumps(row))


def combine(args):
    pt = [r for path in args.pytorch for r in read_rows(path)]
    ad = [r for path in args.autoddl for r in read_rows(path)]
    info = open(args.info).read() if args.info else ""
    rows = {}

    def row_for(model, gpus, plan):
        key = (model, gpus, plan)
        if key not in rows:
            rows[key] = {"model": model, "gpus": gpus, "plan": plan,
                         "autoddl_tokens_per_s": None, "pytorch_eager_tokens_per_s": None,
                         "pytorch_compile_tokens_per_s": None, "mfu": None}
        return rows[key]

    versions = {}
    device = None
    for r in pt:
        plan, col = PT_PLAN.get(r.get("mode"), (None, None))
        if plan is None or r.get("model") not in SHAPES:
            continue
        row = row_for(r["model"], r.get("gpus", 1), plan)
        if "error" in r:
            row.setdefault("errors", []).append("pytorch %s: %s" % (r["mode"], r["error"]))
            continue
        row[col] = r["tokens_per_s"]
        row[col.replace("tokens_per_s", "mfu")] = r["mfu"]
        if "sdpa_backend" in r:  # the best attention backend of the suite's rows
            row[col.replace("tokens_per_s", "sdpa_backend")] = r["sdpa_backend"]
        row["micro_batch"] = r["micro_batch"]
        row.setdefault("global_batch", r["global_batch"])
        for k in ("torch", "cuda", "nccl"):
            if k in r:
                versions[k] = r[k]
        device = r.get("device", device)
    for r in ad:
        if r.get("model") not in SHAPES:
            continue
        row = row_for(r["model"], r["gpus"], r["plan"])
        if row["autoddl_tokens_per_s"] is not None and not r.get("autoddl_tokens_per_s"):
            continue  # a failed repeat does not hide a measured run
        row["autoddl_tokens_per_s"] = r.get("autoddl_tokens_per_s")
        row["autoddl_micro_batch"] = r.get("micro_batch")
        for k in ("predicted_step_ms", "predicted_over_measured"):
            if k in r:
                row[k] = r[k]
        row["global_batch"] = r.get("global_batch")
        if r.get("autoddl_tokens_per_s"):
            row["mfu"] = round(r["autoddl_tokens_per_s"] * flops_per_token(r["model"])
                               / (PEAK * r["gpus"]), 4)
        if "error" in r:
            row.setdefault("errors", []).append("autoddl: %s" % r["error"])
    for row in rows.values():
        a, e, c = (row["autoddl_tokens_per_s"], row["pytorch_eager_tokens_per_s"],
                   row["pytorch_compile_tokens_per_s"])
        row["autoddl_over_eager"] = round(a / e, 3) if a and e else None
        row["autoddl_over_compile"] = round(a / c, 3) if a and c else None
    # dp=2 scaling against the 1-GPU run of the same model and micro-batch; pp=2 against
    # PyTorch DDP on the same 2 GPUs and global batch (issue 6 part 5).
    for (model, gpus, plan), row in rows.items():
        single = rows.get((model, 1, "single"), {}).get("autoddl_tokens_per_s")
        if plan == "dp2" and single and row["autoddl_tokens_per_s"]:
            row["scaling_efficiency"] = round(row["autoddl_tokens_per_s"] / (2 * single), 3)
        ddp = rows.get((model, 2, "dp2"), {}).get("pytorch_eager_tokens_per_s")
        if plan == "pp2" and ddp:
            row["pytorch_ddp_tokens_per_s"] = ddp
            if row["autoddl_tokens_per_s"]:
                row["autoddl_over_ddp"] = round(row["autoddl_tokens_per_s"] / ddp, 3)
    notes = json.load(open(args.notes)) if args.notes else {}
    for key, note in notes.items():
        model, gpus, plan = key.split("/")
        if (model, int(gpus), plan) in rows:
            rows[(model, int(gpus), plan)]["note"] = note
    for line in info.splitlines():
        if "NVIDIA" in line and "," in line and device is None:
            device = line.split(",")[0].strip()
        if line.startswith("torch "):
            versions.setdefault("torch_line", line.strip())
        if "driver" not in versions and "," in line and "NVIDIA" in line:
            versions["driver"] = line.split(",")[1].strip()
        if line.startswith("Cuda compilation tools") or line.startswith("Build cuda"):
            versions.setdefault("nvcc", line.strip())
    doc = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "device": device,
        "versions": versions,
        "command": args.command,
        "workload": "GPT-2, seq 1024, vocab 50257, tied embeddings, bf16 autocast over fp32 "
                    "master weights, AdamW lr 6e-4 betas 0.9/0.95 wd 0.1, random tokens",
        "mfu_definition": "tokens/s * (6*N + 12*L*T*C) / (989.5e12 * gpus), N = parameters "
                          "without the position table; 'mfu' is autoddl's, the pytorch_*_mfu "
                          "columns PyTorch's (bench/cuda/pytorch_gpt2.py)",
        "rows": sorted(rows.values(), key=lambda r: (r["gpus"], ORDER.index(r["model"]),
                                                     r["plan"])),
    }
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print("%-12s %4s %-7s %12s %12s %12s %6s" % ("model", "gpus", "plan", "autoddl",
                                                 "pt eager", "pt compile", "mfu"))
    for r in doc["rows"]:
        fmt = lambda v: "-" if v is None else "%.0f" % v  # noqa: E731
        print("%-12s %4d %-7s %12s %12s %12s %6s" % (
            r["model"], r["gpus"], r["plan"], fmt(r["autoddl_tokens_per_s"]),
            fmt(r["pytorch_eager_tokens_per_s"]), fmt(r["pytorch_compile_tokens_per_s"]),
            "-" if r["mfu"] is None else "%.3f" % r["mfu"]))


def markdown(paths):
    """The one-GPU rows of each file, one table, a row per (file, model)."""
    out = ["| device, date | model | micro-batch | ours, tokens/s | MFU | best PyTorch "
           "(mode, SDPA) | tokens/s | ours / best | predicted / measured step |",
           "|---|---|---|---|---|---|---|---|---|"]
    for path in paths:
        doc = json.load(open(path))
        for r in doc["rows"]:
            if r.get("gpus") != 1 or r.get("plan") != "single" or not r.get("autoddl_tokens_per_s"):
                continue
            peers = [(r.get("pytorch_%s_tokens_per_s" % m), m,
                      r.get("pytorch_%s_sdpa_backend" % m)) for m in ("eager", "compile")]
            peers = [p for p in peers if p[0]]
            best = max(peers) if peers else (None, "-", None)
            ratio = "%.3f×" % (r["autoddl_tokens_per_s"] / best[0]) if best[0] else "-"
            pom = r.get("predicted_over_measured")
            out.append("| %s, %s | %s | %s | %.1fk | %.1f %% | %s | %s | %s | %s |" % (
                doc.get("device") or "-", doc.get("date") or "-", r["model"],
                r.get("autoddl_micro_batch") or r.get("micro_batch") or "-",
                r["autoddl_tokens_per_s"] / 1e3, 100 * r["mfu"],
                "%s, %s" % (best[1], best[2]) if best[2] else best[1],
                "%.1fk" % (best[0] / 1e3) if best[0] else "-", ratio,
                "%.3f" % pom if pom else "-"))
    return "\n".join(out) + "\n"


def readme(path, write):
    """Regenerates README's speed tables from the files their opening markers name."""
    lines = open(path).read().split("\n")
    result, i, stale = [], 0, []
    while i < len(lines):
        line = lines[i]
        result.append(line)
        i += 1
        if not line.startswith("<!-- speed-table ") or not line.endswith(" -->"):
            continue
        files = line[len("<!-- speed-table "):-len(" -->")].split()
        end = next((k for k in range(i, len(lines)) if lines[k] == "<!-- /speed-table -->"), None)
        if end is None:
            sys.exit("%s:%d: a speed table without its closing marker" % (path, i))
        try:
            table = markdown(files).rstrip("\n").split("\n")
        except (OSError, ValueError, KeyError) as e:
            sys.exit("%s:%d: the speed table's files: %s" % (path, i, e))
        if lines[i:end] != table:
            stale.append(i)
        result += table
        i = end
    if write:
        open(path, "w").write("\n".join(result))
    elif stale:
        sys.exit("%s:%d: the speed table differs from its files (bench/cuda/results_table.py "
                 "readme %s --write)" % (path, stale[0] + 1, path))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "autoddl-row":
        if len(sys.argv) != 6:
            sys.exit("usage: results_table.py autoddl-row BENCH_JSON METRICS_JSON WARMUP STATUS")
        autoddl_row(*sys.argv[2:6])
        return
    if len(sys.argv) > 2 and sys.argv[1] == "markdown":
        sys.stdout.write(markdown(sys.argv[2:]))
        return
    if len(sys.argv) in (3, 4) and sys.argv[1] == "readme":
        readme(sys.argv[2], sys.argv[3:] == ["--write"])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["combine"])
    # Several files each: the rows of separate runs (1-GPU and 2-GPU calls) combine into one.
    ap.add_argument("--pytorch", nargs="*", default=[])
    ap.add_argument("--autoddl", nargs="*", default=[])
    ap.add_argument("--info", default="")
    ap.add_argument("--command", default="bash bench/cuda/run.sh")
    ap.add_argument("--out", required=True)
    ap.add_argument("--notes", default="",
                    help='JSON {"model/gpus/plan": "note"}: a caveat kept with that row')
    combine(ap.parse_args())


if __name__ == "__main__":
    main()
