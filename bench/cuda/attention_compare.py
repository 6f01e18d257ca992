#!/usr/bin/env python3
"""Runs bench/cuda/attention_bench (ours: the own kernels and the cuDNN path) and PyTorch's
scaled_dot_product_attention (its cuDNN, flash and memory-efficient backends) on the same shapes
in the same run, checks every output against an fp32 reference, and writes one JSON result file.

Both sides: bf16, one fused qkv [B,T,(H+2G)*D] tensor viewed as q/k/v [B,heads,T,D] (what a
GPT-2 block hands to attention), inputs uniform in [-1, 1], CUDA events around 20 back-to-back
calls after 5 warm-ups, median of 7 such groups. PyTorch's backward is timed as
torch.autograd.grad of the output w.r.t. q, k, v (leaf views, no accumulation into .grad);
grouped kv heads go through enable_gqa=True. FLOPs as FlashAttention counts them: forward
4*B*H*T^2*D (half when causal), backward 2.5x.

Correctness: attention_bench --dump writes each shape's inputs and each of our implementations'
out, lse and dq/dk/dv; the reference is PyTorch's math backend in fp32 on the same (bf16-rounded)
inputs, and each output's error is ||x - ref|| / ||ref|| (bf16 operands land between 1e-3 and
1e-2; NaN fails). PyTorch's backends are checked the same way on the same inputs.

usage: attention_compare.py --bench PATH --out result.json [--dump-dir DIR]
                            [--variant NAME=PATH ...] [--nvcc-version TEXT]
(--variant: other builds of ours, e.g. other tile choices; their times go under "variants".)
"""
import argparse
import datetime
import json
import math
import os
import statistics
import subprocess
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

WARMUP, ITERS, REPS = 5, 20, 7
TOL = 2e-2  # relative error bound for bf16 outputs (see the doc string)
BACKENDS = (("torch_cudnn", SDPBackend.CUDNN_ATTENTION),
            ("torch_flash", SDPBackend.FLASH_ATTENTION),
            ("torch_efficient", SDPBackend.EFFICIENT_ATTENTION))


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


def split_qkv(qkv, B, T, H, G, D):
    """q [B,H,T,D], k and v [B,G,T,D]: views of the fused rows."""
    q, k, v = qkv.split([H * D, G * D, G * D], dim=2)
    return (q.view(B, T, H, D).transpose(1, 2), k.view(B, T, G, D).transpose(1, 2),
            v.view(B, T, G, D).transpose(1, 2))


def sdpa(q, k, v, causal, gqa):
    if gqa:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def rel(x, ref):
    x, ref = x.float(), ref.float()
    e = (torch.linalg.vector_norm(x - ref) / torch.linalg.vector_norm(ref)).item()
    return e if math.isfinite(e) else float("nan")


def reference(qkv, dout, B, T, H, G, D, causal):
    """fp32 out, lse, dq, dk, dv (math backend) from the bf16 inputs."""
    q, k, v = (t.float().detach().requires_grad_() for t in split_qkv(qkv, B, T, H, G, D))
    with sdpa_kernel(SDPBackend.MATH):
        out = sdpa(q, k, v, causal, G != H)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout.float())
    with torch.no_grad():
        kk = k.repeat_interleave(H // G, dim=1) if G != H else k
        s = (q @ kk.transpose(-1, -2)) / math.sqrt(D)
        if causal:
            s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=s.device).triu(1),
                              float("-inf"))
        lse = torch.logsumexp(s, dim=-1)  # [B,H,T]
        del s
    return out.detach(), lse, dq, dk, dv


def torch_backend(qkv, dout, B, T, H, G, D, causal, backend, ref):
    q, k, v = (t.detach().requires_grad_() for t in split_qkv(qkv, B, T, H, G, D))
    gqa = G != H
    with sdpa_kernel(backend):
        out = sdpa(q, k, v, causal, gqa)
        grads = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
        errs = {n: round(rel(x, r), 5) for n, x, r in
                zip(("out", "dq", "dk", "dv"), (out,) + grads, (ref[0],) + ref[2:])}
        fwd = median_ms(lambda: sdpa(q, k, v, causal, gqa))
        bwd = median_ms(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True))
    return fwd, bwd, errs


