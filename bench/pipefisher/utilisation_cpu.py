#!/usr/bin/env python3
"""Pipeline utilisation with and without K-FAC, measured on generated CPU programs.

Issue 22 item 6 (first bullet). Two phases, so that the measurement runs on a machine without an
autoddl build (the GPU machine's 16 cores):

  stage OUT [--autoddl A] [--hidden H] [--batch B] [--microbatch M] [--cluster C] [--gflops F]
            [--kfac-refresh K|K0,K1,K2,K3]
      plan a 4-stage GPT (1F1B) twice, first-order and --optimizer kfac, on the cluster C
      (default cpu-core: one CPU core per rank at F GFLOP/s, written into OUT, so that the plan's
      K and placement fit the CPU program's proportions), and generate both CPU projects into
      OUT (each carries its runtime; a few hundred KiB). --kfac-refresh K pins the K-FAC plan's
      refresh interval, for every stage or one per stage (plan --kfac-refresh; default: each
      stage's own, what its bubbles need), e.g. chosen from the idle time a traced first-order
      run measured (`idle`).
  idle R.json --plan P.plan.json
      from a utilisation.json of `run`: each stage's measured idle seconds per first-order step
      against the K-FAC work of one refresh (the plan's item times scaled to the measured ones)
      and its preconditioning, and the smallest K whose work per step fits that idle: for every
      stage, and one per stage.
  fit --result R.json --plan P.plan.json [...] --cluster C -o FITTED.json
      the cluster C fitted to measured runs (a utilisation.json of `run` and the K-FAC plan it ran,
      one pair or more): gpu.op_time_scale (forward, backward) from the traced F/B time of each
      stage of the first-order run against the plan's op_kinds_by_device_s, and
      gpu.kfac_time_scale (curvature, inversion, precondition) from the traced K-FAC items of
      the K-FAC run against the plan's item times (docs/calibrate.md "A cpu-core cluster fitted
      to traced CPU runs"). Stage with --cluster FITTED.json.
  run OUT [--steps N] [--warmup W] [--np 4] [--repeats R] [--paired]
      build both with CMake, run each under
      mpirun --allow-run-as-root --oversubscribe --bind-to core (none where there are fewer cores than
      ranks: a function check), one rank per stage, with --trace;
      writes OUT/utilisation.json.

Utilisation = busy time summed over the stages / (stages x step time), over the steps after the
warm-up: a rank's busy time is the union of its compute events (tid 0 of its trace: forward,
backward, and the K-FAC items curv_*, inv_*, precond, which the backward partly nests), its step
time the mean of metrics.json's step_seconds. --paired: the two variants run at once on disjoint
cores (ranks pinned with taskset: first-order on cores 0..np-1 and K-FAC on np..2np-1, swapped on
every other repeat), each run measured alone from its step --warmup on (utilisation_window), so
that what slows the machine slows both alike; --warmup and --steps are rounded up to multiples of
the plan's K. Take --warmup and --steps multiples of the plan's K so
that the measured steps hold whole refresh cycles (the K-FAC work of one cycle is spread over its K
steps' bubbles). The plan's predicted utilisation (plan.json
kfac.utilisation_first_order and kfac.utilisation) is of the plan's cluster preset, so the
comparison is of shape (how much of the bubbles K-FAC fills), not of absolute times.
"""
import argparse, json, math, os, shutil, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VARIANTS = ("first_order", "kfac")


def model_json(hidden):
    return {"template": "gpt",
            "description": "bench/pipefisher/utilisation_cpu.py: one layer per stage of 4",
            "config": {"vocab_size": 512, "max_positions": 64, "hidden_size": hidden,
                       "num_layers": 4, "num_heads": 4}}


