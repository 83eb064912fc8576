"""`mtcprof ingest LOGDIR --db DB [--run NAME] [--strict] [--gfwhere-cmd CMD] [--from darshan]`: the command line
of db/ingest.py (options, exit status, the closing lines on stderr).
"""
from __future__ import annotations

import argparse
import sqlite3
import sys

from mtcio.db import darshan_log, store, write_errors
from mtcio.db.ingest import DecoderError, IngestError, ingest
from mtcio.db.store import readable
from mtcio.exitcodes import exit_table


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = exit_table({1: "failed: --strict and a log is truncated, corrupt or unreadable (nothing stored); "
                              "the disk is full or read-only; the log decoder process was killed (that run not "
                              "stored)",
                           2: "bad input: bad options, LOGDIR missing or without one readable log (no db is "
                              "created), --db not a SQLite store, --from darshan without mtcio[darshan]"})
    p.add_argument("logdir", metavar="LOGDIR", help="folder with the run's *.mtclog files (searched recursively); "
                                                  "with --from darshan: *.darshan files, or one such log")
    p.add_argument("--from", dest="source", choices=("mtcprof", "darshan"), default="mtcprof",
                   help="what wrote the logs: mtcprof's shim (default) or Darshan (needs mtcio[darshan]; task and "
                        "stage from the plugin's mtcprof-task.env, else the log folder, else the executable)")
    p.add_argument("--db", required=True, help="SQLite store (created if missing)")
    p.add_argument("--run", help="run name (default: the logs' MTCPROF_RUN, else the folder's name)")
    p.add_argument("--strict", action="store_true",
                   help="store nothing and exit 1 when any log is truncated, corrupt or unreadable")
    p.add_argument("--gfwhere-cmd", default="auto",
                   help="command that prints replica hosts, e.g. \"mtcbed exec mtc-node1 -- gfwhere\" "
                        "(default: gfwhere when Gfarm is configured; 'none' to skip)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def main(args: argparse.Namespace) -> int:
    cmd = None if args.gfwhere_cmd in ("none", "") else args.gfwhere_cmd
    try:
        res = ingest(args.db, args.logdir, run=args.run, strict=args.strict, gfwhere_cmd=cmd,
                     progress=False if args.no_progress else None, source=args.source)
    except (IngestError, store.StoreError, darshan_log.NoDarshan) as e:
        print(f"mtcprof ingest: {e}", file=sys.stderr)
        return 1 if isinstance(e, (store.DiskError, DecoderError)) else 2
    except (sqlite3.OperationalError, OSError) as e:       # the disk filled up, or went read-only, while writing
        words = write_errors.disk_words(args.db, e)
        if words is None:
            raise
        print(f"mtcprof ingest: {words}; the run being ingested was not stored (runs stored before it are kept)",
              file=sys.stderr)
        return 1
    if not res.committed:
        print(f"mtcprof ingest: {res.bad_logs} truncated or corrupt logs (see warnings); --strict: nothing stored",
              file=sys.stderr)
        return 1
    if not res.runs:
        print(f"mtcprof ingest: none of the {res.bad_logs} logs under {readable(args.logdir)} has a process record: "
              f"nothing stored", file=sys.stderr)
        return 2
    for name, c in res.runs.items():
        print(f"run {readable(name)}: {c['logs_added']} logs added ({c['logs_skipped']} already present), "
              f"{c.get('tasks', 'unchanged')} tasks, {c['file_access']} file records, {c['ops']} ops",
              file=sys.stderr)
        if c.get("task_sources"):
            print(f"run {readable(name)}: task and stage from " + ", ".join(
                f"{src} ({n} logs)" for src, n in sorted(c["task_sources"].items())), file=sys.stderr)
    if res.bad_logs:
        print(f"mtcprof ingest: {res.bad_logs} truncated or corrupt logs (see warnings)", file=sys.stderr)
    return 0
