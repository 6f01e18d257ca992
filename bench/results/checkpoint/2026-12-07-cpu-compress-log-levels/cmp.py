import json, sys
ex, co = sys.argv[1:3]
a = json.load(open(f"{ex}/metrics.json"))["loss"]; b = json.load(open(f"{co}/metrics.json"))["loss"]
first = int(json.load(open(f"{ex}/metrics.json"))["info"]["first_step"])
w = 10
out = []
for i in range(0, len(a) - w + 1, w):
    ma, mb = sum(a[i:i+w]) / w, sum(b[i:i+w]) / w
    out.append(f"{(mb - ma) / ma:+.3%}")
print(f"steps {first+1}-{first+len(a)}, 10-step means, compressed vs exact resume:", " ".join(out))
print(f"  mean over all: {(sum(b)-sum(a))/sum(a):+.3%}; step {first+1}: {a[0]:.5f} / {b[0]:.5f}")
