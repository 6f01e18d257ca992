#!/usr/bin/env python3
"""Exports torchvision's resnet18 and resnet50 in training mode with both
PyTorch exporters, for autoddl to import and train (issue 45 item 4).

Run on the GPU machine (torch, torchvision, onnx; no network: random weights):

    python3 bench/onnx/resnet_export.py --out $OUT/resnet [--batch 64] [--models resnet18]

Writes <model>-ts.onnx (TorchScript exporter, dynamo=False,
training=TrainingMode.TRAINING: BatchNormalization with training_mode=1 and
the running statistics as extra outputs; a dynamic batch axis) and
<model>-dynamo.onnx (dynamo exporter on the module in .train(); a static
batch, which autoddl takes as the micro-batch), opset 17 and 18, and
resnet.json: per file PyTorch's parameter and buffer counts and the ONNX op
types the export holds (which ones autoddl must import). Then, e.g.:

    autoddl plan resnet50-ts.onnx --loss cross_entropy --cluster dgx-h100-ndr \\
        --gpus 1 --global-batch 64
"""
import argparse
import collections
import json
import os

import onnx
import torch
import torchvision


def export(name, exporter, batch, out):
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None, num_classes=1000).train()
    x = torch.randn(batch, 3, 224, 224)
    path = os.path.join(out, f"{name}-{exporter}.onnx")
    if exporter == "ts":
        torch.onnx.export(model, (x,), path, dynamo=False, opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=["x"],
                          output_names=["logits"],
                          dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}})
    else:
        torch.onnx.export(model, (x,), path, dynamo=True, opset_version=18,
                          input_names=["x"], output_names=["logits"],
                          external_data=False)
    m = onnx.load(path)
    ops = collections.Counter(n.op_type for n in m.graph.node)
    bn = [n for n in m.graph.node if n.op_type == "BatchNormalization"]
    modes = sorted({a.i for n in bn for a in n.attribute if a.name == "training_mode"})
    info = {
        "exporter": exporter,
        "opset": max(o.version for o in m.opset_import if o.domain in ("", "ai.onnx")),
        "batch": batch,
        "parameters": sum(p.numel() for p in model.parameters()),
        "buffers": sum(b.numel() for b in model.buffers()),
        "initializers": len(m.graph.initializer),
        "bn_training_mode": modes,
        "op_types": dict(sorted(ops.items())),
        "bytes": os.path.getsize(path),
    }
    print(f"{path}: {info['parameters']} parameters, ops {info['op_types']}")
    return os.path.basename(path), info


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--models", nargs="+", default=["resnet18", "resnet50"])
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    report = {"torch": torch.__version__, "torchvision": torchvision.__version__,
              "onnx": onnx.__version__, "files": {}}
    for name in a.models:
        for exporter in ("ts", "dynamo"):
            try:
                f, info = export(name, exporter, a.batch, a.out)
                report["files"][f] = info
            except Exception as e:  # keep the other exports; say why this one failed
                report["files"][f"{name}-{exporter}.onnx"] = {"error": repr(e)[:2000]}
                print(f"{name} ({exporter}): export failed: {e!r}"[:2000])
    with open(os.path.join(a.out, "resnet.json"), "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
