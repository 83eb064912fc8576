"""The target's task graph from a dry run: every task with its prerequisites, as `rake -P` or `pwrake -P` print it.

    rake -P > graph.txt          # in the workflow's folder prepared at the target size; nothing runs
    counts, notes = counts_of(parse(text), scaling)   # "tasks:STAGE" and "input:SHAPE" counts for db/scaling

The format (Rake's --prereqs): one line `APP TASK` per task, then one indented line per prerequisite:

    rake proj/t003.fits
        raw/t003.fits
        template.hdr

A task's stage is the traced stage whose tasks' names have its name's shape (digits masked: `proj/t#.fits`);
tasks of no traced stage (`default`) are left out and counted. A prerequisite no task produces is a workflow
input, counted by its shape as the traced inputs are. An entry whose one prerequisite is a task of its own name
shape is that task's other output (Rake's `file OUT => TASK`, a file the task's action also writes), not a task:
a task is counted once however many files it writes (a chain of same-shape tasks with one prerequisite each would
be miscounted by this rule; none of the project's workflows has one).

    reads = reads_of(parse(text), scaling)            # per stage and source: the files a task lists, on average
"""
from __future__ import annotations

import os
import stat

from .scaling import INPUT, name_shape

MAX_BYTES = 256 << 20     # a graph of ~10^6 tasks; larger files are refused unread


class GraphError(ValueError):
    """A file that is not a task graph in the format above; the message names the file and line."""


def read(path: str) -> dict:
    """{task: [prerequisites]} of a `rake -P` listing in `path`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise GraphError(f"{path}: cannot read ({e.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise GraphError(f"{path}: not a regular file")
        if st.st_size > MAX_BYTES:
            raise GraphError(f"{path}: {st.st_size:,} bytes, larger than a task graph may be ({MAX_BYTES:,})")
        raw = fh.read(MAX_BYTES + 1)
    return parse(raw.decode("utf-8", "surrogateescape"), path)


def parse(text: str, where: str = "<graph>") -> dict:
    graph: dict = {}
    task = None
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if line[0] in " \t":
            if task is None:
                raise GraphError(f"{where}: line {i}: a prerequisite before any task (expected `rake -P` output)")
            graph[task].append(line.strip())
            continue
        app, sep, name = line.partition(" ")
        if not sep or not name.strip():
            raise GraphError(f"{where}: line {i}: expected 'rake TASK' or an indented prerequisite (the output "
                             f"of `rake -P`), got {line[:60]!r}")
        task = name.strip()
        graph.setdefault(task, [])
    if not graph:
        raise GraphError(f"{where}: no task (expected the output of `rake -P` in the workflow's folder)")
    return graph


def other_outputs(graph: dict) -> dict:
    """{other output: the task that writes it}: entries whose one prerequisite is a task of their own name shape."""
    return {t: pre[0] for t, pre in graph.items()
            if len(pre) == 1 and pre[0] in graph and name_shape(pre[0]) == name_shape(t)}


def _stages_by_shape(sc: dict) -> dict:
    by_shape = {}
    for stage, spec in sc["stages"].items():
        for shape in spec["task_names"]:
            by_shape.setdefault(shape, stage)
    return by_shape


def counts_of(graph: dict, sc: dict) -> tuple[dict, list[str]]:
    """The counts a scaling section fits ("tasks:STAGE", "input:SHAPE"), exactly as the graph has them, and notes:
    tasks of no traced stage, traced stages the graph lacks, other outputs not counted as tasks."""
    by_shape = _stages_by_shape(sc)
    outputs = other_outputs(graph)
    counts: dict = {}
    other = []
    for task in graph:
        if task in outputs:
            continue
        stage = by_shape.get(name_shape(task))
        if stage is None:
            other.append(task)
        else:
            counts["tasks:" + stage] = counts.get("tasks:" + stage, 0) + 1
    inputs = {p for pre in graph.values() for p in pre if p not in graph}
    for p in inputs:
        key = INPUT + name_shape(p)
        counts[key] = counts.get(key, 0) + 1
    notes = []
    if not any(k.startswith("tasks:") for k in counts):
        raise GraphError("no task of the graph has the name shape of a traced stage's tasks (traced: " +
                         ", ".join(sorted(by_shape)[:6]) + "): is it the graph of this workflow?")
    if other:
        notes.append(f"graph: {len(other)} task{'s' if len(other) > 1 else ''} of no traced stage left out "
                     f"({', '.join(sorted(other)[:3])}{' ...' if len(other) > 3 else ''})")
    if outputs:
        notes.append(f"graph: {len(outputs)} entr{'ies' if len(outputs) > 1 else 'y'} with one prerequisite of "
                     f"their own shape taken as that task's other output{'s' if len(outputs) > 1 else ''}, "
                     f"not as tasks ({', '.join(sorted(outputs)[:2])}{' ...' if len(outputs) > 2 else ''})")
    return counts, notes


def reads_of(graph: dict, sc: dict) -> dict:
    """{stage: {source: files a task of it lists, mean over its tasks}}, the sources as db/scaling names them:
    the stage of the task that writes the file, or INPUT + the name shape of a workflow input."""
    by_shape = _stages_by_shape(sc)
    outputs = other_outputs(graph)
    sums: dict = {}
    tasks: dict = {}
    for task, pre in graph.items():
        stage = None if task in outputs else by_shape.get(name_shape(task))
        if stage is None:
            continue
        tasks[stage] = tasks.get(stage, 0) + 1
        mine = sums.setdefault(stage, {})
        for p in pre:
            maker = outputs.get(p, p)
            source = by_shape.get(name_shape(maker)) if maker in graph else INPUT + name_shape(p)
            if source is not None:
                mine[source] = mine.get(source, 0) + 1
    return {st: {src: n / tasks[st] for src, n in srcs.items()} for st, srcs in sums.items()}
