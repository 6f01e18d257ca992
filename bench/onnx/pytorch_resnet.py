#!/usr/bin/env python3
"""The PyTorch peer of bench/onnx/resnet_speed.sh (issue 45 item 4): torchvision's
ResNet training step as a competent user runs it on one GPU — channels-last, bf16
autocast, cudnn.benchmark, fused AdamW, eager and torch.compile — on one fixed
random batch on the device (no data loading, as the generated program's timing
leaves its host draw out only if it overlaps; say so beside the numbers).

    python3 bench/onnx/pytorch_resnet.py --model resnet50 --batch 256 --out OUT.json

Prints and writes images/s per mode: the median step of --steps timed steps after
--warmup (CUDA events around each step).
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F
import torchvision


def run(mode, name, batch, warmup, steps):
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None, num_classes=1000)
    model = model.cuda().to(memory_format=torch.channels_last).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randn(batch, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (batch,), device="cuda")
    fwd = torch.compile(model) if mode == "compile" else model

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(fwd(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(steps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        loss = step()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    med = statistics.median(times)
    r = {"mode": mode, "step_s": med, "images_per_s": batch / med, "loss": float(loss),
         "peak_gib": torch.cuda.max_memory_allocated() / 2**30}
    print(f"{name} {mode}: {med * 1e3:.2f} ms a step, {batch / med:.0f} images/s", flush=True)
    del model, opt, fwd
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--warmup", type=int, default=15)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--modes", nargs="+", default=["eager", "compile"])
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    rep = {"torch": torch.__version__, "torchvision": torchvision.__version__,
           "cudnn": torch.backends.cudnn.version(), "gpu": torch.cuda.get_device_name(),
           "model": a.model, "batch": a.batch, "runs": []}
    for m in a.modes:
        try:
            rep["runs"].append(run(m, a.model, a.batch, a.warmup, a.steps))
        except Exception as e:  # keep the other mode; say why this one failed
            rep["runs"].append({"mode": m, "error": repr(e)[:2000]})
            print(f"{m}: failed: {e!r}"[:2000], flush=True)
    with open(a.out, "w") as f:
        json.dump(rep, f, indent=1)


if __name__ == "__main__":
    main()
