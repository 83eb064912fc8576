"""A WfFormat instance as the Rakefile needs it: tasks (id, stage, input files, output files) and file sizes.

    inst = load("blast-benchmark-45.json")          # WfFormat 1.5/1.6 (specification + execution) or 1.4 (files
                                                    #   per task with link input/output)
    inst = generate("blast", 45, seed=1)            # a wfcommons recipe's instance, through WfBench's own
                                                    #   create_benchmark_from_synthetic_workflow (its file names)
    inst = inst.scaled(1e-4)                        # every file's size times the factor, at least 1 byte when > 0
    inst = inst.pruned(2)                           # at most 2 tasks per stage (a tiny workflow for the test)
    inst.write_wfformat("instance.json")            # the instance as run (scaled sizes), WfFormat 1.5

The stage of a task is its category, else its name (as WfBench groups tasks).  Files no task writes are the
workflow's inputs.  wfcommons is imported only by generate().
"""
from __future__ import annotations

import copy
import datetime
import json
from dataclasses import dataclass, field

RECIPES = {"blast": "BlastRecipe", "bwa": "BwaRecipe", "cycles": "CyclesRecipe", "epigenomics": "EpigenomicsRecipe",
           "1000genome": "GenomeRecipe", "genome": "GenomeRecipe", "montage": "MontageRecipe",
           "seismology": "SeismologyRecipe", "soykb": "SoykbRecipe", "srasearch": "SrasearchRecipe",
           "rnaseq": "RnaseqRecipe"}


class InstanceError(Exception):
    """Bad or unsupported instance; the message is one line."""


@dataclass
class Task:
    id: str
    stage: str
    inputs: list
    outputs: list


@dataclass
class Instance:
    name: str
    tasks: list
    sizes: dict                      # file id -> bytes
    source: dict = field(default_factory=dict, repr=False)   # the JSON it was read from (kept for write_wfformat)

    def inputs(self) -> list:
        """The workflow's input files: read by a task, written by none (sorted)."""
        written = {f for t in self.tasks for f in t.outputs}
        return sorted({f for t in self.tasks for f in t.inputs if f not in written})

    def stage_counts(self) -> dict:
        out = {}
        for t in self.tasks:
            out[t.stage] = out.get(t.stage, 0) + 1
        return out

    def total_bytes(self) -> int:
        used = {f for t in self.tasks for f in (*t.inputs, *t.outputs)}
        return sum(self.sizes[f] for f in used)

    def scaled(self, factor: float) -> "Instance":
        if factor <= 0:
            raise InstanceError(f"scale factor must be > 0, got {factor}")
        sizes = {f: (max(1, round(s * factor)) if s > 0 else 0) for f, s in self.sizes.items()}
        return Instance(self.name, copy.deepcopy(self.tasks), sizes, self.source)

    def pruned(self, per_stage: int) -> "Instance":
        """At most per_stage tasks of each stage (the first by id); files whose writer was dropped become inputs."""
        kept, seen = [], {}
        for t in sorted(self.tasks, key=lambda t: t.id):
            if seen.get(t.stage, 0) < per_stage:
                seen[t.stage] = seen.get(t.stage, 0) + 1
                kept.append(copy.deepcopy(t))
        return Instance(self.name, kept, dict(self.sizes), self.source)

    def write_wfformat(self, path: str) -> None:
        """The instance as it is run: WfFormat 1.5 with these tasks, parents/children from the files, these sizes."""
        writer = {f: t.id for t in self.tasks for f in t.outputs}
        parents = {t.id: sorted({writer[f] for f in t.inputs if f in writer}) for t in self.tasks}
        children = {t.id: [] for t in self.tasks}
        for tid, ps in parents.items():
            for p in ps:
                children[p].append(tid)
        used = sorted({f for t in self.tasks for f in (*t.inputs, *t.outputs)})
        # WfFormat requires a non-empty executedAt; WfBench writes its creation time there (nothing ran yet)
        made = (self.source.get("workflow", {}).get("execution", {}).get("executedAt")
                or self.source.get("createdAt") or datetime.datetime.now(datetime.timezone.utc).isoformat())
        doc = {"name": self.name, "description": "WfBench workflow as run by mtcio's wfbench_example (file sizes "
               "scaled)", "schemaVersion": "1.5", "createdAt": self.source.get("createdAt") or made,
               "author": {"name": "mtcio wfbench_example", "email": "-"},
               "workflow": {"specification": {
                   "tasks": [{"name": t.stage, "id": t.id, "category": t.stage, "parents": parents[t.id],
                              "children": sorted(children[t.id]), "inputFiles": t.inputs, "outputFiles": t.outputs}
                             for t in self.tasks],
                   "files": [{"id": f, "sizeInBytes": self.sizes[f]} for f in used]},
                   "execution": {"makespanInSeconds": 0, "executedAt": made, "tasks": [
                       {"id": t.id, "runtimeInSeconds": 0, "command": {"program": "wfbench", "arguments": []},
                        "machines": ["unknown"]} for t in self.tasks], "machines": [{"nodeName": "unknown"}]}}}
        with open(path, "w") as fh:
            json.dump(doc, fh, indent=1)


