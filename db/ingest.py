"""Ingest: load a run's logs into the SQLite store (`mtcprof ingest`, its command line in db/ingest_cli.py).

Every *.mtclog under LOGDIR (recursively; db/ingest_logs.py) is decoded (db/ingest_read.py) and written
(db/ingest_writer.py).  Logs are grouped into runs (--run NAME, else each log's MTCPROF_RUN, else the folder's name);
each run is written in ONE transaction, so the db is never left half-written.  A process image is keyed by (run,
host, pid, start_ns): re-ingesting the same logs adds nothing.  A truncated or corrupt log gives a warning naming the
file and byte offset; its valid records are kept and the rest of the run is ingested; the exit status is non-zero
only with --strict.

After the logs, ingest (re)builds the run's tasks (db/ingest_tasks.py: all processes with the same MTCPROF_TASK;
exec chains and fork trees linked by (host, pid)), resolves the replica hosts of every Gfarm file with batched
`gfwhere` calls (db/ingest_replicas.py), and stores per-task read locality and write placement.
"""
from __future__ import annotations

import gc
import os
import shlex
import sys
import time
from dataclasses import dataclass, field

from mtcio.cpus import usable_cpus
from mtcio.db import darshan_log, prefetch, store
from mtcio.db import logformat as lf
from mtcio.db.ingest_decode import Decoder, DecoderDied, decode
from mtcio.db.ingest_logs import find_logs, untrusted_folders
from mtcio.db.ingest_read import LogRows
from mtcio.db.ingest_replicas import default_gfwhere_cmd, fill_replicas
from mtcio.db.ingest_tasks import build_tasks, fill_task_io
from mtcio.db.ingest_writer import RunWriter, build_indexes, defer_indexes, fill_sizes, prepare
from mtcio.db.store import db_text, readable

CACHE_KIB = -131072        # SQLite page cache while ingesting (negative: KiB)
# The cyclic garbage collector is off while logs are read: each log's rows are many new tuples, and its automatic
# passes over them were a tenth of the time; the rows hold no cycles, a pass every GC_EVERY logs collects the rest.
GC_EVERY = 50_000
# From this many logs on (and with 2 CPUs), the shim's logs are decoded in a second process (db/ingest_decode.py)
# while this one writes: its start (~0.2 s) is then a small part of the run
DECODER_MIN_LOGS = 5000


class IngestError(RuntimeError):
    """Nothing could be ingested (no logs, bad db ...)."""


class DecoderError(IngestError):
    """The log decoder process died while ingesting (killed, out of memory): the run being ingested is not stored
    (runs stored before it are kept)."""


@dataclass
class IngestResult:
    runs: dict = field(default_factory=dict)        # run name -> counts
    warnings: list = field(default_factory=list)
    bad_logs: int = 0                                # truncated / corrupt / unreadable logs
    committed: bool = True                           # False: --strict rolled everything back
    details: list = field(default_factory=list)      # (message, log path, byte offset)


