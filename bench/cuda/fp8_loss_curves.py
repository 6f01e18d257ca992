#!/usr/bin/env python3
"""FP8 against bf16 loss curves (issue 48 item 3: "within 1 % of bf16's over >= 2,000 steps").

    python3 bench/cuda/fp8_loss_curves.py OUT BASE:OTHER [BASE:OTHER ...] [--window W]

Each BASE and OTHER names a run folder OUT/<label>/metrics.json written by a generated program's
`--out` (its `loss` list: one loss per step, before that step's update). For every pair the
curves are compared as means over windows of W steps (default 100): a single step's loss moves
with its batch, so per-step gaps mostly measure batch noise, while both runs read the same
batches in the same order and a window mean shows where the curves part. Prints one Markdown row
per pair (largest windowed gap, the gap over the last window, each run's final window), writes
OUT/loss_curves.json (the windowed curves and gaps) and OUT/loss_curves.svg (one panel per pair).
"""
import json
import sys


def windows(loss, w):
    return [sum(loss[i:i + w]) / len(loss[i:i + w]) for i in range(0, len(loss) - w + 1, w)]


def svg_panels(panels, path):
    """panels: (title, [(name, colour, ys)], step_per_point). A plain SVG line plot per panel."""
    pw, ph, m = 460, 300, 48
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{pw * len(panels)}" height="{ph}" '
           'font-family="sans-serif" font-size="11">']
    for k, (title, series, step) in enumerate(panels):
        x0 = k * pw
        ys = [y for _, _, s in series for y in s]
        lo, hi = min(ys), max(ys)
        n = max(len(s) for _, _, s in series)
        def px(i):
            return x0 + m + (pw - 2 * m) * i / max(1, n - 1)
        def py(y):
            return ph - m - (ph - 2 * m) * (y - lo) / max(1e-12, hi - lo)
        out.append(f'<text x="{x0 + m}" y="20">{title}</text>')
        out.append(f'<rect x="{x0 + m}" y="{m}" width="{pw - 2 * m}" height="{ph - 2 * m}" '
                   'fill="none" stroke="#999"/>')
        for v in (lo, (lo + hi) / 2, hi):
            out.append(f'<text x="{x0 + 4}" y="{py(v) + 4:.1f}">{v:.3f}</text>')
        out.append(f'<text x="{x0 + m}" y="{ph - m + 16}">step {step}</text>')
        out.append(f'<text x="{x0 + pw - m - 40}" y="{ph - m + 16}">{n * step}</text>')
        for j, (name, colour, s) in enumerate(series):
            pts = " ".join(f"{px(i):.1f},{py(y):.1f}" for i, y in enumerate(s))
            out.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
            out.append(f'<text x="{x0 + pw - m - 150}" y="{m + 16 + 14 * j}" fill="{colour}">'
                       f'{name}</text>')
    out.append("</svg>")
    open(path, "w").write("\n".join(out) + "\n")


def main(argv):
    w = 100
    if "--window" in argv:
        i = argv.index("--window")
        w = int(argv[i + 1])
        del argv[i:i + 2]
    if len(argv) < 3 or any(":" not in p for p in argv[2:]):
        sys.exit(__doc__.strip().splitlines()[2].strip())
    out, pairs = argv[1], [p.split(":", 1) for p in argv[2:]]
    result, panels = {"window_steps": w, "pairs": []}, []
    print("| runs | steps | largest windowed gap | gap over the last window | final window loss |")
    print("|---|---|---|---|---|")
    for base, other in pairs:
        la = json.load(open(f"{out}/{base}/metrics.json"))["loss"]
        lb = json.load(open(f"{out}/{other}/metrics.json"))["loss"]
        n = min(len(la), len(lb))
        if n < w:
            sys.exit(f"fp8_loss_curves.py: {base} and {other} share {n} steps, fewer than "
                     f"the window of {w}")
        wa, wb = windows(la[:n], w), windows(lb[:n], w)
        gaps = [(b - a) / a for a, b in zip(wa, wb)]
        worst = max(range(len(gaps)), key=lambda i: abs(gaps[i]))
        result["pairs"].append({"base": base, "other": other, "steps": n, "base_windows": wa,
                                "other_windows": wb, "relative_gaps": gaps})
        print(f"| {other} vs {base} | {n} | {100 * gaps[worst]:+.2f} % (steps {worst * w + 1}-"
              f"{(worst + 1) * w}) | {100 * gaps[-1]:+.2f} % | {wa[-1]:.4f} / {wb[-1]:.4f} |")
        panels.append((f"{other} vs {base} (mean of {w} steps)",
                       [(base, "#1f77b4", wa), (other, "#d62728", wb)], w))
    json.dump(result, open(f"{out}/loss_curves.json", "w"), indent=1)
    svg_panels(panels, f"{out}/loss_curves.svg")


if __name__ == "__main__":
    main(sys.argv)