def _stage(task: dict) -> str:
    s = task.get("category") or task.get("name") or task.get("id")
    if not isinstance(s, str) or not s:
        raise InstanceError(f"task without category, name or id: {str(task)[:80]}")
    return s


def from_dict(doc: dict) -> Instance:
    if not isinstance(doc, dict) or not isinstance(doc.get("workflow"), dict):
        raise InstanceError("not a WfFormat instance: no 'workflow' object")
    wf = doc["workflow"]
    tasks, sizes = [], {}
    if isinstance(wf.get("specification"), dict):          # 1.5 and later
        spec = wf["specification"]
        for f in spec.get("files", []):
            sizes[f["id"]] = int(f.get("sizeInBytes", 0))
        for t in spec.get("tasks", []):
            tasks.append(Task(str(t["id"]), _stage(t), list(t.get("inputFiles", [])),
                              list(t.get("outputFiles", []))))
    elif isinstance(wf.get("tasks"), list):                # 1.4 and earlier: files listed per task
        for t in wf["tasks"]:
            ins, outs = [], []
            for f in t.get("files", []):
                name = f.get("id") or f.get("name")
                sizes[name] = int(f.get("sizeInBytes", f.get("size", 0)))
                (outs if f.get("link") == "output" else ins).append(name)
            tasks.append(Task(str(t.get("id") or t["name"]), _stage(t), ins, outs))
    else:
        raise InstanceError("not a WfFormat instance: 'workflow' has neither 'specification' nor 'tasks'")
    if not tasks:
        raise InstanceError("the instance has no tasks")
    for t in tasks:
        for f in (*t.inputs, *t.outputs):
            if f not in sizes:
                raise InstanceError(f"task {t.id}: file {f} has no size in the instance")
            if sizes[f] < 0:
                raise InstanceError(f"file {f}: negative size {sizes[f]}")
    return Instance(str(doc.get("name", "workflow")), tasks, sizes, doc)


def load(path: str) -> Instance:
    try:
        with open(path) as fh:
            doc = json.load(fh)
    except (OSError, ValueError) as e:
        raise InstanceError(f"{path}: {e}") from None
    return from_dict(doc)


def generate(recipe: str, num_tasks: int, seed: int = 1, save_dir: str | None = None) -> Instance:
    """A recipe's synthetic instance turned into a WfBench benchmark by WfBench itself (its file names
    `<task>_outfile_NNNN`, `workflow_infile_NNNN`); its input files are not created here (prepare does, scaled)."""
    import pathlib
    import random
    import tempfile

    import numpy as np
    from wfcommons import WorkflowGenerator
    from wfcommons.wfbench import WorkflowBenchmark
    from wfcommons.wfchef import recipes as wfrecipes
    cls_name = RECIPES.get(recipe.lower())
    if cls_name is None:
        raise InstanceError(f"unknown recipe {recipe!r} (one of: {', '.join(sorted(RECIPES))})")
    cls = getattr(wfrecipes, cls_name)
    import logging
    logging.getLogger("wfcommons").setLevel(logging.WARNING)    # its per-instance INFO lines
    random.seed(seed)
    np.random.seed(seed)
    try:
        wf = WorkflowGenerator(cls.from_num_tasks(num_tasks)).build_workflow()
    except ValueError as e:
        raise InstanceError(f"{recipe} at {num_tasks} tasks: {e}") from None
    import contextlib
    import io
    with tempfile.TemporaryDirectory(prefix="wfbench.") as tmp, contextlib.redirect_stdout(io.StringIO()):
        bench = WorkflowBenchmark(cls, num_tasks)   # (its "Creating ..." progress lines kept off our stdout)
        # cpu_work only so WfBench writes its arguments; the Rakefile gives every task its own small CPU work
        path = bench.create_benchmark_from_synthetic_workflow(pathlib.Path(save_dir or tmp), wf, percent_cpu=1.0,
                                                              cpu_work=1, num_chunks=1)
        inst = load(str(path))
    inst.name = f"{recipe}-{num_tasks}"
    return inst
