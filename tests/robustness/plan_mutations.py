#!/usr/bin/env python3
"""Every field of a real plan.json, mutated (issue 49).

Plans tiny-gpt once (pp=2, tp=2, --optimizer kfac: stages, collectives and
K-FAC items exist), generates its CPU project, then applies a table of
mutations to every field of the plan: each object key removed, each value
replaced by one of another type, and each value replaced by a bad one of its
type (negative, huge, past 32 bits, empty, an unknown name, an SBP that splits
a dimension the tensor does not have or names an unknown layout). For each
mutated plan `autoddl codegen` must either refuse it (exit 1..123, exactly one
line on stderr naming the plan file and a JSON pointer) or write a project
whose every file but plan.json is byte-identical to the unmutated plan's (the
field is informational). Arrays are sampled at their first element. Projects
are written under /dev/shm where there is one (codegen syncs every file).

    plan_mutations.py AUTODDL EXAMPLES_MODELS WORKDIR
"""
import concurrent.futures
import copy
import filecmp
import json
import os
import re
import shutil
import subprocess
import sys

A, MODELS, WORK = (os.path.realpath(a) for a in sys.argv[1:4])
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
os.chdir(WORK)


def run(*args):
    return subprocess.run([A, *args], capture_output=True, text=True,
                          timeout=60)


r = run("plan", os.path.join(MODELS, "tiny-gpt.json"), "--cluster",
        "dgx-a100-hdr", "--gpus", "4", "--global-batch", "8", "--fix",
        "pp=2,tp=2", "--optimizer", "kfac", "--no-why", "-o", "good.json")
if r.returncode != 0:
    sys.exit("FAIL: could not plan tiny-gpt: " + r.stderr)
if run("codegen", "good.json", "-o", "ref").returncode != 0:
    sys.exit("FAIL: could not generate the reference project")
good = json.load(open("good.json"))
SCRATCH = WORK
if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
    import tempfile
    SCRATCH = tempfile.mkdtemp(prefix="autoddl-mutations-", dir="/dev/shm")


def token(key):
    return str(key).replace("~", "~0").replace("/", "~1")


def nodes(value, path=()):
    """(path, value) of every field, arrays sampled at both ends."""
    yield path, value
    if isinstance(value, dict):
        items = list(value.items())
        if path and path[-1] == "op_kinds_s" or len(path) > 1 and \
                path[-2] == "op_kinds_by_device_s":
            items = items[:1]  # keyed by op kind: one stands for all
        for k, v in items:
            yield from nodes(v, path + (k,))
    elif isinstance(value, list):
        for i in [0] if value else []:
            yield from nodes(value[i], path + (i,))


def other_type(v):
    if isinstance(v, bool):
        return "yes"
    if isinstance(v, (int, float)):
        return "12"
    if isinstance(v, str):
        return 12
    if isinstance(v, list):
        return {"x": 1}
    if isinstance(v, dict):
        return [1]
    return 1


def bad_values(v):
    if isinstance(v, bool):
        return [None]
    if isinstance(v, int):
        return [-1, 2**40]
    if isinstance(v, float):
        return [-1.5, float("inf")]
    if isinstance(v, str):
        out = ["bogus", ""]
        if re.fullmatch(r"S\(\d+\)|B|P", v):
            out += ["S(9)", "Q", "S(-1)"]
        return out
    if isinstance(v, list):
        return [[]] + ([[-4] * len(v)] if v and isinstance(v[0], int) else [])
    if isinstance(v, dict):
        return [{}]
    return []


def mutations():
    for path, value in nodes(good):
        if not path:
            continue
        if isinstance(path[-1], str):
            yield path, "removed", None
        yield path, "type", other_type(value)
        for b in bad_values(value):
            yield path, "value", b


def apply(path, kind, new):
    doc = copy.deepcopy(good)
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    if kind == "removed":
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    return doc


def same_project(out):
    cmp = filecmp.dircmp("ref", out, ignore=["plan.json"])

    def same(c):
        if c.left_only or c.right_only or c.diff_files or c.funny_files:
            return False
        return all(same(s) for s in c.subdirs.values())

    return same(cmp)


# Keys plans of format version 1 written before them lack: their absence is
# read as those plans meant it (docs/plan-format.md), which may change the
# program (the predicted peak it names when an allocation fails).
OLDER_PLANS_LACK = {"/predicted/peak_host_memory_bytes",
                    "/predicted/peak_allocated_bytes"}


# Values of another meaning, not bad ones: an empty K-FAC placement is legal
# (the programs run every item unplaced at the step's end, as for a layer the
# packer placed on its Chimera copy only).
LEGAL = {("/kfac/devices/0/items", "[]")}


def check(n, path, kind, new):
    pointer = "/" + "/".join(token(k) for k in path)
    name = "m%04d.json" % n
    with open(name, "w") as f:
        # NaN/inf: Python writes them bare (invalid JSON): a refusal too.
        json.dump(apply(path, kind, new), f, indent=1)
    out = os.path.join(SCRATCH, "out%04d" % n)
    r = run("codegen", name, "-o", out)
    what = "%s %s -> %s" % (pointer, kind, json.dumps(new))
    lines = r.stderr.splitlines()
    try:
        if r.returncode == 0:
            if kind == "removed" and pointer in OLDER_PLANS_LACK:
                return None  # read as in the plans written before it
            if (pointer, json.dumps(new)) in LEGAL:
                return None
            if not same_project(out):
                return "exit 0 and a different program: " + what
            return None
        if not 1 <= r.returncode <= 123:
            return "exit %d: %s" % (r.returncode, what)
        if len(lines) != 1:
            return "%d lines on stderr: %s" % (len(lines), what)
        if name not in lines[0] or not re.search(r"(at /|:\d+:\d+:)",
                                                 lines[0]):
            return "the line names no place in %s: %s: %s" % (name, what,
                                                              lines[0])
        return None
    finally:
        shutil.rmtree(out, ignore_errors=True)
        os.remove(name)


table = list(mutations())
with concurrent.futures.ThreadPoolExecutor(2) as pool:
    results = list(pool.map(lambda a: check(a[0], *a[1]), enumerate(table)))
failures = [r for r in results if r]
if SCRATCH != WORK:
    shutil.rmtree(SCRATCH, ignore_errors=True)
for f in failures:
    print("FAIL:", f)
print("%d mutations, %d failures" % (len(table), len(failures)))
sys.exit(1 if failures else 0)
