#!/usr/bin/env python3
"""Loads generated programs' checkpoints with transformers and compares the loss.

Usage: hf_checkpoint_check.py CASE_DIR...   (prepared by hf_checkpoint.sh prepare)

Each CASE_DIR holds expected.json: the checkpoint folder, the evaluation text, batch, seq, step
and the program's loss there. The program's batch at step s is the B*T+1 tokens starting at
s*B*T mod n, wrapping (docs/runtime.md "Data order"); the loss is the mean cross-entropy over
its B*T positions. PASS: no unexpected or missing weights, relative loss difference <= 1e-4.
"""
import json
import os
import sys

import torch
from transformers import AutoModelForCausalLM

TOLERANCE = 1e-4


def batch_tokens(data, batch, seq, step):
    n = len(data)
    start = (step * batch * seq) % n
    chunk = [data[(start + i) % n] for i in range(batch * seq + 1)]
    x = torch.tensor(chunk[:-1]).view(batch, seq)
    y = torch.tensor(chunk[1:]).view(batch, seq)
    return x, y


def check(case):
    e = json.load(open(os.path.join(case, "expected.json")))
    ck = os.path.join(case, e["checkpoint"])
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model, info = AutoModelForCausalLM.from_pretrained(
        ck, torch_dtype=torch.float32, output_loading_info=True)
    # Buffers transformers builds itself (causal masks, rotary tables) are not weights; a tied
    # lm_head is the embedding.
    def derived(k):
        return (k.endswith((".attn.bias", ".attn.masked_bias", "rotary_emb.inv_freq")) or
                (k == "lm_head.weight" and model.config.tie_word_embeddings))
    missing = [k for k in info["missing_keys"] if not derived(k)]
    problems = []
    for kind, keys in (("unexpected", info["unexpected_keys"]), ("missing", missing),
                       ("mismatched", info["mismatched_keys"])):
        if keys:
            problems.append(f"{len(keys)} {kind} keys, e.g. {list(keys)[:3]}")
    data = open(os.path.join(case, e["data"]), "rb").read()
    x, y = batch_tokens(data, e["batch"], e["seq"], e["step"])
    model = model.to(device).eval()
    with torch.no_grad():
        logits = model(x.to(device)).logits.float()
        loss = torch.nn.functional.cross_entropy(
            logits.view(-1, logits.shape[-1]), y.to(device).view(-1)).item()
    rel = abs(loss - e["loss"]) / abs(e["loss"])
    if not rel <= TOLERANCE:
        problems.append(f"loss {loss:.6f} vs the program's {e['loss']:.6f} (rel {rel:.2e})")
    status = "PASS" if not problems else "FAIL: " + "; ".join(problems)
    print(f"{case}: {type(model).__name__} on {device}: transformers loss {loss:.6f}, "
          f"program {e['loss']:.6f}, rel {rel:.2e}: {status}")
    return not problems


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    results = [check(c) for c in sys.argv[1:]]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
