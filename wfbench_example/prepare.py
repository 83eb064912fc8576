"""Lay out a WfBench workflow folder: raw/ (the workflow's input files, random bytes of the instance's sizes),
tasks.json (what the Rakefile runs), instance.json (the instance as run, WfFormat 1.5, scaled sizes) and the
Rakefile.

    python -m wfbench_example.prepare FOLDER --recipe blast --tasks 45 [--seed 1] [--scale F | --footprint-mb M]
    python -m wfbench_example.prepare FOLDER --instance benchmark.json [--scale F | --footprint-mb M]
    prepare(folder, inst, cpu_work=1) -> the instance as laid out

Sizes are scaled so a run fits the testbed's disk: --scale multiplies every file's size (a file of > 0 bytes
keeps at least 1), --footprint-mb picks the factor that makes the instance's total file bytes M MB.  Use the same
--scale for the sizes of one recipe that are compared (the bench takes it from the largest).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys

try:
    from . import instance as inst_mod
except ImportError:                      # run as a script
    import instance as inst_mod

HERE = os.path.dirname(os.path.abspath(__file__))
RAW = "raw"
CHUNK = 1 << 20


def _wfbench() -> str:
    """The wfbench program of this environment (installed with wfcommons next to this Python)."""
    exe = os.path.join(os.path.dirname(sys.executable), "wfbench")
    return exe if os.path.exists(exe) else (shutil.which("wfbench") or "wfbench")


def tasks_spec(inst: inst_mod.Instance, cpu_work: int = 1, percent_cpu: float = 1.0) -> dict:
    """tasks.json: workflow inputs renamed under raw/; sinks = the targets no task needs (rake's default)."""
    ins = set(inst.inputs())
    path = {f: (f"{RAW}/{f}" if f in ins else f) for t in inst.tasks for f in (*t.inputs, *t.outputs)}
    for p in path.values():
        if p.startswith(("/", "..")) or "/../" in p:
            raise inst_mod.InstanceError(f"file name {p!r} leaves the workflow folder")
    tasks = [{"id": t.id, "stage": t.stage, "inputs": [path[f] for f in t.inputs],
              "outputs": {path[f]: inst.sizes[f] for f in t.outputs}} for t in inst.tasks]
    needed = {f for t in tasks for f in t["inputs"]}
    sinks = [(next(iter(t["outputs"])) if t["outputs"] else t["id"]) for t in tasks
             if not (set(t["outputs"]) & needed)]
    return {"instance": inst.name, "wfbench": _wfbench(), "cpu_work": cpu_work, "percent_cpu": percent_cpu,
            "tasks": tasks, "sinks": sinks}


def prepare(folder: str, inst: inst_mod.Instance, cpu_work: int = 1) -> inst_mod.Instance:
    os.makedirs(os.path.join(folder, RAW), exist_ok=True)
    spec = tasks_spec(inst, cpu_work)
    for f in inst.inputs():
        with open(os.path.join(folder, RAW, f), "wb") as fh:
            left = inst.sizes[f]
            while left > 0:
                n = min(left, CHUNK)
                fh.write(os.urandom(n))
                left -= n
    with open(os.path.join(folder, "tasks.json"), "w") as fh:
        json.dump(spec, fh, indent=1)
    inst.write_wfformat(os.path.join(folder, "instance.json"))
    shutil.copy(os.path.join(HERE, "workflow", "Rakefile"), os.path.join(folder, "Rakefile"))
    return inst


def factor_for(inst: inst_mod.Instance, footprint_mb: float) -> float:
    return footprint_mb * 1e6 / max(1, inst.total_bytes())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="wfbench_example.prepare", description=__doc__.split("\n\n")[0],
                                epilog="exit status: 0 laid out, 1 could not write the folder, 2 bad input",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--recipe", help=f"a wfcommons recipe: {', '.join(sorted(inst_mod.RECIPES))}")
    src.add_argument("--instance", help="a WfFormat instance (WfBench's benchmark JSON, or any)")
    p.add_argument("--tasks", type=int, default=50, help="with --recipe: number of tasks asked (default 50)")
    p.add_argument("--seed", type=int, default=1)
    sc = p.add_mutually_exclusive_group()
    sc.add_argument("--scale", type=float, help="factor on every file size")
    sc.add_argument("--footprint-mb", type=float, help="scale so the files total this many MB")
    p.add_argument("--per-stage", type=int, help="keep at most this many tasks per stage (a tiny workflow)")
    p.add_argument("--cpu-work", type=int, default=1, help="wfbench --cpu-work of every task (default 1)")
    a = p.parse_args(argv)
    try:
        inst = (inst_mod.generate(a.recipe, a.tasks, a.seed) if a.recipe else inst_mod.load(a.instance))
        if a.per_stage:
            inst = inst.pruned(a.per_stage)
        if a.footprint_mb:
            inst = inst.scaled(factor_for(inst, a.footprint_mb))
        elif a.scale:
            inst = inst.scaled(a.scale)
    except inst_mod.InstanceError as e:
        print(f"wfbench_example.prepare: {e}", file=sys.stderr)
        return 2
    try:
        prepare(a.folder, inst, a.cpu_work)
    except OSError as e:
        print(f"wfbench_example.prepare: {e}", file=sys.stderr)
        return 1
    print(f"{a.folder}: {len(inst.tasks)} tasks ({', '.join(f'{k} {v}' for k, v in inst.stage_counts().items())}),"
          f" {len(inst.inputs())} input files, {inst.total_bytes() / 1e6:.1f} MB in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
