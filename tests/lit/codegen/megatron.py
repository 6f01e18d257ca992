# Rewrites a plan's signatures to Megatron's pattern (the planner keeps tiny models replicated):
# linear names ending in proj (attention / MLP output) row-parallel, the other linears column,
# attention by heads (a packed qkv is then split per q/k/v segment, as Megatron's fused QKV).
import json, re, sys
doc = json.load(open(sys.argv[1]))
for op in doc["ops"]:
    if op["kind"] == "linear":
        op["signature"] = "row" if re.search(r"(attn\.proj|mlp\.proj|o_proj|down_proj)$", op["op"]) else "column"
    elif op["kind"] == "attention" and "heads" in op.get("candidates", ["heads"]):
        op["signature"] = "heads"
json.dump(doc, open(sys.argv[1], "w"), indent=2)
