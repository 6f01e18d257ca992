#!/usr/bin/env python3
"""Pipeline utilisation with and without K-FAC, measured on generated CPU programs.

Issue 22 item 6 (first bullet). Two phases, so that the measurement runs on a machine without an
autoddl build (the GPU machine's 16 cores):

  stage OUT [--autoddl A] [--hidden H] [--batch B] [--microbatch M] [--cluster C] [--gflops F]
      plan a 4-stage GPT (1F1B) twice, first-order and --optimizer kfac, on the cluster C
      (default cpu-core: one CPU core per rank at F GFLOP/s, written into OUT, so that the plan's
      K and placement fit the CPU program's proportions), and generate both CPU projects into
      OUT (each carries its runtime; a few hundred KiB).
  run OUT [--steps N] [--warmup W] [--np 4]   build both with CMake, run each under
      mpirun --allow-run-as-root --oversubscribe --bind-to core (none where there are fewer cores than
      ranks: a function check), one rank per stage, with --trace;
      writes OUT/utilisation.json.

Utilisation = busy time summed over the stages / (stages x step time), over the steps after the
warm-up: a rank's busy time is the union of its compute events (tid 0 of its trace: forward,
backward, and the K-FAC items curv_*, inv_*, precond, which the backward partly nests), its step
time the mean of metrics.json's step_seconds. Take --warmup and --steps multiples of the plan's K so
that the measured steps hold whole refresh cycles (the K-FAC work of one cycle is spread over its K
steps' bubbles). The plan's predicted utilisation (plan.json
kfac.utilisation_first_order and kfac.utilisation) is of the plan's cluster preset, so the
comparison is of shape (how much of the bubbles K-FAC fills), not of absolute times.
"""
import argparse, json, os, shutil, subprocess, sys

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
    if cluster == "cpu-core":
        cluster = os.path.join(a.out, "cpu-core.json")
        with open(cluster, "w") as f:
            json.dump(cpu_cluster(a.gflops), f, indent=1)
    for v in VARIANTS:
        plan = os.path.join(a.out, v + ".plan.json")
        extra = ["--optimizer", "kfac"] if v == "kfac" else []
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
    """The union of a rank's compute intervals (tid 0), microseconds."""
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                   if e.get("pid") == pid and e.get("tid") == 0 and e.get("ph") == "X")
    total, end = 0.0, float("-inf")
    for s, e in spans:
        if e <= end:
            continue
        total += e - max(s, end)
        end = e
    return total


def kind(name):
    """An event's kind: F, B, W (the schedule's instructions) or the K-FAC item (curv_A, ...)."""
    first = name.split()[0]
    return first if " " in name else first[0]


def kinds_us(events, pid):
    """A rank's compute time per kind (tid 0), microseconds."""
    out = {}
    for e in events:
        if e.get("pid") == pid and e.get("tid") == 0 and e.get("ph") == "X":
            k = kind(e["name"])
            out[k] = out.get(k, 0.0) + e["dur"]
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


def run(a):
    res = {v: measure(a, v) for v in VARIANTS}
    fo, kf = res["first_order"], res["kfac"]
    summary = {"cores": os.cpu_count(), "ranks": a.np, "steps": a.steps, "warmup": a.warmup,
               "utilisation_first_order": fo["utilisation"], "utilisation_kfac": kf["utilisation"],
               "step_ratio_kfac_over_first_order": kf["step_seconds"] / fo["step_seconds"],
               "predicted": kf["plan"], "goal": "utilisation >= 0.90, step ratio <= 1.05",
               "runs": res}
    path = os.path.join(a.out, "utilisation.json")
    with open(path, "w") as f:
        json.dump(summary, f, indent=1)
    print(f"utilisation: first-order {fo['utilisation']:.3f}, K-FAC {kf['utilisation']:.3f} "
          f"(plan: {kf['plan'].get('utilisation_first_order', 0):.3f} -> "
          f"{kf['plan'].get('utilisation', 0):.3f}); step K-FAC / first-order "
          f"{summary['step_ratio_kfac_over_first_order']:.3f}; wrote {path}")


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
    r = sub.add_parser("run")
    r.add_argument("out")
    r.add_argument("--steps", type=int, default=10)
    r.add_argument("--warmup", type=int, default=2)
    r.add_argument("--np", type=int, default=4)
    a = p.parse_args()
    stage(a) if a.cmd == "stage" else run(a)


if __name__ == "__main__":
    main()
