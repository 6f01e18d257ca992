#!/usr/bin/env python3
"""Per-shape convolution times of the program's path against PyTorch's (issue 45 item 4).

    python3 bench/cuda/conv_compare.py OURS.jsonl TORCH.jsonl [PATH]

OURS.jsonl is `conv_bench B nhwc` output (bench/cuda/conv_bench.cu), TORCH.jsonl is
bench/cuda/conv_torch.py's; PATH (default cudnn) picks OURS' rows. Prints a Markdown table of
forward / data gradient / weight gradient per ResNet-50 shape against PyTorch channels-last, and
the step sums (each shape times its count) with and without the stem's data gradient, which
neither training step computes (the images need no gradient).
"""
import json
import sys


def rows(path, kind):
    out = {}
    for line in open(path):
        d = json.loads(line)
        if d.get("path") == kind and "shape" in d:
            out[d["shape"]] = d
    return out


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    ours, torch = rows(argv[1], argv[3] if len(argv) > 3 else "cudnn"), rows(argv[2], "torch_channels_last")
    parts = ("fwd_ms", "dgrad_ms", "wgrad_ms")
    print("| shape | count | ours fwd / dgrad / wgrad ms | torch fwd / dgrad / wgrad ms | ours / torch |")
    print("|---|---|---|---|---|")
    sums = [0.0, 0.0, 0.0, 0.0]
    for k, o in ours.items():
        if k not in torch:
            continue
        t, c = torch[k], o["count"]
        so, st = sum(o[p] for p in parts), sum(t[p] for p in parts)
        stem = k.startswith("B") and "_C3_" in k  # the image's channels: no data gradient
        sums[0] += c * so
        sums[1] += c * st
        sums[2] += c * (so - (o["dgrad_ms"] if stem else 0))
        sums[3] += c * (st - (t["dgrad_ms"] if stem else 0))
        print(f"| {k} | {c} | " + " / ".join(f"{o[p]:.3f}" for p in parts) + " | " +
              " / ".join(f"{t[p]:.3f}" for p in parts) + f" | {so / st:.2f} |")
    print(f"\nstep sums: ours {sums[0]:.2f} ms, torch {sums[1]:.2f} ms; without the stem's data "
          f"gradient: ours {sums[2]:.2f} ms, torch {sums[3]:.2f} ms ({sums[2] / sums[3]:.3f}x)")


if __name__ == "__main__":
    main(sys.argv)