def ours_errors(dump, name, impl, B, T, H, G, D, ref):
    def load(what, dtype, shape):
        a = np.fromfile(os.path.join(dump, "%s_%s.bin" % (name, what)), dtype=np.uint16
                        if dtype == torch.bfloat16 else np.float32)
        t = torch.from_numpy(a.view(np.int16) if dtype == torch.bfloat16 else a)
        if dtype == torch.bfloat16:
            t = t.view(torch.bfloat16)
        return t.cuda().view(*shape)
    out = load(impl + "_out", torch.bfloat16, (B, T, H, D)).transpose(1, 2)
    lse = load(impl + "_lse", torch.float32, (B, H, T))
    dqkv = load(impl + "_dqkv", torch.bfloat16, (B, T, (H + 2 * G) * D))
    dq, dk, dv = split_qkv(dqkv, B, T, H, G, D)
    return {"out": round(rel(out, ref[0]), 5), "lse": round(rel(lse, ref[1]), 7),
            "dq": round(rel(dq, ref[2]), 5), "dk": round(rel(dk, ref[3]), 5),
            "dv": round(rel(dv, ref[4]), 5)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dump-dir", default="")
    ap.add_argument("--nvcc-version", default="")
    ap.add_argument("--variant", action="append", default=[])
    args = ap.parse_args()
    dump = args.dump_dir or tempfile.mkdtemp(prefix="attention_dump_")
    os.makedirs(dump, exist_ok=True)

    def run_bench(path, with_dump):
        cmd = [path] + (["--dump", dump] if with_dump else [])
        return [json.loads(line) for line in
                subprocess.run(cmd, check=True, capture_output=True,
                               text=True).stdout.splitlines() if line.startswith("{")]

    ours = run_bench(args.bench, True)
    variants = {}
    for spec in args.variant:
        name, path = spec.split("=", 1)
        variants[name] = run_bench(path, False)
    rows, failures = [], []
    for r in ours:
        B, T, H, G, D, causal, name = r["B"], r["T"], r["H"], r["G"], r["D"], r["causal"], r["name"]
        flops = 4.0 * B * H * T * T * D * (0.5 if causal else 1.0)
        row = dict(r)
        for vname, vrows in variants.items():
            for v in vrows:
                if v["name"] == name:
                    row.setdefault("variants", {})[vname] = {
                        k: v[k] for k in v if k.endswith("_ms") or k.endswith("_tflops")}
        # Inputs as attention_bench drew them.
        qkv = torch.from_numpy(np.fromfile(os.path.join(dump, name + "_qkv.bin"),
                                           dtype=np.int16)).view(
            torch.bfloat16).cuda().view(B, T, (H + 2 * G) * D)
        dout = torch.from_numpy(np.fromfile(os.path.join(dump, name + "_dout.bin"),
                                            dtype=np.int16)).view(
            torch.bfloat16).cuda().view(B, T, H, D).transpose(1, 2)
        ref = reference(qkv, dout, B, T, H, G, D, causal)
        row["errors"] = {}
        for impl in ("own", "cudnn"):
            if impl + "_fwd_ms" in row:
                e = ours_errors(dump, name, impl, B, T, H, G, D, ref)
                row["errors"][impl] = e
                if not all(x <= TOL for x in e.values()):  # NaN fails too
                    failures.append("%s %s %s" % (name, impl, e))
        for bname, backend in BACKENDS:
            try:
                fwd, bwd, errs = torch_backend(qkv, dout, B, T, H, G, D, causal, backend, ref)
            except RuntimeError as e:  # backend not available for this shape
                row[bname + "_error"] = str(e).strip().splitlines()[0][:200]
                continue
            row[bname + "_fwd_ms"] = round(fwd, 4)
            row[bname + "_bwd_ms"] = round(bwd, 4)
            row[bname + "_fwd_tflops"] = round(flops / fwd * 1e-9, 1)
            row[bname + "_bwd_tflops"] = round(2.5 * flops / bwd * 1e-9, 1)
            row["errors"][bname] = errs
        del ref
        torch.cuda.empty_cache()
        # Speed of ours against PyTorch's cuDNN backend (> 1: ours faster).
        for impl in ("own", "cudnn"):
            for ph in ("fwd", "bwd"):
                if impl + "_" + ph + "_ms" in row and "torch_cudnn_" + ph + "_ms" in row:
                    row["%s_%s_vs_torch_cudnn" % (impl, ph)] = round(
                        row["torch_cudnn_%s_ms" % ph] / row["%s_%s_ms" % (impl, ph)], 3)
                if impl + "_" + ph + "_ms" in row and "torch_flash_" + ph + "_ms" in row:
                    row["%s_%s_vs_torch_flash" % (impl, ph)] = round(
                        row["torch_flash_%s_ms" % ph] / row["%s_%s_ms" % (impl, ph)], 3)
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
        "torch_cudnn": torch.backends.cudnn.version(),
        "nvcc": args.nvcc_version,
        "method": "bf16, fused qkv [B,T,(H+2G)D] viewed as q/k/v, CUDA events, 20 calls after 5 "
                  "warm-ups, median of 7; TFLOP/s: fwd 4*B*H*T^2*D (/2 causal), bwd 2.5x fwd; "
                  "errors ||x-ref||/||ref|| against PyTorch's math backend in fp32 on the same "
                  "inputs; ours: gradients stored (accumulate=false)",
        "tolerance": TOL,
        "failures": failures,
        "rows": rows,
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print("%-28s %-6s %8s %8s %8s %8s | %7s %7s" % (
        "shape", "side", "ours", "t.cudnn", "t.flash", "t.effic", "x cudnn", "x flash"))
    for r in rows:
        for ph in ("fwd", "bwd"):
            for impl in ("own", "cudnn"):
                if impl + "_" + ph + "_tflops" not in r:
                    continue
                print("%-28s %-6s %8.1f %8.1f %8.1f %8.1f | %7.3f %7.3f" % (
                    r["name"], impl + " " + ph, r[impl + "_" + ph + "_tflops"],
                    r.get("torch_cudnn_%s_tflops" % ph, 0), r.get("torch_flash_%s_tflops" % ph, 0),
                    r.get("torch_efficient_%s_tflops" % ph, 0),
                    r.get("%s_%s_vs_torch_cudnn" % (impl, ph), 0),
                    r.get("%s_%s_vs_torch_flash" % (impl, ph), 0)))
    print("max errors:", json.dumps({r["name"]: {k: max(v.values()) for k, v in r["errors"].items()}
                                     for r in rows}))
    print("reference check:", "FAIL " + "; ".join(failures) if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
