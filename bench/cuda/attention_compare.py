#!/usr/bin/env python3
"""Runs bench/cuda/attention_bench (ours) and PyTorch's scaled_dot_product_attention
(flash backend) on the same shapes in the same run, and writes one JSON result file.

Both sides: bf16, one fused qkv [B,T,3*H*D] tensor viewed as q/k/v [B,H,T,D] (what a GPT-2
block hands to attention), inputs uniform in [-1, 1], CUDA events around 20 back-to-back
calls after 5 warm-ups, median of 7 such groups. PyTorch's backward is timed as
torch.autograd.grad of the output w.r.t. q, k, v (leaf views, no accumulation into .grad).
FLOPs as FlashAttention counts them: forward 4*B*H*T^2*D (half when causal), backward 2.5x.

usage: attention_compare.py --bench PATH [--variant NAME=PATH ...] --out result.json
                            [--nvcc-version TEXT]
(--variant: other builds of ours, e.g. other tile choices; their times go under "variants".)
"""
import argparse
import datetime
import json
import statistics
import subprocess

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

WARMUP, ITERS, REPS = 5, 20, 7


def median_ms(call):
    for _ in range(WARMUP):
        call()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(REPS):
        start.record()
        for _ in range(ITERS):
            call()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / ITERS)
    return statistics.median(times)


def torch_times(B, T, H, D, causal, backend):
    qkv = torch.rand(B, T, 3 * H * D, device="cuda", dtype=torch.bfloat16) * 2 - 1
    dout = torch.rand(B, H, T, D, device="cuda", dtype=torch.bfloat16) * 2 - 1
    q, k, v = (x.view(B, T, H, D).transpose(1, 2).detach().requires_grad_()
               for x in qkv.split(H * D, dim=2))
    with sdpa_kernel(backend):
        fwd = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        bwd = median_ms(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True))
    return fwd, bwd


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--nvcc-version", default="")
    ap.add_argument("--variant", action="append", default=[])
    args = ap.parse_args()

    def run_bench(path):
        return [json.loads(line) for line in
                subprocess.run([path], check=True, capture_output=True,
                               text=True).stdout.splitlines() if line.startswith("{")]

    ours = run_bench(args.bench)
    variants = {}
    for spec in args.variant:
        name, path = spec.split("=", 1)
        variants[name] = run_bench(path)
    rows = []
    for r in ours:
        B, T, H, D, causal = r["B"], r["T"], r["H"], r["D"], r["causal"]
        flops = 4.0 * B * H * T * T * D * (0.5 if causal else 1.0)
        row = dict(r)
        row["ours_fwd_ms"] = row.pop("fwd_ms")
        row["ours_bwd_ms"] = row.pop("bwd_ms")
        row["ours_fwd_tflops"] = row.pop("fwd_tflops")
        row["ours_bwd_tflops"] = row.pop("bwd_tflops")
        row["ours_bwd_no_dq_ms"] = row.pop("bwd_no_dq_ms")
        for name, vrows in variants.items():
            for v in vrows:
                if (v["B"], v["T"], v["H"], v["D"], v["causal"]) == (B, T, H, D, causal):
                    row.setdefault("variants", {})[name] = {
                        k: v[k] for k in ("fwd_ms", "bwd_ms", "bwd_no_dq_ms", "fwd_tflops",
                                          "bwd_tflops")}
        for name, backend in (("torch_flash", SDPBackend.FLASH_ATTENTION),
                              ("torch_cudnn", SDPBackend.CUDNN_ATTENTION)):
            try:
                fwd, bwd = torch_times(B, T, H, D, causal, backend)
            except RuntimeError as e:  # backend not available for this shape
                row[name + "_error"] = str(e).splitlines()[0]
                continue
            row[name + "_fwd_ms"] = round(fwd, 4)
            row[name + "_bwd_ms"] = round(bwd, 4)
            row[name + "_fwd_tflops"] = round(flops / fwd * 1e-9, 1)
            row[name + "_bwd_tflops"] = round(2.5 * flops / bwd * 1e-9, 1)
        if "torch_flash_fwd_ms" in row:
            row["fwd_speed_vs_torch_flash"] = round(row["torch_flash_fwd_ms"] / row["ours_fwd_ms"], 3)
            row["bwd_speed_vs_torch_flash"] = round(row["torch_flash_bwd_ms"] / row["ours_bwd_ms"], 3)
        rows.append(row)
        print(json.dumps(row), flush=True)

    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm",
                          "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(0),
        "nvidia_smi": smi,
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "nvcc": args.nvcc_version,
        "method": "bf16, fused qkv [B,T,3HD] viewed as q/k/v, CUDA events, 20 calls after 5 "
                  "warm-ups, median of 7; TFLOP/s: fwd 4*B*H*T^2*D (/2 causal), bwd 2.5x fwd",
        "rows": rows,
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print("%-22s %9s %9s %9s %9s %7s %7s" % ("shape", "ours fwd", "torch fwd", "ours bwd",
                                             "torch bwd", "fwd x", "bwd x"))
    for r in rows:
        print("%-22s %9.1f %9.1f %9.1f %9.1f %7.2f %7.2f" % (
            "B%d T%d H%d D%d %s" % (r["B"], r["T"], r["H"], r["D"], "c" if r["causal"] else "f"),
            r["ours_fwd_tflops"], r.get("torch_flash_fwd_tflops", 0), r["ours_bwd_tflops"],
            r.get("torch_flash_bwd_tflops", 0), r.get("fwd_speed_vs_torch_flash", 0),
            r.get("bwd_speed_vs_torch_flash", 0)))
        for name, v in r.get("variants", {}).items():
            print("  %-20s %9.1f %9s %9.1f" % (name, v["fwd_tflops"], "", v["bwd_tflops"]))


if __name__ == "__main__":
    main()
