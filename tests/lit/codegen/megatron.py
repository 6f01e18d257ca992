# Rewrites a plan's signatures to Megatron's pattern (the planner keeps tiny models replicated,
# which would leave the tp kernels untested). The one copy every test and GPU script uses:
# linear names ending in proj (attention / MLP output, not q/k/v/gate/up) or in conv2.lin (a
# GCN's second layer) row-parallel, every other linear column-parallel; attention by heads where
# the op offers it (a packed qkv is then split per q/k/v segment, as Megatron's fused QKV).
# With --vocab the embedding is vocab-parallel too (Megatron's VocabParallelEmbedding; with the
# column-parallel lm_head a tied table is then split by vocabulary rows on both). With --sequence
# the norms and residual adds split the sequence (Megatron's sequence parallelism), where offered.
# Usage: megatron.py PLAN.json [--vocab] [--sequence]
import json, re, sys
path = sys.argv[1]
doc = json.load(open(path))
vocab = "--vocab" in sys.argv[2:]
sequence = "--sequence" in sys.argv[2:]
for op in doc["ops"]:
    offered = op.get("candidates", [])
    if op["kind"] == "linear":
        row = re.search(r"(attn\.proj|mlp\.proj|o_proj|down_proj|conv2\.lin)$", op["op"])
        op["signature"] = "row" if row else "column"
    elif op["kind"] == "attention" and "heads" in offered:
        op["signature"] = "heads"
    elif op["kind"] == "embedding" and vocab and "vocab" in offered:
        op["signature"] = "vocab"
    elif op["kind"] in ("layernorm", "rmsnorm", "add") and sequence and "sequence" in offered:
        op["signature"] = "sequence"
json.dump(doc, open(path, "w"), indent=2)
