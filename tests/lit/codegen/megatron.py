# Rewrites a plan's linear signatures to Megatron's pattern (the planner keeps tiny models
# replicated): names ending in proj (attention / MLP output) row-parallel, the others column.
import json, re, sys
doc = json.load(open(sys.argv[1]))
for op in doc["ops"]:
    if op["kind"] == "linear":
        op["signature"] = "row" if re.search(r"(attn\.proj|mlp\.proj|o_proj|down_proj)$", op["op"]) else "column"
json.dump(doc, open(sys.argv[1], "w"), indent=2)
