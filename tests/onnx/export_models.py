#!/usr/bin/env python3
"""Exports the ONNX models of issue 25's tests with torch.onnx.export.

Run on a machine with torch 2.x, transformers and onnx (no network needed):

    python3 tests/onnx/export_models.py --out tests/onnx/exports

Writes, each the twin of a built-in model of examples/models (same sizes, same
parameter names where PyTorch's module names allow):

    tiny-gpt.onnx    transformers GPT2LMHeadModel   (examples/models/tiny-gpt.json)
    tiny-llama.onnx  transformers LlamaForCausalLM  (examples/models/tiny-llama.json)
    mlp-mnist.onnx   784-1024-1024-10 MLP           (examples/models/mlp-mnist.json)
    tiny-mlp.onnx    784-64-64-10 MLP               (examples/models/tiny-mlp.json)
    tiny-vgg.onnx    two conv blocks + classifier   (examples/models/tiny-vgg.json)
    gpt2.onnx        transformers GPT-2 124M        (built-in gpt2; only with --models gpt2:
                     --dynamo --stand-in makes an export that travels, see stand_in)

and for each a .json beside it with the PyTorch parameter count, and for the
language models the first loss on fixed tokens (seed 0), so the ONNX import can
be compared with PyTorch (docs/model-format.md "ONNX models").
Models are exported in eval mode with constant folding, a dynamic batch (and
sequence) axis, at --opset (default 17; the dynamo exporter with --dynamo).

The dynamo exporter runs without its graph optimizer (optimize=False): that
optimizer merges initializers of equal value (at initialisation every norm
weight is ones and every bias zeros, so all of them became one tensor) and
folds the transpose of each Linear weight into an unnamed initializer, which
lost most parameters and their names. The parameters are also perturbed by a
seeded normal(0, 0.02) before export so that no two are equal, and the export
is refused unless every PyTorch parameter is an initializer of the file.

Parameter names are the Hugging Face module's own (model.layers.0..., lm_head.weight,
transformer.wte.weight), as the built-in twins name them: the LogitsOnly wrapper's
"lm." prefix is taken off the initializers after export, and a tied table that the
exporter stored under another of its names (GPT-2's head shares transformer.wte.weight;
the dynamo exporter may keep lm_head.weight) is renamed to its first module name.
"""
import argparse
import json
import os

import torch
from torch import nn


def tiny_gpt():
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=256, n_positions=64, n_embd=64, n_layer=2,
                     n_head=4, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     use_cache=False, tie_word_embeddings=True)
    return GPT2LMHeadModel(cfg)


def gpt2():
    """GPT-2 124M as transformers configures it by default (issue 45 item 4)."""
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     use_cache=False, tie_word_embeddings=True)
    return GPT2LMHeadModel(cfg)


def stand_in(path, names):
    """Rewrites the parameters named in names with constant values, one per
    tensor (distinct, so no two become equal), keeping every other initializer
    exact: the graph, its constants and shapes are the export's own, and the
    external data compresses to almost nothing, so a 124M export can travel
    from the GPU machine to the one that runs autoddl."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    m = onnx.load(path)
    k = 0
    for t in m.graph.initializer:
        if t.name in names:
            k += 1
            a = numpy_helper.to_array(t)
            t.CopyFrom(numpy_helper.from_array(
                np.full(a.shape, 1e-4 * k, dtype=a.dtype), t.name))
    os.remove(path + ".data")
    onnx.save(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
              location=os.path.basename(path) + ".data", size_threshold=1024)
    return k


def tiny_llama(vocab=256, hidden=64, intermediate=176, positions=64):
    """Two layers, 4 heads over 2 KV heads (GQA), an untied head."""
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=hidden,
                      intermediate_size=intermediate, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=positions, use_cache=False,
                      tie_word_embeddings=False)
    return LlamaForCausalLM(cfg)


class Mlp(nn.Module):
    def __init__(self, hidden=1024):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(784, hidden), nn.Linear(hidden, hidden)])
        self.act = nn.ReLU()
        self.head = nn.Linear(hidden, 10)

    def forward(self, features):
        x = features
        for layer in self.layers:
            x = self.act(layer(x))
        return self.head(x)


class TinyVgg(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2))
        self.classifier = nn.Sequential(
            nn.Linear(32 * 8 * 8, 64), nn.ReLU(), nn.Dropout(),
            nn.Linear(64, 64), nn.ReLU(), nn.Dropout(),
            nn.Linear(64, 10))

    def forward(self, images):
        return self.classifier(torch.flatten(self.features(images), 1))


class LogitsOnly(nn.Module):
    """A transformers LM with token ids in and logits out (no cache, no dict)."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, input_ids):
        return self.lm(input_ids=input_ids, use_cache=False).logits


def rename_initializers(path, renames):
    """Renames initializers (and every use of them) in the ONNX file at path,
    keeping its external data in one file beside it."""
    import onnx
    m = onnx.load(path)  # with its external data
    def fix(values):
        for i, v in enumerate(values):
            if v in renames:
                values[i] = renames[v]
    def walk(graph):
        for t in graph.initializer:
            t.name = renames.get(t.name, t.name)
        for v in list(graph.input) + list(graph.value_info) + list(graph.output):
            v.name = renames.get(v.name, v.name)
        for n in graph.node:
            fix(n.input)
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
    walk(m.graph)
    data = os.path.basename(path) + ".data"
    if os.path.exists(path + ".data"):
        os.remove(path + ".data")
    onnx.save(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
              location=data, size_threshold=1024)