def cpu_cluster(gflops):
    """One CPU core per "GPU": the dgx-h100-ndr preset with the compute of one core (every dtype
    at `gflops`, fp32 as the CPU runtime computes), so that the plan prices forward, backward and
    K-FAC items in the proportions the CPU program runs them and its K and placement fit there."""
    with open(os.path.join(ROOT, "examples/clusters/dgx-h100-ndr.json")) as f:
        c = json.load(f)
    c["name"] = "cpu-core"
    c["description"] = (f"bench/pipefisher/utilisation_cpu.py: one CPU core ({gflops} GFLOP/s "
                        "fp32 sgemm) per rank, 16 per node, MPI over shared memory")
    c["gpus_per_node"] = 16
    g = c["gpu"]
    g["model"] = "one CPU core (OpenBLAS, one thread)"
    g["sm_count"] = 1
    g["peak_tflops"] = {k: gflops / 1000 for k in g["peak_tflops"]}
    g["memory_GB"] = 8
    g["memory_bandwidth_GBps"] = 10
    g["kernel_launch_us"] = 1.0
    g["source"] = {k: "assumed for bench/pipefisher/utilisation_cpu.py, not measured"
                   for k in ("peak_tflops", "memory_bandwidth_GBps", "kernel_launch_us")}
    c["intra_node"].update({"bandwidth_GBps": 5, "p2p_bandwidth_GBps": 5, "latency_us": 2.0})
    c["intra_node"]["source"] = {k: "assumed (MPI over shared memory), not measured"
                                 for k in ("bandwidth_GBps", "p2p_bandwidth_GBps", "latency_us")}
    return c


def stage(a):
    os.makedirs(a.out, exist_ok=True)
    model = os.path.join(a.out, "model.json")
    with open(model, "w") as f:
        json.dump(model_json(a.hidden), f, indent=1)
    cluster = a.cluster
    if os.path.isfile(cluster):  # kept beside the plans
        dst = os.path.join(a.out, os.path.basename(cluster))
        if os.path.abspath(dst) != os.path.abspath(cluster):
            shutil.copyfile(cluster, dst)
        cluster = dst
    if cluster == "cpu-core":
        cluster = os.path.join(a.out, "cpu-core.json")
        with open(cluster, "w") as f:
            json.dump(cpu_cluster(a.gflops), f, indent=1)
    for v in VARIANTS:
        plan = os.path.join(a.out, v + ".plan.json")
        extra = ["--optimizer", "kfac"] if v == "kfac" else []
        if v == "kfac" and a.kfac_refresh not in ("", "0"):
            extra += ["--kfac-refresh", a.kfac_refresh]
        if v == "kfac" and a.kfac_fill:
            extra += ["--kfac-fill", a.kfac_fill]
        subprocess.run([a.autoddl, "plan", model, "--cluster", cluster, "--gpus", "4",
                        "--global-batch", str(a.batch), "--seq", "64", "--no-why", "-o", plan,
                        "--fix", f"tp=1,pp=4,dp=1,microbatch={a.microbatch},schedule=1f1b"]
                       + extra, check=True, stdout=subprocess.DEVNULL)
        proj = os.path.join(a.out, v)
        shutil.rmtree(proj, ignore_errors=True)
        subprocess.run([a.autoddl, "codegen", plan, "--model", model, "--backend", "cpu",
                        "-o", proj], check=True, stdout=subprocess.DEVNULL)
    print(f"staged {a.out}: run it with {sys.argv[0]} run {a.out}")


def busy_us(events, pid):
    """A rank's busy time, microseconds: the union of its compute intervals (tid 0), plus the CPU
    time of the K-FAC items its filling thread ran (tid 2, args.cpu_us: that thread shares the
    rank's core at idle priority, so it ran only while tid 0 did not)."""
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                   if e.get("pid") == pid and e.get("tid") == 0 and e.get("ph") == "X")
    total, end = 0.0, float("-inf")
    for s, e in spans:
        if e <= end:
            continue
        total += e - max(s, end)
        end = e
    return total + sum(e["args"]["cpu_us"] for e in events if e.get("pid") == pid and
                       e.get("tid") == 2 and e.get("ph") == "X" and "cpu_us" in e.get("args", {}))


def kind(name):
    """An event's kind: F, B, W (the schedule's instructions) or the K-FAC item (curv_A, ...)."""
    first = name.split()[0]
    return first if " " in name else first[0]


def kinds_us(events, pid):
    """A rank's compute time per kind (tid 0; tid 2: the filling thread's CPU time), microseconds."""
    out = {}
    for e in events:
        if e.get("pid") == pid and e.get("ph") == "X" and e.get("tid") in (0, 2):
            if e["tid"] == 2 and "cpu_us" not in e.get("args", {}):
                continue
            k = kind(e["name"])
            out[k] = out.get(k, 0.0) + (e["dur"] if e["tid"] == 0 else e["args"]["cpu_us"])
    return out


