"""`mtcprof export --db DB --run R [--format chrome|wfformat] -o FILE`: a run as Chrome-trace JSON or WfFormat.

--format chrome (default): Perfetto (ui.perfetto.dev) and chrome://tracing open it.  --format wfformat: a
WfCommons instance (WfFormat 1.5 or 1.6, --schema-version), db/wfformat_export.py says what goes where.

Trace Event Format, JSON object form ({"traceEvents": [...]}):
  * one process per host (pid 1, 2, ... in host-name order; "M" process_name / process_sort_index events name them),
  * one thread (track) per task (tid = the task's id in the store; "M" thread_name "<task> [<stage>]"),
  * one "X" complete event per task on its track (name = stage, so a viewer colours tasks by stage; args: task,
    command, exit status, bytes, time in I/O ...),
  * when the run was traced with MTCPROF_TRACE=ops, one "X" event per I/O operation, nested in its task's slice.
    Complete events on one track must nest perfectly, so an op that partly overlaps another one on the track (a
    pipeline's processes or a program's threads doing I/O at the same time) goes to an extra track of the same
    task ("<task> [<stage>] #2" ...).  Processes that belong to no task get a track of their own.
ts and dur are microseconds (fractions keep the nanoseconds) since the run's first task start; the absolute
CLOCK_REALTIME start is in otherData.t0_realtime_ns.  Names are shown readably (bytes that are not UTF-8 as \\xNN).
Records the shim dropped at its limits are counted in a task's args (files_dropped, ops_dropped) and in
otherData.  The file is written mode 0600.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from mtcio.db import store as _store
from mtcio.exitcodes import BAD_INPUT, exit_table

PROG = "mtcprof export"


def _us(ns: int) -> float | int:
    """ns -> µs, exact to the ns (3 decimals); an int when whole (shorter JSON)."""
    ns = int(ns)
    return ns // 1000 if ns % 1000 == 0 else ns / 1000


def _clean(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating, float)):
        return None if np.isnan(v) else float(v)
    return v


def place(lanes: list, start: int, end: int) -> int:
    """Index of the first lane where [start, end] nests perfectly (inside or after each open slice), and open it
    there; len(lanes) when none fits (the caller adds a lane).  Intervals must come in (start, -duration) order.
    lanes: [(tid, stack of the end times of the slices still open on that track)]."""
    for i, (_, stack) in enumerate(lanes):
        while stack and stack[-1] <= start:
            stack.pop()
        if not stack or stack[-1] >= end:
            stack.append(end)
            return i
    return len(lanes)


def chrome_trace(s, run, with_ops: bool = True) -> dict:
    """The Chrome-trace object for `run` of the open api.Store `s`."""
    row = s.trace_run(run)
    rid = int(row["id"])
    tasks = s.tasks(rid)
    ops = s.ops(rid) if with_ops else None
    meta, events = [], []
    other = {"run": row["name"], "generator": "mtcprof export", "tasks": len(tasks)}
    if not len(tasks):
        other["note"] = "this run has no tasks"
        return {"traceEvents": [], "displayTimeUnit": "ms", "otherData": other}
    t0 = int(tasks["start_ns"].min())
    if ops is not None and len(ops):
        t0 = min(t0, int(ops["start_ns"].min()))
    other["t0_realtime_ns"] = t0

    hosts = sorted(set(tasks["host"].fillna("?")) | (set(ops["host"].astype(str)) if ops is not None else set()))
    pid_of = {h: i + 1 for i, h in enumerate(hosts)}
    for h, pid in pid_of.items():
        meta.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": h}})
        meta.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}})

    tracks: dict = {}        # task id -> list of lanes; lane = (tid, stack of open end times)
    names: dict = {}
    next_tid = [int(tasks["id"].max()) + 1]
    order = [0]

    def new_track(pid, name, tid=None):
        if tid is None:
            tid = next_tid[0]
            next_tid[0] += 1
        order[0] += 1
        meta.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
        meta.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                     "args": {"sort_index": order[0]}})
        return tid

    task_pid, task_end = {}, {}
    for t in tasks.itertuples():
        host = t.host if isinstance(t.host, str) else "?"
        pid = pid_of[host]
        label = f"{t.name} [{t.stage}]" if isinstance(t.stage, str) else str(t.name)
        names[t.id] = label
        tid = new_track(pid, label, tid=int(t.id))
        start, end = int(t.start_ns), int(t.end_ns)
        dur = max(end - start, 0)
        task_pid[t.id], task_end[t.id] = pid, start + dur
        tracks[t.id] = [(tid, [start + dur])]
        args = {"task": t.name, "stage": t.stage, "host": host, "attempt": t.attempt, "command": t.command,
                "exit_status": t.exit_status, "processes": t.n_processes, "bytes_read": t.bytes_read,
                "bytes_written": t.bytes_written, "files_read": t.files_read, "files_written": t.files_written,
                "time_in_io_s": t.t_io_s, "alpha": t.alpha}
        if t.files_dropped or t.ops_dropped:    # its numbers lack what the shim dropped at its limits
            args.update(files_dropped=t.files_dropped, ops_dropped=t.ops_dropped)
        events.append((start, -dur, pid, tid, {
            "ph": "X", "cat": "task", "name": t.stage if isinstance(t.stage, str) else str(t.name),
            "pid": pid, "tid": tid, "ts": _us(start - t0), "dur": _us(dur),
            "args": {k: _clean(v) for k, v in args.items() if v is not None}}))

    if ops is not None and len(ops):
        other["ops"] = len(ops)
        loose: dict = {}   # (host, pid) -> lanes for processes without a task
        ops = ops.sort_values(["start_ns", "dur_ns"], ascending=[True, False], kind="stable")
        for o in ops.itertuples(index=False):
            start, dur = int(o.start_ns), int(o.dur_ns)
            end = start + dur
            host = str(o.host)
            if o.task_id in tracks:
                lanes, pid, base = tracks[o.task_id], task_pid[o.task_id], names[o.task_id]
            else:
                pid = pid_of[host]
                key = (host, int(o.pid))
                if key not in loose:
                    loose[key] = [(new_track(pid, f"pid {o.pid} (no task)"), [])]
                lanes, base = loose[key], f"pid {o.pid} (no task)"
            i = place(lanes, start, end)
            if i == len(lanes):
                lanes.append((new_track(pid, f"{base} #{len(lanes) + 1}"), [end]))
            tid = lanes[i][0]
            args = {"path": o.path, "pid": int(o.pid), "tid": int(o.tid), "err": int(o.err)}
            if int(o.offset) >= 0:
                args["offset"] = int(o.offset)
            if int(o.length) or o.op in ("read", "write"):
                args["length"] = int(o.length)
            events.append((start, -dur, pid, tid, {
                "ph": "X", "cat": "io", "name": str(o.op), "pid": pid, "tid": tid, "ts": _us(start - t0),
                "dur": _us(dur), "args": {k: v for k, v in args.items() if v is not None and v == v}}))
    else:
        other["ops"] = 0
    if tasks["files_dropped"].any() or tasks["ops_dropped"].any():
        other["dropped"] = {"files": int(tasks["files_dropped"].sum()), "ops": int(tasks["ops_dropped"].sum()),
                            "note": "records the shim dropped at its limits: task numbers and ops lack them"}
    events.sort(key=lambda e: (e[0], e[1], e[2], e[3]))
    return {"traceEvents": meta + [e[4] for e in events], "displayTimeUnit": "ms", "otherData": other}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", required=True, help="SQLite store written by mtcprof ingest")
    p.add_argument("--run", required=True, help="run name")
    p.add_argument("--format", default="chrome", choices=["chrome", "wfformat"],
                   help="chrome: Trace Event Format JSON (opens in ui.perfetto.dev and chrome://tracing); wfformat: a "
                        "WfCommons instance (tasks, files, parents/children from the files they wrote and read, "
                        "category = stage, execution with runtimes, bytes, machines; WRENCH and wfcommons read it)")
    p.add_argument("--schema-version", choices=["1.5", "1.6"],
                   help="with --format wfformat: WfFormat version (default 1.5, the one WRENCH reads; 1.6 adds the "
                        "metrics wfcommons 1.6 writes)")
    p.add_argument("--files", choices=("auto", "gfarm", "all"), default="auto",
                   help="with --format wfformat: which files are the instance's (as `mtcprof model --files`: auto = "
                        "Gfarm files when the run touched any, else all)")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="output file ('-' for stdout)")
    p.add_argument("--no-ops", action="store_true", help="chrome: tasks only, even when the op trace exists")
    p.epilog = (
        "examples:\n  mtcprof export --db mtc.db --run montage1 -o trace.json\n"
        "  mtcprof export --db mtc.db --run montage1 --format wfformat -o montage1.json            # WfFormat 1.5\n"
        "  mtcprof export --db mtc.db --run montage1 --format wfformat --schema-version 1.6 -o m.json\n\n"
        + exit_table({1: "failed: the output could not be written, or an unexpected error",
                      2: "bad input: bad options, a db that is missing or not an mtcio db, a --run it does not "
                         "have or one with no tasks (wfformat)"}))


def main(args: argparse.Namespace) -> int:
    from mtcio.db.api import Store
    if not os.path.exists(args.db):
        print(f"{PROG}: {args.db}: no such database", file=sys.stderr)
        return BAD_INPUT
    wfformat = args.format == "wfformat"
    if not wfformat and (args.schema_version or args.files != "auto"):
        print(f"{PROG}: --{'schema-version' if args.schema_version else 'files'} is for --format wfformat",
              file=sys.stderr)
        return BAD_INPUT
    try:
        # WfFormat keeps exact names (ids are made from their bytes); the Chrome trace shows them readably
        with Store(args.db, readable=not wfformat) as s:
            try:
                s.trace_run(args.run)
            except _store.StoreError as e:      # a --run the db does not have (or not a traced one): bad input
                print(f"{PROG}: {e}", file=sys.stderr)
                return BAD_INPUT
            if wfformat:
                from mtcio.db import wfformat_export
                try:
                    doc = wfformat_export.instance(s, args.run, args.schema_version or "1.5", args.files)
                except ValueError as e:          # a run with no tasks
                    print(f"{PROG}: {e}", file=sys.stderr)
                    return BAD_INPUT
                out = wfformat_export.text(doc)
            else:
                trace = chrome_trace(s, args.run, with_ops=not args.no_ops)
                out = None
        if args.output == "-":
            if out is None:
                json.dump(trace, sys.stdout, separators=(",", ":"))
                sys.stdout.write("\n")
            else:
                sys.stdout.write(out)
        else:
            _store.write_private(args.output, out if out is not None else json.dumps(trace, separators=(",", ":")))
    except BrokenPipeError:     # `-o - | head`: the reader has seen enough; mtcprof's guard ends quietly, exit 0
        raise
    except OSError as e:
        where = f"{_store.readable(e.filename)}: " if e.filename else ""
        print(f"{PROG}: {where}{e.strerror or e}", file=sys.stderr)
        return 1
    except _store.StoreError as e:        # the db or the run given: not an mtcio db, a newer schema...
        print(f"{PROG}: {e}", file=sys.stderr)
        return BAD_INPUT
    if wfformat:
        spec = doc["workflow"]["specification"]
        print(f"{PROG}: run {doc['name']}: WfFormat {doc['schemaVersion']}, {len(spec['tasks'])} tasks, "
              f"{len(spec['files'])} files -> {args.output}", file=sys.stderr)
        return 0
    o = trace["otherData"]
    print(f"{PROG}: run {o['run']}: {o['tasks']} tasks, {o.get('ops', 0)} ops -> {args.output}", file=sys.stderr)
    return 0