def export(model, example, names, dynamic, path, args, prefix=""):
    """Exports model; prefix is the wrapper's path to the module whose
    parameter names the file must carry ("lm." for LogitsOnly)."""
    model.eval()
    # Tied parameters before export: tracing may leave them untied after.
    aliases = {}  # storage -> its names, in module order
    for name, p in model.named_parameters(remove_duplicate=False):
        aliases.setdefault(p.data_ptr(), []).append(name)
    kwargs = dict(input_names=names[:-1], output_names=names[-1:],
                  opset_version=args.opset, do_constant_folding=True)
    if args.dynamo:
        kwargs["dynamo"] = True
        kwargs["optimize"] = False  # keeps every parameter (see the docstring)
        kwargs["dynamic_shapes"] = {names[0]: {
            i: torch.export.Dim(n, min=1, max=4096) for i, n in dynamic.items()}}
    else:
        kwargs["dynamic_axes"] = {names[0]: dynamic, names[-1]: dynamic}
        if torch.__version__ >= "2.5":
            kwargs["dynamo"] = False
    torch.onnx.export(model, (example,), path, **kwargs)
    import onnx
    onnx.checker.check_model(path)
    # Every parameter must survive under its module name (tied ones once,
    # under the first of their names).
    stored = {i.name for i in onnx.load(path, load_external_data=False).graph.initializer}
    renames, lost = {}, []
    for names_of in aliases.values():
        want = names_of[0][len(prefix):] if names_of[0].startswith(prefix) else names_of[0]
        found = [n for n in names_of if n in stored]
        if not found:
            lost.append(names_of[0])
        elif found[0] != want:
            renames[found[0]] = want
    for name, _ in model.named_buffers():  # e.g. rotary_emb.inv_freq
        if prefix and name.startswith(prefix) and name in stored:
            renames[name] = name[len(prefix):]
    if renames:
        rename_initializers(path, renames)
        onnx.checker.check_model(path)
    if lost:
        raise RuntimeError(f"{path}: {len(lost)} parameters are not initializers, "
                           f"e.g. {lost[0]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="tests/onnx/exports")
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--dynamo", action="store_true")
    ap.add_argument("--models", default="tiny-gpt,tiny-llama,mlp-mnist,tiny-mlp,tiny-vgg",
                    help="comma-separated; also gpt2 (124M, exported by dynamo)")
    ap.add_argument("--stand-in", action="store_true",
                    help="after export, replace the parameters' values by one "
                         "constant per tensor (see stand_in)")
    args = ap.parse_args()
    wanted = args.models.split(",")
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    seq = {0: "batch", 1: "sequence"}
    batch = {0: "batch"}
    for name, make, example, names, dyn, lm in [
        ("tiny-gpt", tiny_gpt, torch.randint(0, 256, (2, 16)),
         ["input_ids", "logits"], seq, True),
        ("tiny-llama", tiny_llama, torch.randint(0, 256, (2, 16)),
         ["input_ids", "logits"], seq, True),
        ("mlp-mnist", Mlp, torch.randn(2, 784), ["features", "logits"], batch,
         False),
        ("tiny-mlp", lambda: Mlp(64), torch.randn(2, 784), ["features", "logits"],
         batch, False),
        ("tiny-vgg", TinyVgg, torch.randn(2, 3, 32, 32), ["images", "logits"],
         batch, False),
        # Last: drawing its example after the others' keeps their examples.
        ("gpt2", gpt2, torch.randint(0, 50257, (2, 64)),
         ["input_ids", "logits"], seq, True),
    ]:
        if name not in wanted:
            continue
        torch.manual_seed(0)
        model = make()
        with torch.no_grad():  # distinct values: nothing to merge, a real --weights onnx test
            for p in model.parameters():
                p.add_(0.02 * torch.randn_like(p))
        module = LogitsOnly(model) if lm else model
        # Unique storages, before export (tracing may untie): a tied table
        # counts once, as the importer counts it.
        params = {p.data_ptr(): p.numel() for p in model.parameters()}
        path = os.path.join(args.out, name + ".onnx")
        exporter = "dynamo" if args.dynamo else "torchscript"
        try:
            export(module, example, names, dyn, path, args, "lm." if lm else "")
        except Exception as e:  # one model's exporter failure: try the other
            if args.dynamo:
                print(f"{name}: not exported: {type(e).__name__}: {e}".splitlines()[0])
                continue
            print(f"{name}: the TorchScript exporter failed ({type(e).__name__}); "
                  "trying the dynamo exporter at opset 18")
            retry = argparse.Namespace(**vars(args))
            retry.dynamo, retry.opset = True, max(args.opset, 18)
            try:
                export(module, example, names, dyn, path, retry, "lm." if lm else "")
                exporter = "dynamo"
            except Exception as e2:
                print(f"{name}: not exported: {type(e2).__name__}: {e2}".splitlines()[0])
                continue
        import onnx
        info = {"parameters": sum(params.values()),
                "opset": max(o.version for o in onnx.load(path).opset_import
                             if o.domain in ("", "ai.onnx")),
                "exporter": exporter,
                "torch": torch.__version__}
        if lm:
            with torch.no_grad():
                logits = module(example)
                # Causal LM: position t predicts token t+1 (the importer's
                # targets are the ids shifted by one).
                info["first_loss"] = nn.functional.cross_entropy(
                    logits[:, :-1].reshape(-1, logits.shape[-1]),
                    example[:, 1:].reshape(-1)).item()
            info["tokens"] = example.tolist()
        if args.stand_in:
            info["stand_in_parameters"] = stand_in(
                path, {n for n, _ in model.named_parameters()})
        with open(os.path.join(args.out, name + ".json"), "w") as f:
            json.dump(info, f, indent=1)
        print(f"{path}: {info['parameters']} parameters")


if __name__ == "__main__":
    main()
