"""Decoding one log into the rows ingest stores (`LogRows`): the fast reader (db/fastlog.py) for complete logs, the
reference reader (db/logformat.py: valid prefix and the error) otherwise; `read_log` turns what went wrong into the
log's one warning.  Also the process record's /proc text fields as numbers (cpu_clock, sched, call_wait).
"""
from __future__ import annotations

import numpy as np

from mtcio.db import fastlog
from mtcio.db import logformat as lf
from mtcio.db.store import readable

FLAG_BITS = {name: bit for bit, name in lf.FILE_FLAGS.items()}


def cpu_clock(text) -> tuple:
    """The shim's cpu_clock string "<CPUs> <up s> <idle s> <up s> <idle s>" (/proc/uptime at the image's start and
    end) as (cpus, uptime_start_s, idle_start_s, uptime_end_s, idle_end_s); all None when absent or not such a
    clock (a damaged log: the clock going back, idle beyond every CPU's time)."""
    try:
        n, u0, i0, u1, i1 = text.split()     # an empty or short string is a ValueError here, never an IndexError
        n, u0, i0, u1, i1 = int(n), float(u0), float(i0), float(u1), float(i1)
    except (AttributeError, ValueError, TypeError):
        return (None,) * 5
    ok = 0 < n <= 1 << 16 and 0 <= u0 <= u1 < 1e10 and 0 <= i0 <= i1 and i1 - i0 <= n * (u1 - u0) + 0.02 * n
    return (n, u0, i0, u1, i1) if ok else (None,) * 5


def sched(text) -> tuple:
    """The shim's sched string "<on-CPU ns> <waiting ns> <slices>" at the image's start then at its end (its main
    thread's /proc/self/schedstat) as (sched_cpu_s, sched_wait_s, sched_slices) over the image; all None when
    absent or not such a clock (a counter going back)."""
    try:
        c0, w0, n0, c1, w1, n1 = map(int, text.split())
    except (AttributeError, ValueError, TypeError):
        return (None,) * 3
    if not (0 <= c0 <= c1 < 1 << 63 and 0 <= w0 <= w1 < 1 << 63 and 0 <= n0 <= n1 < 1 << 63):
        return (None,) * 3
    return (c1 - c0) / 1e9, (w1 - w0) / 1e9, n1 - n0


def call_wait(text) -> tuple:
    """The shim's cpu_wait string "<waiting ns> <calls>" (MTCPROF_CPU_WAIT=1: the traced calls' wait for a CPU) as
    (io_cpu_wait_s, io_cpu_wait_calls); both None when absent or malformed."""
    try:
        ns, calls = map(int, text.split())
    except (AttributeError, ValueError, TypeError):
        return None, None
    if not (0 <= ns < 1 << 63 and 0 <= calls < 1 << 63):
        return None, None
    return ns / 1e9, calls


def _flag_int(names) -> int:
    v = 0
    for n in names:
        v |= FLAG_BITS.get(n, 0)
    return v


class LogRows:
    """One log, reduced to what ingest stores: process dict, files as (fid, flags, path, 50 values), op chunks as
    (count, packed little-endian bytes), complete flag, error text, FILE records the reader kept out."""
    __slots__ = ("proc", "files", "ops", "complete", "error", "kept_out", "gaps", "task_source")

    def __init__(self, proc, files, ops, complete, error, kept_out=0):
        self.proc, self.files, self.ops, self.complete, self.error = proc, files, ops, complete, error
        self.kept_out = kept_out
        self.gaps = ()              # capture gaps (kind, fid or None, detail) of a Darshan log
        self.task_source = None     # where a Darshan log's task and stage came from


def read_rows(path: str, max_log_bytes: int = lf.MAX_LOG_BYTES) -> tuple["LogRows | None", "lf.LogError | None"]:
    """Fast path (db/fastlog.py) for complete logs, the reference reader (valid prefix + error) otherwise.
    OSError (lf.NotALogFile for a symlink, FIFO, device or oversized file) when the file cannot be read."""
    return rows_from_bytes(lf.read_bytes(path, max_log_bytes), path)


def rows_from_bytes(buf: bytes, path: str) -> tuple["LogRows | None", "lf.LogError | None"]:
    """read_rows on a log's content already in memory."""
    pr = fastlog.parse(buf)
    if pr is not None:
        return LogRows(fastlog.proc_dict(pr), pr.files, pr.ops, True, None), None
    log = lf.parse(buf, path) if buf else lf.MtcLog(path=path, error=lf.LogError("empty file", 0, path))
    if log.error is None and not log.complete:
        log.error = lf.LogError("incomplete log", len(buf), path)
    if log.error is None and log.kept_out:       # the log's one error: its first record kept out
        log.error = log.kept_out[0]
    if not log.process or "pid" not in log.process or "start_ns" not in log.process:
        return None, log.error
    # a counter an older format version lacks (seeks_end before version 3) is 0
    files = [(f["id"], _flag_int(f["flags"]), f["path"],
              tuple([f.get(c, 0) for c in lf.COUNTERS] + f["hist_read"] + f["hist_write"])) for f in log.files]
    ops = []
    if getattr(log, "ops_raw", None) is None:
        if len(log.ops):
            ops.append((len(log.ops), np.ascontiguousarray(log.ops, dtype=lf.OP_DTYPE).tobytes()))
    else:
        for bo, raw in log.ops_raw:
            if bo != "<":       # stored little-endian
                raw = np.frombuffer(raw, dtype=lf.op_dtype(bo)).astype(lf.OP_DTYPE).tobytes()
            if raw:
                ops.append((len(raw) // lf.OP_SIZE, raw))
    err = f"{log.error.reason} at byte offset {log.error.offset}" if log.error is not None else None
    # a log with an error (bytes after its END, records kept out) is not the whole record of its process
    return LogRows(log.process, files, ops, log.complete and log.error is None, err, len(log.kept_out)), log.error


def read_log(path: str, max_log_bytes: int = lf.MAX_LOG_BYTES, load=None):
    """(rows or None, None or the log's one warning (message, path, offset)).  Messages never quote the file's
    content (it may be any binary), only the reader's reason and the offset.  load: gives the log's bytes as
    logformat.read_bytes would (db/prefetch.py), default read here."""
    shown = readable(path)
    try:
        rows, err = read_rows(path, max_log_bytes) if load is None else rows_from_bytes(load(), path)
    except OSError as e:
        return None, (f"{shown}: cannot read ({readable(e.strerror or type(e).__name__)}); skipped", path, 0)
    except Exception as e:     # a reader bug must not lose the run: the log is skipped, the reason named
        return None, (f"{shown}: unreadable log (internal reader error {type(e).__name__}); skipped", path, 0)
    if err is None:
        return rows, None
    if rows is None:
        return None, (f"{shown}: {err.reason} at byte offset {err.offset}; no process record, skipped", path,
                      err.offset)
    if isinstance(err, lf.KeptOut):
        more = f" (and {rows.kept_out - 1} more like it)" if rows.kept_out > 1 else ""
        return rows, (f"{shown}: {err.reason} at byte offset {err.offset}{more}; kept out, the rest of the log kept",
                      path, err.offset)
    more = f"; {rows.kept_out} file records with unknown counts kept out" if rows.kept_out else ""
    return rows, (f"{shown}: {err.reason} at byte offset {err.offset}; its valid records before it were kept{more}",
                  path, err.offset)
