#!/usr/bin/env python3
"""PyTorch's convolutions on ResNet-50's shapes, as bench/cuda/conv_bench.cu times autoddl's.

bf16, NCHW and channels-last, cudnn.benchmark on; forward, input gradient and weight gradient
(aten.convolution_backward with one output wanted), timed as conv_bench does (CUDA events around
10 calls after 3 warm-up calls, median of 5 groups). One JSON object a line, then per layout the
sum over ResNet-50's 53 convolutions of a training step (the stem's input gradient left out).
torch.compile runs a ResNet's convolutions through these same aten calls (Inductor generates no
convolution kernels), so the channels-last sum is the convolutions' share of the bar of issue 45
item 4.

usage: python3 bench/cuda/conv_torch.py [B]   (default 32 images)
"""
import json
import sys

import torch

# (Cin, H, Cout, k, stride, count, stem): conv_bench.cu's kResnet50.
LAYERS = [
    (3, 224, 64, 7, 2, 1, True),
    (64, 56, 64, 1, 1, 1, False), (64, 56, 64, 3, 1, 3, False),
    (64, 56, 256, 1, 1, 4, False), (256, 56, 64, 1, 1, 2, False),
    (256, 56, 128, 1, 1, 1, False), (128, 56, 128, 3, 2, 1, False),
    (128, 28, 512, 1, 1, 4, False), (256, 56, 512, 1, 2, 1, False),
    (512, 28, 128, 1, 1, 3, False), (128, 28, 128, 3, 1, 3, False),
    (512, 28, 256, 1, 1, 1, False), (256, 28, 256, 3, 2, 1, False),
    (256, 14, 1024, 1, 1, 6, False), (512, 28, 1024, 1, 2, 1, False),
    (1024, 14, 256, 1, 1, 5, False), (256, 14, 256, 3, 1, 5, False),
    (1024, 14, 512, 1, 1, 1, False), (512, 14, 512, 3, 2, 1, False),
    (512, 7, 2048, 1, 1, 3, False), (1024, 14, 2048, 1, 2, 1, False),
    (2048, 7, 512, 1, 1, 2, False), (512, 7, 512, 3, 1, 2, False),
]


def median_ms(fn, warmup=3, iters=10, reps=5):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / iters)
    return sorted(times)[len(times) // 2]


def uniform(shape, fmt):
    return (torch.rand(shape, device="cuda") * 2 - 1).to(torch.bfloat16).contiguous(
        memory_format=fmt)


def main():
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 32
    torch.backends.cudnn.benchmark = True
    totals = {}
    for cin, h, cout, k, stride, count, stem in LAYERS:
        pad = (k - 1) // 2
        for layout, fmt in (("nchw", torch.contiguous_format),
                            ("channels_last", torch.channels_last)):
            x, w = uniform((batch, cin, h, h), fmt), uniform((cout, cin, k, k), fmt)
            y = torch.nn.functional.conv2d(x, w, None, stride, pad)
            dy = uniform(tuple(y.shape), fmt)

            def backward(mask):
                return torch.ops.aten.convolution_backward(
                    dy, x, w, None, [stride] * 2, [pad] * 2, [1, 1], False, [0, 0], 1, mask)

            f = median_ms(lambda: torch.nn.functional.conv2d(x, w, None, stride, pad))
            d = median_ms(lambda: backward([True, False, False]))
            g = median_ms(lambda: backward([False, True, False]))
            flop = 2.0 * y.numel() * cin * k * k
            totals[layout] = totals.get(layout, 0.0) + count * (f + (0.0 if stem else d) + g)
            print(json.dumps({
                "shape": f"B{batch}_C{cin}_H{h}_K{cout}_k{k}_s{stride}", "count": count,
                "path": f"torch_{layout}", "fwd_ms": round(f, 4), "dgrad_ms": round(d, 4),
                "wgrad_ms": round(g, 4), "fwd_tflops": round(flop / f * 1e-9, 1),
                "dgrad_tflops": round(flop / d * 1e-9, 1),
                "wgrad_tflops": round(flop / g * 1e-9, 1)}), flush=True)
    for layout, ms in totals.items():
        print(json.dumps({"summary": f"torch_{layout}", "B": batch,
                          "resnet50_conv_step_ms": round(ms, 3),
                          "torch": torch.__version__,
                          "cudnn": torch.backends.cudnn.version()}))


if __name__ == "__main__":
    main()