class Progress:
    """A small progress bar on stderr (only when there is a lot to do); not a terminal (a log file, a pipe): only
    the line done() writes at the end."""

    def __init__(self, total: int, label: str, enabled: bool | None = None, min_total: int = 2000):
        self.total, self.label, self.n = total, label, 0
        self.enabled = (total >= min_total) if enabled is None else enabled
        self.tty = sys.stderr.isatty()
        self.t0 = self.last = time.monotonic()

    def update(self, n: int = 1) -> None:
        self.n += n
        if not self.enabled:
            return
        now = time.monotonic()
        pct = 100 * self.n // max(self.total, 1)
        if self.tty and now - self.last >= 0.2:
            self._draw(pct, "\r")
            self.last = now

    def _draw(self, pct: int, lead: str) -> None:
        w = 30
        bar = "#" * (w * pct // 100) + "-" * (w - w * pct // 100)
        rate = self.n / max(time.monotonic() - self.t0, 1e-9)
        end = "" if self.tty else "\n"
        sys.stderr.write(f"{lead}{self.label} [{bar}] {self.n}/{self.total} ({rate:,.0f}/s){end}")
        sys.stderr.flush()

    def done(self) -> None:
        if self.enabled:
            self._draw(100 * self.n // max(self.total, 1), "\r" if self.tty else "")
            if self.tty:
                sys.stderr.write("\n")


def _stderr_warn(msg: str) -> None:
    print(f"mtcprof ingest: warning: {msg}", file=sys.stderr)


def ingest(db: str, logdir: str, *, run: str | None = None, strict: bool = False,
           gfwhere_cmd: list[str] | str | None = "auto", progress: bool | None = None,
           warn=_stderr_warn, max_log_bytes: int = lf.MAX_LOG_BYTES, source: str = "mtcprof") -> IngestResult:
    """Ingest every log under logdir into db.  gfwhere_cmd: "auto" (plain gfwhere when Gfarm is configured),
    None (do not resolve replicas), a list or a shell-quoted string (e.g. "mtcbed exec mtc-node1 -- gfwhere").
    source: "mtcprof" (the shim's *.mtclog) or "darshan" (*.darshan, read by db/darshan_log.py; logdir may then
    name one log).

    A damaged log gives ONE warning naming it and the byte offset where it breaks; its valid prefix is kept (when
    it has a process record) and the rest of the run is ingested.  strict=True: everything is ingested in one
    transaction that is rolled back when any log was damaged (res.committed False): nothing is stored.  A db this
    call created is removed again when no run was stored in it (no log had a process record, or strict rolled
    back): bad input leaves no file behind."""
    if gfwhere_cmd == "auto":
        gfwhere_cmd = default_gfwhere_cmd()
    elif isinstance(gfwhere_cmd, str):
        gfwhere_cmd = shlex.split(gfwhere_cmd)
    if source == "darshan":
        if not darshan_log.available():
            raise darshan_log.NoDarshan(darshan_log.INSTALL_HINT)
        try:
            paths = darshan_log.find_logs(os.path.abspath(logdir))
        except FileNotFoundError:
            raise IngestError(f"{readable(logdir)}: no such file or folder") from None
        if not paths:
            raise IngestError(f"{readable(logdir)}: no Darshan logs (*.darshan) found")
        reader = darshan_log.Reader()
        read_one = lambda path, _max, _load: reader.read(path, os.path.abspath(logdir))     # noqa: E731
        if os.path.isfile(logdir):
            logdir = os.path.dirname(os.path.abspath(logdir))
    else:
        try:
            paths = find_logs(os.path.abspath(logdir))
        except NotADirectoryError as e:
            raise IngestError(f"{e}: not a folder") from None
        if not paths:
            raise IngestError(f"{readable(logdir)}: no mtcprof logs (*.mtclog) found; was the run traced with "
                              f"MTCPROF_DIR={readable(logdir)}?")
        reader, read_one = None, decode
    try:
        # Darshan logs are read by the worker process, not ahead here
        return _ingest(db, logdir, paths, read_one, run, strict, gfwhere_cmd, progress, warn, max_log_bytes,
                       read_ahead=reader is None)
    finally:
        if reader is not None:
            reader.close()


def _ingest(db, logdir, paths, read_one, run, strict, gfwhere_cmd, progress, warn, max_log_bytes,
            read_ahead: bool) -> IngestResult:
    res = IngestResult()
    log_warning: dict = {}     # path -> (message, path, offset): a log read twice (another run's) warns once

    def warn_(msg, path=None, offset=None):
        res.warnings.append(msg)
        res.details.append((msg, path, offset))
        warn(msg)

    odd = untrusted_folders(os.path.abspath(logdir))
    if odd:                    # warned, not refused: a testbed's tasks run as another user, as root ingests
        n = len(odd) - 1
        more = f" (and {n} more folder{'s' if n > 1 else ''} under it like it)" if n else ""
        warn_(f"{readable(odd[0][0])}: log folder {odd[0][1]}{more}: its logs may not be the run's; ingested as "
              f"they are", odd[0][0])

    def read(path, load=None, got=None):
        rows, w = got if got is not None else read_one(path, max_log_bytes, load)
        if w is not None and path not in log_warning:
            log_warning[path] = w
            res.bad_logs += 1
            warn_(*w)
        return rows

    created = not os.path.exists(db)
    conn = store.connect(db)
    decoder = ahead = None
    if read_ahead and len(paths) >= DECODER_MIN_LOGS and usable_cpus() >= 2:
        decoder = Decoder(max_log_bytes)
    elif read_ahead:
        ahead = prefetch.Prefetch(max_log_bytes)
    gc_on = gc.isenabled()
    gc.disable()
    try:
        default_run = run or os.path.basename(os.path.normpath(os.path.abspath(logdir))) or "run"
        pending = paths
        labels: dict = {}          # path -> run name, learnt when a log was read for another run
        bar = Progress(len(paths), "ingest", progress)
        conn.execute("PRAGMA synchronous = OFF")
        # the writer gives every row ids that exist (its own, or looked up) and deletes what a replaced process
        # had by hand: checking each row's parents (several index probes per row) cost a fifth of the time
        conn.execute("PRAGMA foreign_keys = OFF")
        cache = conn.execute("PRAGMA cache_size").fetchone()[0]
        # a run's indexes outgrow SQLite's default 2 MB page cache: pages spilled and read again cost a third of the
        # system time at a million tasks.  128 MiB: 99-112 s for a million tasks where 64 MiB took 128-136 s, peak
        # RSS 479 MiB (the sorters of build_tasks take the same budget; the limit is 512)
        conn.execute(f"PRAGMA cache_size = {CACHE_KIB}")
        try:
            if strict:
                conn.execute("BEGIN IMMEDIATE")
            while pending:
                pending = _ingest_one_run(conn, pending, labels, read, log_warning, warn_, res, run, default_run,
                                          logdir, gfwhere_cmd, bar, own_transaction=not strict, ahead=ahead,
                                          decoder=decoder)
            if strict:
                if res.bad_logs:
                    conn.execute("ROLLBACK")
                    res.committed = False
                else:
                    conn.execute("COMMIT")
        except DecoderDied as e:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise DecoderError(f"{e}; the run being ingested was not stored") from None
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        finally:
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute(f"PRAGMA cache_size = {int(cache)}")
        bar.done()
    finally:
        if gc_on:
            gc.enable()
        if ahead is not None:
            ahead.close()
        if decoder is not None:
            decoder.close()
        conn.close()
        if created and (not res.runs or not res.committed):
            _remove_db(db)
    return res


def _remove_db(db: str) -> None:
    for path in (db, db + "-wal", db + "-shm", db + "-journal"):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _ingest_one_run(conn, pending, labels, read, log_warning, warn_, res, run, default_run, logdir, gfwhere_cmd,
                    bar, own_transaction: bool, ahead: "prefetch.Prefetch | None" = None,
                    decoder: "Decoder | None" = None) -> list:
    """Ingest the logs of the run of pending[0] (one transaction unless the caller holds one); returns the logs
    that belong to other runs."""
    cur_run = labels.get(pending[0])
    later, writer, stored = [], None, []     # stored: warnings kept with this run
    deferred: list = []                     # indexes dropped while the run is written, built after it
    n_warn0 = len(res.details)
    if own_transaction:
        conn.execute("BEGIN IMMEDIATE")

    def elsewhere(path) -> bool:            # a log read before, of another run
        return path in labels and cur_run is not None and labels[path] != cur_run
    if decoder is not None:                 # (path, None, decoded or None: not sent, as it was elsewhere then)
        logs = ((p, None, got) for p, got in decoder.each(pending, lambda p: not elsewhere(p)))
    elif ahead is not None:
        logs = ((p, load, None) for p, load in ahead.each(pending))
    else:
        logs = ((p, None, None) for p in pending)
    try:
        for k, (path, load, got) in enumerate(logs):
            if k % GC_EVERY == GC_EVERY - 1:
                gc.collect()
            if elsewhere(path):
                later.append(path)
                continue
            log = read(path, load, got)
            if log is None:
                if path in log_warning:
                    stored.append(log_warning[path])
                bar.update()
                continue
            if isinstance(log, LogRows):    # a Darshan log's
                log = prepare(path, log)
            name = run or log[1] or default_run
            if cur_run is None:
                cur_run = name
            if name != cur_run:
                labels[path] = name
                later.append(path)
                continue
            if writer is None:
                rid = store.get_or_create_run(conn, cur_run, "trace", {"log_dir": os.path.abspath(logdir)})
                writer = RunWriter(conn, rid)
                if len(pending) >= DECODER_MIN_LOGS:
                    deferred = defer_indexes(conn)
            writer.add(path, log)
            if path in log_warning:
                stored.append(log_warning[path])
            bar.update()
        if writer is not None:
            writer.flush()
            counts = {"logs_added": writer.added, "logs_skipped": writer.skipped,
                      "file_access": writer.n_fa, "ops": writer.n_ops}
            if writer.task_sources:
                counts["task_sources"] = dict(writer.task_sources)
            nproc, nfiles, nops, example = writer.dropped
            if nproc:
                counts["dropped"] = {"processes": nproc, "files": nfiles, "ops": nops}
                warn_(f"{nproc} processes dropped records beyond the shim's limits: {nfiles:,} files (over "
                      f"65,536 per process) and {nops:,} ops (over MTCPROF_TRACE_MAX): their bytes, counts and "
                      f"times are missing from the run's numbers (e.g. {readable(example)})", example, None)
            if writer.added:
                counts["tasks"] = build_tasks(conn, writer.run_id)
            build_indexes(conn, deferred)       # before fill_sizes: a replaced process makes it read file_access
            if writer.added:
                fill_sizes(conn, writer.run_id, writer)
            fill_replicas(conn, writer.run_id, gfwhere_cmd, warn_)
            fill_task_io(conn, writer.run_id)
            stored += [d for d in res.details[n_warn0:] if d[1] not in log_warning]   # run-level warnings
            conn.executemany(
                "INSERT INTO ingest_warnings (run_id, log_path, offset, message) SELECT ?, ?, ?, ? WHERE NOT "
                "EXISTS (SELECT 1 FROM ingest_warnings WHERE run_id = ? AND message = ?)",
                [(writer.run_id, db_text(p), off, db_text(m), writer.run_id, db_text(m)) for m, p, off in stored])
            res.runs[cur_run] = counts
        if own_transaction:
            conn.execute("COMMIT")
    except BaseException:
        if own_transaction and conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return later
