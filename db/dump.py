"""`mtcprof dump LOG...`: print shim logs as JSON lines.

One line per item: {"type": "process", ...}, {"type": "file", ...} per file, {"type": "op", ...} per traced op
(unless --no-ops), then {"type": "end", "complete": true} or {"type": "error", "offset": N, "message": ...}
for a truncated or corrupt log (its valid prefix is printed before), and {"type": "kept-out", "offset": N, ...}
for each FILE record whose counts no shim writes (not printed as a file).  A file that cannot be read or is not an
mtcprof log prints nothing on stdout, one line on stderr.  Exit status 1 if a log was truncated or corrupt (or had
a record kept out), 2 if a file was missing, unreadable or not a log (the worse of the two when both).
"""
from __future__ import annotations

import argparse
import json
import sys

from mtcio.db.logformat import HEADER_SIZE, LogError, ops_as_dicts, read_log
from mtcio.exitcodes import BAD_INPUT, FAILED, OK, exit_table, printable, quiet_broken_pipe


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = exit_table({FAILED: "failed: a log is truncated or corrupt (its error line says where)",
                           BAD_INPUT: "bad input: a LOG that is missing, a folder or not an mtcprof log"})
    p.add_argument("logs", nargs="+", metavar="LOG", help="mtcprof log file(s) (*.mtclog)")
    p.add_argument("--no-ops", action="store_true", help="omit the op trace lines")


def _unreadable(path: str, e: OSError) -> str:
    why = {FileNotFoundError: "no such file", IsADirectoryError: "is a folder, not a log",
           PermissionError: "permission denied"}.get(type(e), e.strerror or type(e).__name__)
    return f"{printable(path)}: {why}"


def dump(path: str, out, with_ops: bool = True, err=sys.stderr) -> int:
    """Print one log; returns OK, FAILED (truncated or corrupt: valid prefix and an error line printed) or
    BAD_INPUT (not readable or not a log: one line on `err`, nothing on `out`)."""
    try:
        log = read_log(path)
    except OSError as e:
        print(f"mtcprof dump: {_unreadable(path, e)}", file=err)
        return BAD_INPUT
    if log.version == 0 or (log.error is not None and log.error.offset < HEADER_SIZE):
        # the header itself is bad: whatever the file holds is not echoed (it may be any binary)
        reason = log.error.reason if log.error is not None else "bad header"
        why = "not an mtcprof log" if "magic" in reason else printable(reason)
        print(f"mtcprof dump: {printable(path)}: {why}", file=err)
        return BAD_INPUT
    w = lambda obj: print(json.dumps(obj, separators=(",", ":")), file=out)   # noqa: E731
    if "pid" in log.process:      # no process line made of defaults when the log breaks before its record
        w({"type": "process", "log": path, "version": log.version, **log.process})
    for f in log.files:
        w({"type": "file", "log": path, **f})
    for e in log.kept_out:       # records read but not shown: counts no shim writes
        w({"type": "kept-out", "log": path, "offset": e.offset, "message": printable(e.reason)})
    if with_ops:
        for o in ops_as_dicts(log):
            w({"type": "op", **o})
    if log.error is not None:
        w({"type": "error", "log": path, "offset": log.error.offset, "message": printable(log.error.reason)})
        return FAILED
    w({"type": "end", "log": path, "complete": log.complete})
    return FAILED if log.kept_out else OK


def main(args: argparse.Namespace) -> int:
    rcs = set()
    try:
        for path in args.logs:
            rcs.add(dump(path, sys.stdout, not args.no_ops))
        sys.stdout.flush()
    except BrokenPipeError:  # `mtcprof dump LOG | head`: the reader has seen enough
        quiet_broken_pipe()
        return OK
    if FAILED in rcs:
        print("mtcprof dump: some logs are truncated or corrupt (see the error lines)", file=sys.stderr)
    return max(rcs)


__all__ = ["add_arguments", "main", "dump", "LogError"]
