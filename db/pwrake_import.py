"""`mtcprof pwrake-import DIR --db DB --run R`: Pwrake's own profile (task.csv, command.csv) into the store.

Pwrake (`pwrake -L DIR`, or LOG_DIR in pwrake_conf.yaml) writes one row per task (task.csv: exec_host, the
prerequisites' locality preq_loc as L/R/n per prerequisite in Gfarm mode, write_loc) and per command
(command.csv).  They go into `pwrake_tasks` next to the run's traced tasks, matched by task name, so that
Pwrake's declared locality can be set beside the measured one (alpha: local bytes / read bytes).
Importing again replaces the run's rows.  The Pwrake tracing plugin calls this at the end of the workflow.
--run must name a traced run of the db; only a db with no traced run yet gets the run created.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys

from mtcio.db import store
from mtcio.exitcodes import printable

TASK_CSV, COMMAND_CSV = "task.csv", "command.csv"


class ProfileInputError(ValueError):
    """Input that cannot be imported as asked (no tasks, a --run the db does not have): nothing is written."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("logdir", help="Pwrake's log folder (-L / LOG_DIR) holding task.csv and command.csv")
    p.add_argument("--db", required=True, help="SQLite store")
    p.add_argument("--run", required=True,
                   help="the traced run these tasks belong to (created only in a db with no traced run yet)")


def _split(v: str | None) -> list[str]:
    return [x for x in (v or "").split("|") if x]


