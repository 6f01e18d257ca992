#!/usr/bin/env python3
"""Exports small models the way a new user does (issue 45 item 5).

Run on a machine with torch 2.x, transformers and onnx (no network needed):

    python3 tests/onnx/export_user_models.py --out tests/onnx/exports/user

Unlike export_models.py, nothing is tuned for the importer: the exporters'
defaults (dynamo's graph optimizer on), a static batch (no dynamic_axes or
dynamic_shapes), modules in eval mode, and one export in train mode. Writes:

    static-mlp-ts.onnx      an MLP with Dropout, TorchScript exporter, batch 4
    static-mlp-dynamo.onnx  the same MLP, dynamo exporter, batch 4 (eval-mode
                            Dropout is written with a false training_mode)
    train-mlp-ts.onnx       the same MLP exported in train mode (Dropout with a
                            true training_mode)
    train-mlp-dynamo.onnx   the same, dynamo exporter
    static-llama.onnx       transformers LlamaForCausalLM (tiny), dynamo with
                            its default optimizer, batch 2, sequence 8 (the
                            TorchScript exporter refuses it: aten::diff)
    static-llama-noopt.onnx the same with optimize=False
    static-gpt.onnx         transformers GPT2LMHeadModel (tiny, tied head),
                            dynamo with its default optimizer, batch 2
    static-cnn-*.onnx       a conv/pool/Dropout/linear CNN, batch 4: dynamo
                            (default, optimize=False) and TorchScript

and users.json: for each file PyTorch's module.parameters() count, its buffers,
and each initializer [name, dims, type, "param" | "buffer" | "other"].
Only the small files are committed (tests/onnx/exports/).
"""
import argparse
import json
import os

import torch
from torch import nn

from export_models import LogitsOnly  # token ids in, logits out
from export_models import tiny_llama as exporter_llama


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.act = nn.ReLU()
        self.drop = nn.Dropout(0.25)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        return self.fc2(self.drop(self.act(self.fc1(x))))


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3, padding=1)
        self.p = nn.MaxPool2d(2)
        self.d = nn.Dropout(0.5)
        self.f = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        return self.f(self.d(torch.flatten(self.p(torch.relu(self.c(x))), 1)))


def tiny_gpt():
    from transformers import GPT2Config, GPT2LMHeadModel
    return GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=32, n_embd=32,
                                      n_layer=2, n_head=4, use_cache=False))


def tiny_llama():
    return exporter_llama(vocab=64, hidden=32, intermediate=64, positions=32)


def describe(path, module):
    import onnx
    m = onnx.load(path)
    params = {n: p.numel() for n, p in module.named_parameters()}
    buffers = {n: b.numel() for n, b in module.named_buffers()}
    inits = [[t.name, list(t.dims), t.data_type,
              "param" if t.name in params else
              "buffer" if t.name in buffers else "other"]
             for t in m.graph.initializer]
    ops = sorted({n.op_type for n in m.graph.node})
    return {"parameters": sum(params.values()),
            "buffers": buffers,
            "initializers": inits,
            "ops": ops,
            "opset": max(o.version for o in m.opset_import
                         if o.domain in ("", "ai.onnx")),
            "inputs": [[i.name, [d.dim_value if d.HasField("dim_value")
                                 else d.dim_param
                                 for d in i.type.tensor_type.shape.dim]]
                       for i in m.graph.input]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="tests/onnx/exports/user")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    info = {"torch": torch.__version__}
    x, ids, images = torch.randn(4, 16), torch.randint(0, 64, (2, 8)), \
        torch.randn(4, 3, 16, 16)
    llama = lambda: LogitsOnly(tiny_llama())
    jobs = [  # name, module, example, dynamo, mode, dynamo's optimizer
        ("static-mlp-ts", Mlp, x, False, "eval", True),
        ("static-mlp-dynamo", Mlp, x, True, "eval", True),
        ("train-mlp-ts", Mlp, x, False, "train", True),
        ("train-mlp-dynamo", Mlp, x, True, "train", True),
        ("static-llama", llama, ids, True, "eval", True),
        ("static-llama-ts", llama, ids, False, "eval", True),
        ("static-llama-noopt", llama, ids, True, "eval", False),
        ("static-gpt", lambda: LogitsOnly(tiny_gpt()), ids, True, "eval", True),
        ("static-cnn-dynamo", Cnn, images, True, "eval", True),
        ("static-cnn-noopt", Cnn, images, True, "eval", False),
        ("static-cnn-ts", Cnn, images, False, "eval", True),
    ]
    for name, make, example, dynamo, mode, optimize in jobs:
        torch.manual_seed(0)
        model = make()
        model.train(mode == "train")
        path = os.path.join(args.out, name + ".onnx")
        kw = dict(input_names=["x" if example.dtype == torch.float32
                               else "input_ids"], output_names=["y"])
        if dynamo:
            kw["dynamo"] = True
            if not optimize:
                kw["optimize"] = False
        else:
            kw["dynamo"] = False
            if mode == "train":
                kw["training"] = torch.onnx.TrainingMode.TRAINING
                kw["do_constant_folding"] = False
        try:
            torch.onnx.export(model, (example,), path, **kw)
        except Exception as e:
            print(f"{name}: not exported: {type(e).__name__}: {e}"
                  .splitlines()[0])
            continue
        import onnx
        # One file, its data inline (these models are small).
        m = onnx.load(path)
        if os.path.exists(path + ".data"):
            os.remove(path + ".data")
        onnx.save(m, path)
        info[name] = describe(path, model)
        if mode == "eval":
            with torch.no_grad():
                info[name]["output_sum"] = float(model(example).double().sum())
        print(f"{path}: {info[name]['parameters']} parameters, ops "
              f"{info[name]['ops']}, "
              f"{os.path.getsize(path)} bytes")
        for i in info[name]["initializers"]:
            if i[3] != "param":
                print("   ", i)
    with open(os.path.join(args.out, "users.json"), "w") as f:
        json.dump(info, f, indent=1)


if __name__ == "__main__":
    main()
