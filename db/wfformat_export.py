"""`mtcprof export --db DB --run R --format wfformat [--schema-version 1.5|1.6] -o run.json`: a traced run as a
WfFormat instance (WfCommons' JSON: WRENCH and SimGrid simulate it, wfcommons reads it).

What goes where (db/README.md, 'WfFormat'):
  * one task per task attempt of the run: `name` its task name, `category` its stage, `id` the name made legal
    (bytes outside [0-9a-zA-Z_.#-] as '_') and unique ('#2' ...); a name that is not UTF-8 is shown with \\xNN
    in `name` and kept exactly, as hex, in `nameHex`;
  * files: those the model counts (Gfarm files when the run touched any, else all; --files), `sizeInBytes` the
    size at ingest (else the largest offset reached); a task's inputFiles are the files it read and did not write,
    its outputFiles those it wrote; ids as for tasks with ':' and '/' kept, the path in `name` when they differ;
  * parents/children: task A is a parent of B when A wrote a file B read and A started before B (so the graph
    has no cycle, whatever the run did);
  * execution: makespan (first task start to last task end), executedAt, per task its runtime, start,
    readBytes/writtenBytes (integers: its bytes on the instance's files), one machine (its host), and the extra
    fields ioTimeInSeconds (time inside traced I/O calls), attempt, exitStatus; machines with their CPU count;
  * 1.5 (default: what WRENCH reads) and 1.6 (what wfcommons 1.6 writes) share this layout; 1.6 adds the
    `metrics` of both sections and the category in each execution task as well.
The file is written mode 0600 (a trace's names are private).
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import shlex

from mtcio.db import store as _store
from mtcio.db.wfformat import FILE_CHARS, TASK_CHARS, IdMaker, Task, _levels, exact_utf8

DEFAULT_VERSION = "1.5"


def _iso(ns: int) -> str:
    return _dt.datetime.fromtimestamp(int(ns) / 1e9, _dt.timezone.utc).isoformat(timespec="microseconds")


def _named(obj: dict, name: str) -> dict:
    """obj with `name` shown readably, and its exact bytes as nameHex when it is not UTF-8 text."""
    obj["name"] = _store.readable(name)
    if not exact_utf8(name) or obj["name"] != name:
        obj["nameHex"] = os.fsencode(name).hex()
    return obj


def _command(text) -> dict | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        argv = shlex.split(text)
    except ValueError:
        argv = text.split()
    if not argv:
        return None
    out = {"program": _store.readable(os.path.basename(argv[0])) or _store.readable(argv[0])}
    args = [_store.readable(a) for a in argv[1:] if a]
    if args:
        out["arguments"] = args
    return out


def instance(s, run, version: str = DEFAULT_VERSION, scope: str = "auto") -> dict:
    """The WfFormat instance (a dict ready for json.dump) of traced run `run` of the open api.Store `s` (opened
    with exact names: readable=False)."""
    row = s.trace_run(run)
    rid = int(row["id"])
    tasks = s.tasks(rid)
    if not len(tasks):
        raise ValueError(f"run {_store.readable(row['name'])!r} has no tasks; a WfFormat instance needs one")
    tf = s.task_files(rid, scope)
    tf = tf[tf["read"] | tf["written"]]
    procs = s.processes(rid)

    tids = IdMaker(TASK_CHARS)
    order = list(tasks.sort_values(["start_ns", "id"], kind="stable")["id"])
    rank = {t: i for i, t in enumerate(order)}
    by_id = tasks.set_index("id")
    tid = {t: tids.make(by_id.at[t, "name"]) for t in order}

    fids = IdMaker(FILE_CHARS)
    files, fid = [], {}
    for key, g in tf.groupby("key", sort=False):
        size = g["size"].max()
        if size != size:         # NaN: never stat'ed; the largest offset reached is what the run saw of it
            size = g["max_offset"].max()
        fid[key] = fids.make(key)
        f = {"id": fid[key], "sizeInBytes": int(max(0, size if size == size else 0))}
        if fid[key] != key:
            _named(f, key)
        files.append(f)

    written = tf[tf["written"]]
    writers: dict = {}
    for t, k in zip(written["task_id"], written["key"]):
        writers.setdefault(k, set()).add(t)
    ins: dict = {t: [] for t in order}
    outs: dict = {t: [] for t in order}
    rbytes = tf.groupby("task_id")["bytes_read"].sum()
    wbytes = tf.groupby("task_id")["bytes_written"].sum()
    parents: dict = {t: set() for t in order}
    for t, k, r, w in zip(tf["task_id"], tf["key"], tf["read"], tf["written"]):
        if w:
            outs[t].append(fid[k])
        elif r:
            ins[t].append(fid[k])
            parents[t] |= {p for p in writers.get(k, ()) if rank[p] < rank[t]}
    children: dict = {t: set() for t in order}
    for t, ps in parents.items():
        for p in ps:
            children[p].add(t)

    cpus = procs.groupby(procs["host"].fillna("?"))["cpus"].max() if "cpus" in procs else {}
    hosts = sorted(set(tasks["host"].fillna("?")))
    spec_tasks, exec_tasks = [], []
    for t in order:
        r = by_id.loc[t]
        stage = r["stage"] if isinstance(r["stage"], str) else "(none)"
        st = _named({}, r["name"])
        st.update(id=tid[t], category=_store.readable(stage),
                  parents=sorted(tid[p] for p in parents[t]), children=sorted(tid[c] for c in children[t]),
                  inputFiles=ins[t], outputFiles=outs[t])
        if not exact_utf8(stage) or _store.readable(stage) != stage:
            st["categoryHex"] = os.fsencode(stage).hex()
        spec_tasks.append(st)
        host = r["host"] if isinstance(r["host"], str) else "?"
        ex = {"id": tid[t], "runtimeInSeconds": round(max(0.0, float(r["duration_s"])), 6),
              "executedAt": _iso(r["start_ns"]),
              "readBytes": int(rbytes.get(t, 0)), "writtenBytes": int(wbytes.get(t, 0)),
              "machines": [_store.readable(host)]}
        cmd = _command(r["command"])
        if cmd:
            ex["command"] = cmd
        if version != "1.5":
            ex["category"] = st["category"]
        ex["ioTimeInSeconds"] = round(float(r["t_io_s"]), 6)
        ex["attempt"] = int(r["attempt"])
        if r["exit_status"] == r["exit_status"]:
            ex["exitStatus"] = int(r["exit_status"])
        exec_tasks.append(ex)

    machines = []
    for h in hosts:
        m = {"nodeName": _store.readable(h), "cpu": {}}
        c = cpus.get(h) if hasattr(cpus, "get") else None
        if c is not None and c == c and c >= 1:
            m["cpu"]["coreCount"] = int(c)
        machines.append(m)

    t0, t1 = int(tasks["start_ns"].min()), int(tasks["end_ns"].max())
    name = _store.readable(row["name"])
    doc = {"name": name,
           "description": f"mtcio trace of run {name}: {len(order)} tasks, {len(files)} files "
                          f"({'Gfarm files' if tf['on_gfarm'].any() and scope != 'all' else 'all traced files'})",
           "createdAt": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "schemaVersion": version,
           "workflow": {
               "specification": {"tasks": spec_tasks, "files": files},
               "execution": {"makespanInSeconds": round((t1 - t0) / 1e9, 6), "executedAt": _iso(t0),
                             "tasks": exec_tasks, "machines": machines}}}
    if version != "1.5":
        _add_metrics(doc)
    return doc


def _add_metrics(doc: dict) -> None:
    """WfFormat 1.6's metrics of both sections, as wfcommons 1.6 computes (and checks) them."""
    spec, ex = doc["workflow"]["specification"], doc["workflow"]["execution"]
    lv = _levels([Task(id=t["id"], name=t["name"], category="", parents=t["parents"], children=t["children"],
                       inputs=[], outputs=[]) for t in spec["tasks"]])
    widths: dict = {}
    for v in lv.values():
        widths[v] = widths.get(v, 0) + 1
    spec["metrics"] = {"numberOfTasks": len(spec["tasks"]), "numberOfFiles": len(spec["files"]),
                       "sumOfFileSizesInBytes": sum(f["sizeInBytes"] for f in spec["files"]),
                       "numberOfLevels": len(widths), "minimumWidth": min(widths.values()),
                       "maximumWidth": max(widths.values())}
    ex["metrics"] = {"sumTaskRuntimesInSeconds": sum(t["runtimeInSeconds"] for t in ex["tasks"]),
                     "totalNumBytesRead": sum(t["readBytes"] for t in ex["tasks"]),
                     "totalNumBytesWritten": sum(t["writtenBytes"] for t in ex["tasks"])}


def text(doc: dict) -> str:
    # ASCII JSON: a name's non-ASCII characters as \\uXXXX escapes, readable by any JSON parser
    return json.dumps(doc, indent=1) + "\n"
