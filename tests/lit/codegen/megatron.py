# Rewrites a plan's signatures to Megatron's pattern (the planner keeps tiny models replicated,
# which would leave the tp kernels untested). The one copy every test and GPU script uses:
# linear names ending in proj (attention / MLP output, not q/k/v/gate/up) or in conv2.lin (a
# GCN's second layer) row-parallel, every other linear column-parallel; attention by heads where
# the op offers it (a packed qkv is then split per q/k/v segment, as Megatron's fused QKV).
# With --vocab the embedding is vocab-parallel too (Megatron's VocabParallelEmbedding; with the
# column-parallel lm_head a tied table is then split by vocabulary rows on both). With --sequence
# the norms and residual adds split the sequence (Megatron's sequence parallelism), where offered.
# With --rows batch every op offering a batch split takes it (the tp axis as data parallelism);
# --rows sequence: every op offering a sequence split takes it, attention and rotary by heads
# (DeepSpeed-Ulysses' pattern, the default plan of LLaMA-2 70B on 16 DGX H200s).
# The test scripts name these by one level: 1 Megatron's linears and heads, 2 and --vocab, 3 and
# --sequence too; batch or sequence: --rows.
# Usage: megatron.py PLAN.json [--vocab] [--sequence] | --rows batch|sequence | --level LEVEL
import json, re, sys
path = sys.argv[1]
doc = json.load(open(path))
args = sys.argv[2:]
level = args[args.index("--level") + 1] if "--level" in args else None
if level is not None and level not in ("0", "1", "2", "3", "batch", "sequence"):
    sys.exit(f"megatron.py: unknown level {level!r} (0-3, batch, sequence)")
if level == "0":
    sys.exit(0)
vocab = "--vocab" in args or level in ("2", "3")
sequence = "--sequence" in args or level == "3"
rows = args[args.index("--rows") + 1] if "--rows" in args else None
rows = level if level in ("batch", "sequence") else rows
for op in doc["ops"]:
    offered = op.get("candidates", [])
    if rows:
        if rows == "sequence" and op["kind"] in ("attention", "rotary") and "heads" in offered:
            op["signature"] = "heads"
        elif rows in offered:
            op["signature"] = rows
        continue
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
