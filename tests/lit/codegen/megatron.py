# Rewrites a plan's signatures to Megatron's pattern (the planner keeps tiny models replicated):
# linear names ending in proj (attention / MLP output) row-parallel, the other linears column,
# attention by heads (a packed qkv is then split per q/k/v segment, as Megatron's fused QKV).
# With --vocab the embedding is vocab-parallel too (Megatron's VocabParallelEmbedding; with the
# column-parallel lm_head a tied table is then split by vocabulary rows on both).
# Usage: megatron.py PLAN.json [--vocab]
import json, re, sys
doc = json.load(open(sys.argv[1]))
vocab = "--vocab" in sys.argv[2:]
for op in doc["ops"]:
    if op["kind"] == "linear":
        op["signature"] = "row" if re.search(r"(attn\.proj|mlp\.proj|o_proj|down_proj)$", op["op"]) else "column"
    elif op["kind"] == "attention" and "heads" in op.get("candidates", ["heads"]):
        op["signature"] = "heads"
    elif op["kind"] == "embedding" and vocab and "vocab" in op.get("candidates", ["vocab"]):
        op["signature"] = "vocab"
json.dump(doc, open(sys.argv[1], "w"), indent=2)
