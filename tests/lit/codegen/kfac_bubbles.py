"""Rewrites a K-FAC plan's reductions and inversions (kfac.devices[].items) to fixed places, for
kfac_bubbles.test: device 0, layer 0: reduce_A/G in step 1 at time 0, inv_A in step 0 at time 0
(it must wait for the reductions), inv_G forced in step 1; device 1, layer 4: reduce_A in step 0 at
time 0 (it must wait for the layer's curvature) and inv_A in step 1 at time 0. Device 0's curvature
of the output gradients of micro-batch 1 moves to step 1 at time 0: its operands are kept after
that micro-batch's backward in the refresh step and accumulated in step 1, before the reductions.
Each device gets its own refresh interval (kfac.devices[].refresh_steps, its layers'
kfac.layers[].refresh_steps): device 0 (stage 0) 2 steps, device 1 (stage 1) 3; K is 3."""
import json, sys

p = json.load(open(sys.argv[1]))
k = p["kfac"]
k["refresh_steps"] = 3
own_k = {0: 2, 1: 3}
for l in k["layers"]:
    l["refresh_steps"] = own_k[l["stage"]]


def item(name, layer, step, start=0.0, forced=False):
    # At time 0: slot 0, before the device's first instruction (a forced item runs at the
    # step's end whatever its slot).
    return {"item": name, "layer": layer, "microbatch": -1, "step": step, "start_s": start,
            "end_s": start, "forced": forced, "slot": 0}


extra = {0: [item("reduce_A", 0, 1), item("reduce_G", 0, 1), item("inv_A", 0, 0),
             item("inv_G", 0, 1, forced=True)],
         1: [item("reduce_A", 4, 0), item("inv_A", 4, 1)]}
for d in k["devices"]:
    d["refresh_steps"] = own_k[d["device"]]
    d["items"] = [i for i in d["items"] if i["item"].startswith("curv")] + extra[d["device"]]
    for i in d["items"]:
        if d["device"] == 0 and i["item"] == "curv_G" and i["microbatch"] == 1:
            i.update(step=1, start_s=0.0, end_s=0.0, forced=False, slot=0)
json.dump(p, open(sys.argv[2], "w"), indent=1)
