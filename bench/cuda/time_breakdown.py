#!/usr/bin/env python3
"""Where a GPT program's step goes, per op family, from its own profile (issue 48 item 1).

    python3 bench/cuda/time_breakdown.py MODEL[@SEQ]=METRICS_JSON [...] [--peak TFLOPS]

Each METRICS_JSON is a generated program's metrics.json from a run with --profile (its
`op_kinds`: each family's forward and backward seconds a step, timed by CUDA events around every
op, the step graph off). MODEL is a GPT-2 size (gpt2, gpt2-medium, gpt2-large, gpt2-xl) or
LxC (layers x width, e.g. 4x4096 for a LLaMA-2-7B 4-layer stack: its linears counted as LLaMA's
with an MLP width of 11008 and a 32000-row LM head); SEQ the sequence length (default 1024). The
GEMM families are set against their FLOPs (the header gives the program's own
model_flops_per_step beside them: GPT-2's counts the attention without the causal half):

  linear     6 * tokens * (linear parameters): qkv, proj, fc, fc2 (GPT) or q, k, v, o, gate, up,
             down (LLaMA), and the LM head (GPT-2's tied 50257 x C);
  attention  6 * tokens * seq * C * layers: causal (half the s x s scores), forward 2, backward 4
             (the MFU convention's 12 L s C per token, halved for the mask);

over --peak (default 989.5: the H100/H200 SXM dense bf16 TFLOP/s of NVIDIA's datasheets). The
memory-bound families (layernorm, add, cross_entropy, embedding, ...) are given as time and
share; what the profile's step holds outside every op (the optimizer, gradient zeroing, launch
gaps) is the step's median (after its first) minus the families' sum. A Markdown table per file.
"""
import argparse
import json
import statistics

GPT2 = {"gpt2": (12, 768), "gpt2-medium": (24, 1024), "gpt2-large": (36, 1280),
        "gpt2-xl": (48, 1600)}
VOCAB = 50257
GEMM = ("linear", "attention")


def shape(model):
    """(layers, width, linear parameters)."""
    if model in GPT2:
        layers, c = GPT2[model]
        return layers, c, layers * 12 * c * c + VOCAB * c
    layers, c = (int(v) for v in model.lower().split("x"))
    return layers, c, layers * (4 * c * c + 3 * c * 11008) + 32000 * c


def breakdown(model, seq, path, peak):
    m = json.load(open(path))
    kinds = m.get("op_kinds")
    if not kinds:
        raise SystemExit("%s: no op_kinds (run the program with --profile)" % path)
    steps = m["step_seconds"][1:] or m["step_seconds"]
    step = statistics.median(steps)
    tokens = m["tokens_per_second"] * m["mean_step_seconds"]
    layers, c, linear_params = shape(model)
    flops = {"linear": 6 * tokens * linear_params,
             "attention": 6 * tokens * seq * c * layers}
    rows, total = [], 0.0
    for name, k in sorted(kinds.items(), key=lambda kv: -(kv[1]["forward_s"] + kv[1]["backward_s"])):
        t = k["forward_s"] + k["backward_s"]
        total += t
        rows.append((name, t, flops.get(name)))
    rows.append(("outside the ops (optimizer, zeroing, launch gaps)", step - total, None))
    out = ["%s, sequence %d, %s (%d tokens a step; profiled step %.2f ms, median after the "
           "first; %.2f TFLOP counted here, %.2f by the program)"
           % (model, seq, path, round(tokens), 1e3 * step, sum(flops.values()) / 1e12,
              m["model_flops_per_step"] / 1e12), "",
           "| family | ms a step | share | TFLOP a step | TFLOP/s | of the %.1f peak |" % peak,
           "|---|---|---|---|---|---|"]
    for name, t, f in rows:
        rate = f / t / 1e12 if f and t > 0 else None
        out.append("| %s | %.2f | %.1f %% | %s | %s | %s |" % (
            name, 1e3 * t, 100 * t / step, "%.2f" % (f / 1e12) if f else "",
            "%.0f" % rate if rate else "", "%.0f %%" % (100 * rate / peak) if rate else ""))
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", help="MODEL=METRICS_JSON")
    ap.add_argument("--peak", type=float, default=989.5, help="dense bf16 TFLOP/s")
    a = ap.parse_args()
    for run in a.runs:
        spec, _, path = run.partition("=")
        model, _, seq = spec.partition("@")
        if not path:
            ap.error("%s: expected MODEL[@SEQ]=METRICS_JSON" % run)
        print(breakdown(model, int(seq or 1024), path, a.peak))


if __name__ == "__main__":
    main()
