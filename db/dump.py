"""`mtcprof dump LOG...`: print shim logs as JSON lines.

One line per item: {"type": "process", ...}, {"type": "file", ...} per file, {"type": "op", ...} per traced op
(unless --no-ops), then {"type": "end", "complete": true} or {"type": "error", "offset": N, "message": ...}
for a truncated or corrupt log (its valid prefix is printed before).  Exit status 1 if any log was bad.
"""
from __future__ import annotations

import argparse
import os
import json
import sys

from mtcio.db.logformat import LogError, ops_as_dicts, read_log


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("logs", nargs="+", metavar="LOG", help="mtcprof log file(s) (*.mtclog)")
    p.add_argument("--no-ops", action="store_true", help="omit the op trace lines")


def dump(path: str, out, with_ops: bool = True) -> bool:
    try:
        log = read_log(path)
    except OSError as e:
        print(json.dumps({"type": "error", "log": path, "offset": 0, "message": str(e)}), file=out)
        return False
    w = lambda obj: print(json.dumps(obj, separators=(",", ":")), file=out)   # noqa: E731
    w({"type": "process", "log": path, "version": log.version, **log.process})
    for f in log.files:
        w({"type": "file", "log": path, **f})
    if with_ops:
        for o in ops_as_dicts(log):
            w({"type": "op", **o})
    if log.error is not None:
        w({"type": "error", "log": path, "offset": log.error.offset, "message": log.error.reason})
        return False
    w({"type": "end", "log": path, "complete": log.complete})
    return True


def main(args: argparse.Namespace) -> int:
    ok = True
    try:
        for path in args.logs:
            ok &= dump(path, sys.stdout, not args.no_ops)
    except BrokenPipeError:  # `mtcprof dump LOG | head`: the reader has seen enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    if not ok:
        print("mtcprof dump: some logs are truncated or corrupt (see the error lines)", file=sys.stderr)
    return 0 if ok else 1


__all__ = ["add_arguments", "main", "dump", "LogError"]