def _int(v):
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _float(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def read_profile(logdir: str) -> list[dict]:
    """Rows for pwrake_tasks from task.csv, with n_commands and the last status from command.csv."""
    with open(os.path.join(logdir, TASK_CSV), newline="") as fh:
        tasks = list(csv.DictReader(fh))
    cmds: dict[str, list[dict]] = {}
    cpath = os.path.join(logdir, COMMAND_CSV)
    if os.path.exists(cpath):
        with open(cpath, newline="") as fh:
            for c in csv.DictReader(fh):
                if c.get("task_name"):
                    cmds.setdefault(c["task_name"], []).append(c)
    rows = []
    for t in tasks:
        loc = t.get("preq_loc") or None
        own = cmds.get(t["task_name"], [])
        rows.append({
            "pwrake_id": _int(t.get("task_id")), "name": t["task_name"], "start_time": t.get("start_time"),
            "end_time": t.get("end_time"), "elap_s": _float(t.get("elap_time")),
            "preq": json.dumps(_split(t.get("preq"))), "preq_host": json.dumps(_split(t.get("preq_host"))),
            "preq_loc": loc, "preq_local": loc.count("L") if loc else None,
            "preq_remote": loc.count("R") if loc else None,
            "exec_host": t.get("exec_host") or None, "shell_id": _int(t.get("shell_id")),
            "has_action": _int(t.get("has_action")), "executed": _int(t.get("executed")),
            "ncore": _float(t.get("ncore")), "file_size": _int(t.get("file_size")),
            "file_host": json.dumps(_split(t.get("file_host"))), "write_loc": t.get("write_loc") or None,
            "n_commands": len(own), "status": own[-1].get("status") if own else None})
    return rows


def import_profile(db: str, run: str, logdir: str) -> dict:
    """Store Pwrake's profile of `run`; returns counts and the per-task comparison with the traced tasks."""
    rows = read_profile(logdir)
    if not rows:        # checked before the db is opened: an empty profile must not create or change it
        raise ProfileInputError(f"{printable(os.path.join(logdir, TASK_CSV))}: no tasks")
    conn = store.connect(db)
    try:
        with conn:
            _check_run(conn, db, run)
            rid = store.get_or_create_run(conn, run, "trace")
            conn.execute("DELETE FROM pwrake_tasks WHERE run_id = ?", (rid,))
            cols = list(rows[0]) if rows else []
            conn.executemany(f"INSERT INTO pwrake_tasks (run_id, {', '.join(cols)}) VALUES (?{', ?' * len(cols)})",
                             [(rid, *[r[c] for c in cols]) for r in rows])
        cmp = compare(conn, rid)
    finally:
        conn.close()
    return {"tasks": len(rows), "with_action": sum(1 for r in rows if r["has_action"] == 1), "compare": cmp}


def _check_run(conn, db: str, run: str) -> None:
    """`run` must be a traced run of the db: a typo must not make a new run.  A db with no traced run yet is the
    exception (the profile imported before or without an ingest): there the run is created."""
    kind, traces = store.run_kind(conn, run, "trace")
    if kind == "trace" or (kind is None and not traces):
        return
    raise ProfileInputError(f"{store.not_of_kind(run, kind, 'a traced')} in {printable(db)} (traced runs: "
                            f"{', '.join(traces) or 'none'})")


def compare(conn, rid: int) -> list[dict]:
    """Per task with actions: Pwrake's exec_host and declared local inputs beside the traced host and alpha."""
    q = """SELECT p.name, p.exec_host, p.preq_loc, p.preq_local, p.preq_remote, h.name AS traced_host,
                  t.bytes_read_local AS l, t.bytes_read_remote AS r, t.attempt
           FROM pwrake_tasks p
           LEFT JOIN tasks t ON t.run_id = p.run_id AND t.name = p.name
               AND t.attempt = (SELECT MAX(attempt) FROM tasks x WHERE x.run_id = p.run_id AND x.name = p.name)
           LEFT JOIN hosts h ON h.id = t.host_id
           WHERE p.run_id = ? AND p.has_action = 1 ORDER BY p.pwrake_id"""
    out = []
    for r in conn.execute(q, (rid,)):
        known = (r["preq_local"] or 0) + (r["preq_remote"] or 0)
        lr = (r["l"] or 0) + (r["r"] or 0)
        out.append({"task": r["name"], "exec_host": r["exec_host"], "traced_host": r["traced_host"],
                    "declared_local": (r["preq_local"] / known) if known else None,
                    "alpha": (r["l"] / lr) if r["l"] is not None and lr else None})
    return out


def _fmt(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def main(args: argparse.Namespace) -> int:
    if not os.path.isfile(os.path.join(args.logdir, TASK_CSV)):
        print(f"mtcprof pwrake-import: no {TASK_CSV} in {printable(args.logdir)} (Pwrake's -L folder)",
              file=sys.stderr)
        return 2
    try:
        res = import_profile(args.db, args.run, args.logdir)
    except (csv.Error, KeyError) as e:
        print(f"mtcprof pwrake-import: {printable(args.logdir)}: not a Pwrake profile ({printable(e)})",
              file=sys.stderr)
        return 2
    except ProfileInputError as e:
        print(f"mtcprof pwrake-import: {e}", file=sys.stderr)
        return 2
    except store.StoreError as e:
        print(f"mtcprof pwrake-import: {e}", file=sys.stderr)
        return 1
    cmp = res["compare"]
    traced = sum(1 for c in cmp if c["traced_host"] is not None)
    print(f"pwrake-import: {res['tasks']} Pwrake tasks ({res['with_action']} with actions) into run {args.run}; "
          f"{traced} of them traced", file=sys.stderr)
    if cmp:
        print(f"  {'task':<24} {'pwrake host':<14} {'traced host':<14} {'declared L':>10} {'alpha':>6}", file=sys.stderr)
        for c in cmp[:30]:
            print(f"  {c['task'][:24]:<24} {c['exec_host'] or '-':<14} {c['traced_host'] or '-':<14} "
                  f"{_fmt(c['declared_local']):>10} {_fmt(c['alpha']):>6}", file=sys.stderr)
        if len(cmp) > 30:
            print(f"  ... {len(cmp) - 30} more (table pwrake_tasks)", file=sys.stderr)
    return 0