def window_busy_us(events, pid, steps, warmup):
    """Busy time of one run's steps from `warmup` on: the union of the rank's compute intervals
    from its first forward of step `warmup` (each step runs the same number of forwards)."""
    fwd = sorted(e["ts"] for e in events if e.get("pid") == pid and e.get("tid") == 0 and
                 e.get("ph") == "X" and kind(e["name"]) == "F")
    start = fwd[len(fwd) // steps * warmup]
    return busy_us([e for e in events if e.get("ts", 0) >= start], pid)


def measure(a, v):
    proj = os.path.join(a.out, v)
    build = os.path.join(proj, "build")
    subprocess.run(["cmake", "-S", proj, "-B", build, "-DCMAKE_BUILD_TYPE=Release"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", build, "-j", str(os.cpu_count() or 2)], check=True,
                   stdout=subprocess.DEVNULL)
    res = {}
    for phase, steps in (("warmup", a.warmup), ("measured", a.warmup + a.steps)):
        out = os.path.join(a.out, "runs", v, phase)
        shutil.rmtree(out, ignore_errors=True)
        # OpenBLAS on one thread a rank: one rank per core.
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        # One rank per core where there are enough (else a function check: unbound).
        bind = "core" if a.np <= (os.cpu_count() or 1) else "none"
        subprocess.run(["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", bind,
                        "-np", str(a.np), os.path.join(build, "train"), "--steps", str(steps),
                        "--trace", "--out", out, "--quiet"], check=True, env=env)
        res[phase] = out
    # The measured run minus the warm-up run: the steps after the warm-up.
    def load(out):
        m = json.load(open(os.path.join(out, "metrics.json")))
        t = json.load(open(os.path.join(out, "trace.json")))
        ev = t["traceEvents"] if isinstance(t, dict) else t
        return m, ev, [busy_us(ev, r) for r in range(a.np)]
    mw, ew, bw = load(res["warmup"])
    mm, em, bm = load(res["measured"])
    step_s = sum(mm["step_seconds"][a.warmup:]) / a.steps
    busy_s = [(m - w) / 1e6 / a.steps for m, w in zip(bm, bw)]
    # Cross-checks: the measured run alone, from its step `warmup` on; and per kind (F, B,
    # curv_A, inv_G, precond, ...) the measured minus the warm-up run, seconds per step.
    window_s = [window_busy_us(em, r, a.warmup + a.steps, a.warmup) / 1e6 / a.steps
                for r in range(a.np)]
    per_kind = []
    for r in range(a.np):
        km, kw = kinds_us(em, r), kinds_us(ew, r)
        per_kind.append({k: (km[k] - kw.get(k, 0.0)) / 1e6 / a.steps for k in sorted(km)})
    plan = json.load(open(os.path.join(a.out, v + ".plan.json")))
    return {"step_seconds": step_s, "busy_seconds_per_stage": busy_s,
            "utilisation": sum(busy_s) / (a.np * step_s),
            "utilisation_window": sum(window_s) / (a.np * step_s),
            "seconds_per_step_by_kind": per_kind,
            "kfac_info": {k: x for k, x in mm["info"].items() if k.startswith("kfac")},
            "plan": plan.get("kfac", {}) and {
                "utilisation_first_order": plan["kfac"]["utilisation_first_order"],
                "utilisation": plan["kfac"]["utilisation"],
                "refresh_steps": plan["kfac"]["refresh_steps"]}}


def build_all(a):
    """Configures and builds both projects at once (half the cores each); their train paths."""
    jobs = max(1, (os.cpu_count() or 2) // len(VARIANTS))
    procs, trains = [], {}
    for v in VARIANTS:
        proj = os.path.join(a.out, v)
        build = os.path.join(proj, "build")
        procs.append(subprocess.Popen(
            f"cmake -S {proj} -B {build} -DCMAKE_BUILD_TYPE=Release >/dev/null && "
            f"cmake --build {build} -j {jobs} >/dev/null", shell=True))
        trains[v] = os.path.join(build, "train")
    for p in procs:
        if p.wait() != 0:
            sys.exit("build failed")
    return trains


def refresh_steps(a):
    """The K-FAC plan's K per stage (its devices' refresh_steps; older plans: one K)."""
    plan = json.load(open(os.path.join(a.out, "kfac.plan.json")))
    kf = plan["kfac"]
    return [d.get("refresh_steps", kf["refresh_steps"]) for d in kf["devices"]], plan


def window_kinds_us(events, pid, steps, warmup):
    """A rank's compute time per kind from its first forward of step `warmup` on."""
    fwd = sorted(e["ts"] for e in events if e.get("pid") == pid and e.get("tid") == 0 and
                 e.get("ph") == "X" and kind(e["name"]) == "F")
    start = fwd[len(fwd) // steps * warmup]
    return kinds_us([e for e in events if e.get("ts", 0) >= start], pid)


def launch(a, train, steps, first_core, out, extra=()):
    """mpirun of one variant, rank r pinned to core first_core + r with taskset (where it exists)."""
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               AUTODDL_KFAC_FILL=a.kfac_fill)
    prog = [train, "--steps", str(steps), "--trace", "--out", out, "--quiet", *extra]
    if shutil.which("taskset"):
        pin = ('exec taskset -c $(( (%d + ${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}) %% %d )) '
               '"$0" "$@"' % (first_core, os.cpu_count() or 1))
        prog = ["sh", "-c", pin] + prog
    return subprocess.Popen(["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to",
                             "none", "-np", str(a.np)] + prog, env=env)


def window_result(a, out, steps, warmup):
    m = json.load(open(os.path.join(out, "metrics.json")))
    t = json.load(open(os.path.join(out, "trace.json")))
    ev = t["traceEvents"] if isinstance(t, dict) else t
    n = steps - warmup
    step_s = sum(m["step_seconds"][warmup:]) / n
    busy = [window_busy_us(ev, r, steps, warmup) / 1e6 / n for r in range(a.np)]
    kinds = [{k: x / 1e6 / n for k, x in sorted(window_kinds_us(ev, r, steps, warmup).items())}
             for r in range(a.np)]
    return {"step_seconds": step_s, "busy_seconds_per_stage": busy,
            "utilisation": sum(busy) / (a.np * step_s), "seconds_per_step_by_kind": kinds,
            "kfac_info": {k: x for k, x in m["info"].items() if k.startswith("kfac")}}


def write_summary(a, summary):
    """OUT/utilisation.json, and one line: measured against the plan."""
    path = os.path.join(a.out, "utilisation.json")
    with open(path, "w") as f:
        json.dump(summary, f, indent=1)
    pred = summary["predicted"] or {}
    print(f"utilisation: first-order {summary['utilisation_first_order']:.3f}, K-FAC "
          f"{summary['utilisation_kfac']:.3f} (plan: {pred.get('utilisation_first_order', 0):.3f}"
          f" -> {pred.get('utilisation', 0):.3f}); step K-FAC / first-order "
          f"{summary['step_ratio_kfac_over_first_order']:.3f} (plan "
          f"{pred.get('step_ratio', 0):.3f}); K = {pred.get('refresh_steps')}; wrote {path}")


def run_paired(a):
    """Both variants at once on disjoint cores, --repeats times, the core sets swapped on every
    other repeat; each run measured alone from its step --warmup on."""
    K_plan, plan = refresh_steps(a)
    # --kfac-refresh: the K-FAC program runs another K than its plan's, on every layer (items
    # the plan placed in later steps of its cycle run at the shorter cycle's end).
    extra = {"kfac": ["--kfac-refresh", str(a.kfac_refresh)]} if a.kfac_refresh else {}
    K_stage = [a.kfac_refresh] * len(K_plan) if a.kfac_refresh else K_plan
    # The window holds whole cycles of every stage (of the longest where that is too long).
    K = math.lcm(*K_stage)
    K = K if K <= 24 else max(K_stage)
    up = lambda n: -(-n // K) * K
    warmup, steps = up(a.warmup), up(a.warmup) + up(a.steps)
    trains = build_all(a)
    repeats = []
    for r in range(a.repeats):
        procs, outs = [], {}
        for i, v in enumerate(VARIANTS):
            outs[v] = os.path.join(a.out, "runs", f"{v}_{r}")
            procs.append(launch(a, trains[v], steps, a.np * ((i + r) % 2), outs[v],
                                extra.get(v, ())))
        for p in procs:
            if p.wait() != 0:
                sys.exit("a run failed")
        rep = {v: window_result(a, outs[v], steps, warmup) for v in VARIANTS}
        rep["cores"] = {v: a.np * ((i + r) % 2) for i, v in enumerate(VARIANTS)}
        rep["step_ratio"] = rep["kfac"]["step_seconds"] / rep["first_order"]["step_seconds"]
        print(f"repeat {r}: utilisation {rep['first_order']['utilisation']:.3f} -> "
              f"{rep['kfac']['utilisation']:.3f}, step ratio {rep['step_ratio']:.3f}", flush=True)
        repeats.append(rep)
    mean = lambda xs: sum(xs) / len(xs)
    runs = {}
    for v in VARIANTS:
        rs = [rep[v] for rep in repeats]
        runs[v] = {"step_seconds": mean([x["step_seconds"] for x in rs]),
                   "busy_seconds_per_stage": [mean([x["busy_seconds_per_stage"][d] for x in rs])
                                              for d in range(a.np)],
                   "utilisation": mean([x["utilisation"] for x in rs]),
                   "seconds_per_step_by_kind": [
                       {k: mean([x["seconds_per_step_by_kind"][d].get(k, 0.0) for x in rs])
                        for k in rs[0]["seconds_per_step_by_kind"][d]} for d in range(a.np)],
                   "kfac_info": rs[-1]["kfac_info"]}
    kf = plan["kfac"]
    pred = {"utilisation_first_order": kf["utilisation_first_order"],
            "utilisation": kf["utilisation"], "refresh_steps": K_plan,
            "step_ratio": plan["predicted"]["step_time_s"] / kf["first_order_step_time_s"],
            "step_time_s": plan["predicted"]["step_time_s"],
            "first_order_step_time_s": kf["first_order_step_time_s"]}
    summary = {"cores": os.cpu_count(), "ranks": a.np, "steps": steps - warmup, "warmup": warmup,
               "repeats": a.repeats, "paired": True, "kfac_fill": a.kfac_fill,
               "kfac_refresh_run": K_stage,
               "utilisation_first_order": runs["first_order"]["utilisation"],
               "utilisation_kfac": runs["kfac"]["utilisation"],
               "step_ratio_kfac_over_first_order": mean([rep["step_ratio"] for rep in repeats]),
               "predicted": pred, "goal": "utilisation >= 0.90, step ratio <= 1.05",
               "runs": runs, "repeat_runs": repeats}
    write_summary(a, summary)


def fit(a):
    """The cluster a.cluster fitted to measured runs (module docstring, `fit`)."""
    if len(a.result) != len(a.plan):
        sys.exit("fit: give one --plan for each --result")
    doc = json.load(open(a.cluster))
    gpu = doc["gpu"]
    old_op = gpu.get("op_time_scale", {})
    old_kfac = gpu.get("kfac_time_scale", {})
    # Forward and backward: one factor per direction for the op kinds every stage holds (fitted
    # on the stages holding nothing else), and for a kind some stages alone hold (the embedding
    # on the first, the loss on the last) what those stages' measured time leaves over, shared
    # in proportion to the price: the traced F/B of a stage cannot be split by kind, so the
    # last stage's excess lands on its own kinds (cross_entropy), which makes its cost honest.
    rows, all_kinds = [], set()
    kfac_meas, kfac_pred = {}, {}
    for rpath, ppath in zip(a.result, a.plan):
        res, plan = json.load(open(rpath)), json.load(open(ppath))
        if plan["cluster"]["name"] != doc["name"]:  # its prices hold that cluster's factors
            sys.exit(f"fit: {ppath} was planned on {plan['cluster']['name']}, not on "
                     f"{doc['name']} ({a.cluster})")
        pred = plan["predicted"]["op_kinds_by_device_s"]
        shared = set.intersection(*(set(d) for d in pred))
        all_kinds.update(*(set(d) for d in pred))
        meas = res["runs"]["first_order"]["seconds_per_step_by_kind"]
        for d, pd in enumerate(pred):
            for dirn, letter in (("forward", "F"), ("backward", "B")):
                rows.append((dirn, meas[d].get(letter, 0.0),
                             sum(pd[k][dirn] for k in shared),
                             {k: pd[k][dirn] for k in pd if k not in shared}))
        K = plan["kfac"]["refresh_steps"]
        meask = res["runs"]["kfac"]["seconds_per_step_by_kind"]
        for dev in plan["kfac"]["devices"]:
            d = dev["device"]
            for it in dev["items"]:
                group = {"curv": "curvature", "inv": "inversion"}.get(it["item"].split("_")[0])
                if group:
                    kfac_pred[group] = kfac_pred.get(group, 0) + it["end_s"] - it["start_s"]
            kfac_pred["precondition"] = kfac_pred.get("precondition", 0) + K * dev["precondition_s"]
            for k, x in meask[d].items():
                group = {"curv": "curvature", "inv": "inversion", "precond": "precondition"}.get(
                    k.split("_")[0])
                if group:
                    kfac_meas[group] = kfac_meas.get(group, 0) + K * x
    scales = {}
    for dirn in ("forward", "backward"):
        plain = [(m, S) for dd, m, S, E in rows if dd == dirn and sum(E.values()) == 0]
        if plain and sum(S * S for _, S in plain) > 0:
            c = sum(m * S for m, S in plain) / sum(S * S for _, S in plain)
        else:
            c = (sum(m for dd, m, S, E in rows if dd == dirn) /
                 sum(S + sum(E.values()) for dd, m, S, E in rows if dd == dirn))
        num, den = {}, {}
        for dd, m, S, E in rows:
            if dd != dirn:
                continue
            tot = sum(E.values())
            for k, e in E.items():
                num[k] = num.get(k, 0) + (m - c * S) * (e / tot if tot > 0 else 0)
                den[k] = den.get(k, 0) + e
        for k in sorted(all_kinds):
            f = num[k] / den[k] if den.get(k, 0) > 0 else c
            scales.setdefault(k, {})[dirn] = min(100.0, max(0.05, f))
    op = {k: {d: round(old_op.get(k, {}).get(d, 1.0) * f, 4) for d, f in v.items()}
          for k, v in sorted(scales.items())}
    runs = ", ".join(f"{r} (plan {p})" for r, p in zip(a.result, a.plan))
    op["source"] = ("bench/pipefisher/utilisation_cpu.py fit: traced F/B seconds per stage of the "
                    f"first-order runs over the plans' op_kinds_by_device_s: {runs}")
    gpu["op_time_scale"] = op
    kfac = {g: round(old_kfac.get(g, 1.0) * kfac_meas[g] / kfac_pred[g], 4)
            for g in ("curvature", "inversion", "precondition")
            if kfac_pred.get(g, 0) > 0 and kfac_meas.get(g, 0) > 0}
    kfac["source"] = ("bench/pipefisher/utilisation_cpu.py fit: traced K-FAC item seconds of the "
                      f"K-FAC runs over the plans' item times: {runs}")
    gpu["kfac_time_scale"] = kfac
    doc["name"] = a.name
    doc["description"] = (doc.get("description", "") + "; fitted by bench/pipefisher/"
                          "utilisation_cpu.py fit to traced runs of generated CPU programs")
    with open(a.o, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {a.o}: op_time_scale {json.dumps({k: v for k, v in op.items() if k != 'source'})}"
          f"; kfac_time_scale {json.dumps({k: v for k, v in kfac.items() if k != 'source'})}")


def idle(a):
    """The smallest K whose K-FAC work per step fits each stage's measured idle (docstring)."""
    res, plan = json.load(open(a.result)), json.load(open(a.plan))
    fo, kf = res["runs"]["first_order"], res["runs"]["kfac"]
    K_runs = res.get("kfac_refresh_run") or plan["kfac"]["refresh_steps"]
    if not isinstance(K_runs, list):
        K_runs = [K_runs] * len(fo["busy_seconds_per_stage"])
    worst, per_stage = 1, []
    for d, busy in enumerate(fo["busy_seconds_per_stage"]):
        K_run = K_runs[d]
        idle_s = fo["step_seconds"] - busy
        kinds = kf["seconds_per_step_by_kind"][d]
        # Measured per step at K_run: curvature and inversions are once per refresh.
        # (reduce: under thread filling a reduction also accumulates the saved operands.)
        refresh = K_run * sum(x for k, x in kinds.items()
                              if k.split("_")[0] in ("curv", "reduce", "inv"))
        precond = kinds.get("precond", 0.0)
        room = idle_s - precond
        k = -(-refresh // room) if room > 0 else float("inf")
        worst = max(worst, k)
        per_stage.append(k)
        print(f"stage {d}: idle {1e3 * idle_s:.1f} ms/step, preconditioning {1e3 * precond:.1f}, "
              f"refresh work {1e3 * refresh:.1f} ms -> K >= {k:g}")
    print(f"smallest K that fits every stage's measured idle: {worst:g}")
    if all(math.isfinite(k) for k in per_stage):
        print("per stage: --kfac-refresh " + ",".join(str(int(k)) for k in per_stage))


def run(a):
    if a.paired:
        return run_paired(a)
    res = {v: measure(a, v) for v in VARIANTS}
    fo, kf = res["first_order"], res["kfac"]
    summary = {"cores": os.cpu_count(), "ranks": a.np, "steps": a.steps, "warmup": a.warmup,
               "utilisation_first_order": fo["utilisation"], "utilisation_kfac": kf["utilisation"],
               "step_ratio_kfac_over_first_order": kf["step_seconds"] / fo["step_seconds"],
               "predicted": kf["plan"], "goal": "utilisation >= 0.90, step ratio <= 1.05",
               "runs": res}
    write_summary(a, summary)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("stage")
    s.add_argument("out")
    s.add_argument("--autoddl", default=os.path.join(ROOT, "build/tools/autoddl/autoddl"))
    s.add_argument("--hidden", type=int, default=256)
    s.add_argument("--batch", type=int, default=16)
    s.add_argument("--microbatch", type=int, default=2)
    s.add_argument("--cluster", default="cpu-core",
                   help="a cluster preset or file to plan on; cpu-core (default): one CPU core "
                        "per rank at --gflops")
    s.add_argument("--gflops", type=float, default=60.0)
    s.add_argument("--kfac-fill", choices=("items", "fluid"), default="",
                   help="the K-FAC plan's packing (plan --kfac-fill; default: the planner's, items): "
                        "fluid models the CPU programs' filling thread (docs/pipefisher.md §3)")
    s.add_argument("--kfac-refresh", default="",
                   help="pin the K-FAC plan's refresh interval: K, or K0,K1,... one per stage "
                        "(plan --kfac-refresh; 0 or empty: the plan's own, per stage)")
    i = sub.add_parser("idle")
    i.add_argument("result", help="a utilisation.json of `run`")
    i.add_argument("--plan", required=True, help="the K-FAC plan that result ran")
    r = sub.add_parser("run")
    r.add_argument("out")
    r.add_argument("--steps", type=int, default=10)
    r.add_argument("--warmup", type=int, default=2)
    r.add_argument("--np", type=int, default=4)
    r.add_argument("--repeats", type=int, default=1)
    r.add_argument("--paired", action="store_true",
                   help="both variants at once on disjoint cores (see above)")
    r.add_argument("--kfac-refresh", type=int, default=0,
                   help="--paired: the K-FAC program's --kfac-refresh (default: the plan's K)")
    r.add_argument("--kfac-fill", choices=("placed", "waits", "thread"), default="thread",
                   help="--paired: the K-FAC program's AUTODDL_KFAC_FILL (placed: each item where "
                        "the plan put it; waits: queued there, run while the rank waits for a "
                        "pipeline receive; thread: queued there, run by a second thread at idle "
                        "priority on the rank's core; docs/kfac.md)")
    f = sub.add_parser("fit")
    f.add_argument("--result", action="append", required=True,
                   help="a utilisation.json of `run` (first-order and K-FAC runs)")
    f.add_argument("--plan", action="append", required=True,
                   help="the K-FAC plan that result ran (one per --result)")
    f.add_argument("--cluster", required=True, help="the cluster file the plans were made on")
    f.add_argument("--name", default="cpu-core-fitted")
    f.add_argument("-o", required=True)
    a = p.parse_args()
    {"stage": stage, "run": run, "fit": fit, "idle": idle}[a.cmd](a)


if __name__ == "__main__":
    main()
