#!/usr/bin/env python3
"""A/B of two first-order programs (without and with progress_sends), run at once on disjoint cores
(0-3 and 4-7, swapped every other repeat), each measured from its step --warmup on."""
import json, os, subprocess, sys, types
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import utilisation_cpu as u
a = types.SimpleNamespace(np=4, kfac_fill="thread")
dirs = {"without": "b64_i1/first_order", "with": "b64_p/first_order"}
trains = {}
for v, d in dirs.items():
    subprocess.run(f"cmake -S {d} -B {d}/build -DCMAKE_BUILD_TYPE=Release >/dev/null && "
                   f"cmake --build {d}/build -j 8 >/dev/null", shell=True, check=True)
    trains[v] = f"{d}/build/train"
steps, warmup, out = 24, 6, []
for r in range(int(sys.argv[1]) if len(sys.argv) > 1 else 4):
    procs, outs = [], {}
    for i, v in enumerate(dirs):
        outs[v] = f"/tmp/ab/{v}_{r}"
        procs.append(u.launch(a, trains[v], steps, 4 * ((i + r) % 2), outs[v]))
    for p in procs:
        assert p.wait() == 0
    rep = {v: u.window_result(a, outs[v], steps, warmup) for v in dirs}
    rep["cores"] = {v: 4 * ((i + r) % 2) for i, v in enumerate(dirs)}
    print(f"repeat {r}: " + ", ".join(f"{v} step {rep[v]['step_seconds']*1e3:.0f} ms util "
                                     f"{rep[v]['utilisation']:.3f}" for v in dirs), flush=True)
    out.append(rep)
json.dump(out, open(os.environ.get("OUT", "/tmp") + "/ab_first_order.json", "w"), indent=1)
