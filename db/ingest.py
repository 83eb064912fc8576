"""`mtcprof ingest LOGDIR --db DB [--run NAME] [--strict] [--from darshan]`: load a run's logs into the store.

Every *.mtclog under LOGDIR (recursively) is read with db/logformat.py.  Logs are grouped into runs (--run NAME, else
each log's MTCPROF_RUN, else the folder's name); each run is written in ONE transaction, so the db is never left
half-written.  A process image is keyed by (run, host, pid, start_ns): re-ingesting the same logs adds nothing.
A truncated or corrupt log gives a warning naming the file and byte offset; its valid records are kept and the rest
of the run is ingested; the exit status is non-zero only with --strict.

After the logs, ingest (re)builds the run's tasks (all processes with the same MTCPROF_TASK; exec chains and fork
trees linked by (host, pid)), maps gfarm2fs mount paths to Gfarm paths, resolves the replica hosts of every Gfarm
file with batched `gfwhere` calls, and stores per-task read locality and write placement.
"""
from __future__ import annotations

import argparse
import heapq
import itertools
import json
import os
import shlex
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from mtcio.db import darshan_log, fastlog, prefetch
from mtcio.db.gfarm import parse_gfwhere
from mtcio.db.ingest_tasks import build_tasks, fill_task_io
from mtcio.db import logformat as lf
from mtcio.db import store, write_errors
from mtcio.db.store import db_text, readable, text_of
from mtcio.exitcodes import exit_table

FLAG_BITS = {name: bit for bit, name in lf.FILE_FLAGS.items()}
NC, NB = len(lf.COUNTERS), lf.NBINS
FA_COLS = ("process_id", "fid", "file_id", "flags") + lf.COUNTERS + \
    tuple(f"hr{i}" for i in range(NB)) + tuple(f"hw{i}" for i in range(NB))
PROC_COLS = ("id", "run_id", "host_id", "pid", "ppid", "uid", "origin", "start_ns", "end_ns", "exit_status",
             "ended_by", "signal", "parent_start_ns", "exe", "argv", "cwd", "task", "stage", "run_label",
             "gfarm_mounts", "ops_traced", "ops_dropped", "files_dropped", "munmaps", "trace_ops", "shim_version",
             "log_path", "log_complete", "log_error") + tuple(c for c, _ in store.CPU_CLOCK_COLS + store.SCHED_COLS +
                                                               store.CALL_WAIT_COLS)
BATCH = 4000            # logs per executemany batch
GFWHERE_BATCH = 400     # paths per gfwhere call
MAX_LOG_BYTES = 1 << 30  # a larger "log" is refused unread (the shim's default op trace cap gives <= 192 MiB)
I64_MAX = (1 << 63) - 1
CACHE_KIB = -65536         # SQLite page cache while ingesting (negative: KiB)


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


class IngestError(RuntimeError):
    """Nothing could be ingested (no logs, bad db ...)."""


@dataclass
class IngestResult:
    runs: dict = field(default_factory=dict)        # run name -> counts
    warnings: list = field(default_factory=list)
    bad_logs: int = 0                                # truncated / corrupt / unreadable logs
    committed: bool = True                           # False: --strict rolled everything back
    details: list = field(default_factory=list)      # (message, log path, byte offset)


# ---- progress ------------------------------------------------------------------------------------------------------

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


# ---- logs ----------------------------------------------------------------------------------------------------------

class LogList:
    """The logs under a folder in sorted order, kept compact: a folder's file names as one string (a million
    logs take ~40 MB here, ~140 MB as a list of paths).  Iterating gives the full paths."""

    def __init__(self):
        self._folders: list = []    # (folder, "\0"-joined sorted names, how many)
        self._n = 0

    def add(self, folder: str, names: list) -> None:
        if names:
            self._folders.append((folder, "\0".join(names), len(names)))
            self._n += len(names)

    def __len__(self) -> int:
        return self._n

    def __iter__(self):
        for k in range(len(self._folders)):
            yield from self.of_folder(k)

    def of_folder(self, k: int):
        """The full paths of the k-th folder entry, in order."""
        folder, names, _n = self._folders[k]
        i, end = 0, len(names)
        while i <= end:
            j = names.find("\0", i)
            if j < 0:
                j = end
            yield os.path.join(folder, names[i:j])
            i = j + 1

    def folders(self) -> int:
        return len(self._folders)

    def __getitem__(self, i: int) -> str:
        if not 0 <= i < self._n:
            raise IndexError(i)
        return next(itertools.islice(iter(self), i, None))


def find_logs(logdir: str) -> LogList:
    """All *.mtclog files under logdir (recursively), sorted by path.  Hidden .tmp files of running writers are
    skipped.  Listed folder by folder, each folder's names made compact at once (a million logs peak at ~130 MB
    here, not a list of a million paths); several folders are merged into the order of their full paths."""
    if not os.path.isdir(logdir):
        raise IngestError(f"{logdir}: not a folder")
    folders = LogList()
    for root, dirs, files in os.walk(logdir):
        dirs.sort()
        files[:] = [f for f in files if f.endswith(".mtclog") and not f.startswith(".")]
        files.sort()
        folders.add(root, files)
        del files[:]                # os.walk's list of the folder: not kept beside the compact one
    if folders.folders() <= 1:
        return folders
    out, folder, names = LogList(), None, []
    # a/x, a/b/y, a/z: one folder's logs may come in several runs of the full paths' order
    for p in heapq.merge(*(folders.of_folder(i) for i in range(folders.folders()))):
        d, name = os.path.split(p)
        if d != folder:
            out.add(folder, names)
            folder, names = d, []
        names.append(name)
    out.add(folder, names)
    return out


def untrusted_folders(logdir: str) -> list[tuple[str, str]]:
    """(folder, why) for each folder under logdir (itself included) whose logs another user could have put or
    replaced there, by the shim's rule: owned by neither this user nor root, or writable by others and not
    sticky.  The shim and `mtcprof run` refuse to write into such a folder; ingest reads it, and says so."""
    me = os.geteuid()
    out = []
    for root, dirs, _files in os.walk(logdir):
        dirs.sort()
        try:
            st = os.stat(root)
        except OSError:
            continue
        if st.st_uid not in (me, 0):
            out.append((root, f"owned by another user ({_user(st.st_uid)}; you are {_user(me)})"))
        elif st.st_mode & 0o002 and not st.st_mode & 0o1000:
            out.append((root, f"writable by others (mode {st.st_mode & 0o7777:04o})"))
    return out


def _user(uid: int) -> str:
    try:
        import pwd
        return f"uid {uid}, {pwd.getpwuid(uid).pw_name}"
    except (ImportError, KeyError):
        return f"uid {uid}"


def gfarm_path_of(path: str, mounts) -> str | None:
    """/mnt/x/a/b -> /a/b when /mnt/x is a gfarm2fs mount point; gfarm:///a/b and gfarm://host:port/a/b -> /a/b."""
    if path.startswith("gfarm:"):
        rest = path[6:]
        if rest.startswith("//"):
            rest = rest[2:]
            i = rest.find("/")
            rest = rest[i:] if i >= 0 else "/"
        return "/" + rest.lstrip("/")
    best = None
    for m in mounts:
        m = m.rstrip("/") or "/"
        if path == m or path.startswith(m + "/") or m == "/":
            if best is None or len(m) > len(best):
                best = m
    if best is None:
        return None
    rest = path[len(best):] if best != "/" else path
    return rest if rest.startswith("/") else "/" + rest


def _flag_int(names) -> int:
    v = 0
    for n in names:
        v |= FLAG_BITS.get(n, 0)
    return v


MAX_OFFSET = FA_COLS.index("max_offset")
FILE_CACHE = 200_000    # paths whose file ids a writer keeps; past it the cache restarts (the db has them all)


class _Batch:
    """Rows of the logs of one batch, ids assigned, not yet inserted."""
    __slots__ = ("procs", "fas", "new_files", "new_paths", "ops", "gaps", "task_sources", "maxoff", "n_ops",
                 "dropped")

    def __init__(self):
        self.procs, self.fas, self.new_files, self.new_paths, self.ops, self.gaps = [], [], [], [], [], []
        self.task_sources = {}      # Darshan logs: where task and stage came from -> logs
        self.maxoff = {}            # file id -> largest max_offset of the batch's rows (fill_sizes)
        self.n_ops = 0
        self.dropped = [0, 0, 0, None]


class _RunWriter:
    """Writes the logs of one run inside the caller's transaction, BATCH logs at a time, with ids assigned here.
    A batch is inserted at once inside a savepoint; a batch holding a process image already stored (re-ingest, a
    log given twice, a damaged copy and its complete log) breaks the UNIQUE (run, host, pid, start) key, is rolled
    back to the savepoint and written log by log, each looked up first.  Memory is one batch, the host ids and at
    most FILE_CACHE file paths, whatever the run's size: nothing per process is kept to the end."""

    def __init__(self, conn, run_id: int):
        self.conn, self.run_id = conn, run_id
        self.hosts = {text_of(r[1]): r[0] for r in conn.execute("SELECT id, name FROM hosts")}
        self.files: dict = {}       # path -> file id, a cache of the db's files of the run
        # a run with no file yet has nothing to look up until the cache first restarts
        self.look_up = conn.execute("SELECT 1 FROM files WHERE run_id = ? LIMIT 1", (run_id,)).fetchone() is not None
        self.next_pid = (conn.execute("SELECT max(id) FROM processes").fetchone()[0] or 0) + 1
        self.next_fid = (conn.execute("SELECT max(id) FROM files").fetchone()[0] or 0) + 1
        self.batch: list = []       # (path, host id, LogRows)
        self.added = self.skipped = self.n_fa = self.n_ops = 0
        self.dropped = [0, 0, 0, None]      # processes, files, ops dropped by the shim's limits; an example log
        self.task_sources: dict = {}    # Darshan logs: where task and stage came from -> logs
        self.replaced = False       # a stored process was replaced (its rows deleted): sizes from the db's rows
        # the largest offset reached in each file by the rows this writer added, for fill_sizes
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS ingest_maxoff (file_id INTEGER PRIMARY KEY, m INTEGER)")
        conn.execute("DELETE FROM temp.ingest_maxoff")

    def host_id(self, name: str) -> int:
        hid = self.hosts.get(name)
        if hid is None:
            hid = self.conn.execute("INSERT INTO hosts (name) VALUES (?)", (db_text(name),)).lastrowid
            self.hosts[name] = hid
        return hid

    def add(self, path: str, rec: "LogRows") -> None:
        host = rec.proc.get("host") or os.path.basename(path).split(".")[0]
        self.batch.append((path, self.hosts.get(host) or self.host_id(host), rec))   # hosts: outside savepoints
        if len(self.batch) >= BATCH:
            self.flush()

    def flush(self) -> None:
        batch, self.batch = self.batch, []
        if not batch:
            return
        c = self.conn
        ids = self.next_pid, self.next_fid
        rows = _Batch()
        c.execute("SAVEPOINT ingest_batch")
        try:
            for path, hid, rec in batch:
                self._rows(path, hid, rec, rows)
            self._insert(rows)
        except sqlite3.IntegrityError:
            c.execute("ROLLBACK TO ingest_batch")
            c.execute("RELEASE ingest_batch")
            self.next_pid, self.next_fid = ids
            for p in rows.new_paths:
                self.files.pop(p, None)
            self._one_by_one(batch)
        else:
            c.execute("RELEASE ingest_batch")
            self._count(rows)
        if len(self.files) > FILE_CACHE:
            self.files.clear()
            self.look_up = True

    def _one_by_one(self, batch) -> None:
        """The batch log by log: a process image already stored is skipped, or replaced when this log is its
        complete copy and the stored one was not."""
        c = self.conn
        for path, hid, rec in batch:
            p = rec.proc
            prev = c.execute("SELECT id, log_complete FROM processes WHERE run_id = ? AND host_id = ? AND pid = ? "
                             "AND start_ns = ?", (self.run_id, hid, p["pid"], p["start_ns"])).fetchone()
            if prev is not None:
                if not (rec.complete and not prev[1]):
                    self.skipped += 1
                    continue
                self._drop(prev[0])     # the complete log of a process stored from a damaged copy replaces it
            rows = _Batch()
            self._rows(path, hid, rec, rows)
            self._insert(rows)
            self._count(rows)

    def _rows(self, path: str, hid: int, rec: "LogRows", rows: _Batch) -> None:
        p = rec.proc
        pid = self.next_pid
        self.next_pid += 1
        mounts = p.get("gfarm_mounts") or []
        rows.procs.append((
            pid, self.run_id, hid, p["pid"], p["ppid"], p["uid"], p["origin"], p["start_ns"], p["end_ns"],
            p["exit_status"], p["ended_by"], p["signal"], p["parent_start_ns"], db_text(p.get("exe")),
            json.dumps(p.get("argv", [])), db_text(p.get("cwd")), db_text(p.get("task")), db_text(p.get("stage")),
            db_text(p.get("run")), json.dumps(mounts) if mounts else "[]", p["ops_traced"], p["ops_dropped"],
            p["files_dropped"], p["munmaps"], int(p["trace_ops"]), db_text(p.get("shim_version")), db_text(path),
            int(rec.complete), db_text(rec.error), *cpu_clock(p.get("cpu_clock")), *sched(p.get("sched")),
            *call_wait(p.get("cpu_wait"))))
        if p["files_dropped"] or p["ops_dropped"]:
            d = rows.dropped
            d[0] += 1
            d[1] += p["files_dropped"]
            d[2] += p["ops_dropped"]
            d[3] = d[3] or path
        files, fas, maxoff = self.files, rows.fas, rows.maxoff
        for fid, flags, fpath, vals in rec.files:
            file_id = files.get(fpath)
            if file_id is None:
                file_id = self._file_id(fpath, mounts, rows)
            row = (pid, fid, file_id, flags) + vals
            fas.append(row)
            if row[MAX_OFFSET] > maxoff.get(file_id, -1):
                maxoff[file_id] = row[MAX_OFFSET]
        for chunk, (count, data) in enumerate(rec.ops):
            if not count:
                continue
            a = np.frombuffer(data, dtype=lf.OP_DTYPE)
            first, last = int(a["start_ns"].min()), int((a["start_ns"] + a["dur_ns"]).max())
            rows.ops.append((pid, chunk, count, first if first <= I64_MAX else None,
                             last if last <= I64_MAX else None, data))
            rows.n_ops += count
        rows.gaps.extend((pid, fid, kind, detail) for kind, fid, detail in rec.gaps)
        if rec.task_source:
            rows.task_sources[rec.task_source] = rows.task_sources.get(rec.task_source, 0) + 1

    def _file_id(self, fpath: str, mounts, rows: _Batch) -> int:
        """The id of a path not in the cache: the db's, else a new one (its row inserted with the batch)."""
        found = None
        if self.look_up:
            found = self.conn.execute("SELECT id FROM files WHERE run_id = ? AND path = ?",
                                      (self.run_id, db_text(fpath))).fetchone()
        if found is not None:
            file_id = found[0]
        else:
            file_id = self.next_fid
            self.next_fid += 1
            rows.new_files.append((file_id, self.run_id, db_text(fpath), db_text(
                gfarm_path_of(fpath, mounts) if (mounts or fpath.startswith("gfarm:")) else None)))
            rows.new_paths.append(fpath)
        self.files[fpath] = file_id
        return file_id

    def _insert(self, rows: _Batch) -> None:
        c = self.conn
        if rows.new_files:
            c.executemany("INSERT INTO files (id, run_id, path, gfarm_path) VALUES (?,?,?,?)", rows.new_files)
        if rows.procs:
            c.executemany(_INSERT_PROC, rows.procs)
        if rows.fas:
            c.executemany(_INSERT_FA, rows.fas)
        if rows.ops:
            c.executemany("INSERT INTO ops (process_id, chunk, n_ops, first_ns, last_ns, data) VALUES (?,?,?,?,?,?)",
                          rows.ops)
        if rows.gaps:
            c.executemany("INSERT INTO capture_gaps (process_id, fid, kind, detail) VALUES (?,?,?,?)", rows.gaps)
        if rows.maxoff:
            c.executemany("INSERT INTO temp.ingest_maxoff (file_id, m) VALUES (?, ?) ON CONFLICT (file_id) DO "
                          "UPDATE SET m = max(m, excluded.m)", rows.maxoff.items())

    def _count(self, rows: _Batch) -> None:
        self.added += len(rows.procs)
        self.n_fa += len(rows.fas)
        self.n_ops += rows.n_ops
        if rows.dropped[0]:
            d = self.dropped
            for i in range(3):
                d[i] += rows.dropped[i]
            d[3] = d[3] or rows.dropped[3]
        for src, n in rows.task_sources.items():
            self.task_sources[src] = self.task_sources.get(src, 0) + n

    def _drop(self, process_id: int) -> None:
        self.replaced = True
        self.conn.execute("UPDATE processes SET chain_prev_id = NULL WHERE chain_prev_id = ?", (process_id,))
        self.conn.execute("DELETE FROM processes WHERE id = ?", (process_id,))     # its file_access, ops cascade


_INSERT_PROC = f"INSERT INTO processes ({', '.join(PROC_COLS)}) VALUES ({', '.join('?' * len(PROC_COLS))})"
_INSERT_FA = f"INSERT INTO file_access ({', '.join(FA_COLS)}) VALUES ({', '.join('?' * len(FA_COLS))})"


# ---- Gfarm: sizes, replicas ----------------------------------------------------------------------------------------

def default_gfwhere_cmd() -> list[str] | None:
    if os.environ.get("GFARM_CONFIG_FILE") or os.path.exists(os.path.expanduser("~/.gfarm2rc")) or \
            os.path.exists("/etc/gfarm2.conf"):
        return ["gfwhere"]
    return None


def resolve_replicas(paths: list[str], cmd: list[str], timeout: float = 300.0, warn=None) -> tuple[dict, dict]:
    """Replica hosts of Gfarm paths with batched gfwhere calls -> ({path: [hosts]}, {path: error})."""
    found, errors = {}, {}
    errors.update((p, "not a valid path (NUL byte)") for p in paths if "\0" in p)
    paths = [p for p in paths if "\0" not in p]
    for i in range(0, len(paths), GFWHERE_BATCH):
        batch = paths[i:i + GFWHERE_BATCH]
        try:
            r = subprocess.run(cmd + ["--"] + batch, capture_output=True, text=True, timeout=timeout,
                               errors="surrogateescape")
        except (OSError, subprocess.TimeoutExpired) as e:
            raise RuntimeError(f"cannot run {' '.join(cmd)}: {e}") from None
        got = parse_gfwhere(r.stdout, batch)
        found.update(got)
        for line in r.stderr.splitlines():
            for p in batch:
                if line.startswith(p + ":"):
                    errors[p] = line[len(p) + 1:].strip()
        if not got and r.returncode != 0:
            msg = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
            if not errors:
                raise RuntimeError(f"{' '.join(cmd)} failed: {msg}")
        for p in batch:
            if p not in found and p not in errors:
                errors[p] = "no replica reported"
    return found, errors


SIZE_BATCH = 10000


def fill_sizes(conn, run_id: int, writer: "_RunWriter | None" = None) -> None:
    """files.size: stat of the trace path when it exists now, else the largest offset any process reached.
    With the writer that just added the run's logs, the largest offsets are the ones it kept per file (no scan of
    file_access); files are taken SIZE_BATCH at a time in id order."""
    if writer is not None and not writer.replaced:
        # a file still without a size has all its rows from this writer (sizes are filled after every ingest)
        query = ("SELECT f.id, f.path, m.m FROM temp.ingest_maxoff m JOIN files f ON f.id = m.file_id "
                 "WHERE m.file_id > ? AND f.run_id = ? AND f.size IS NULL ORDER BY m.file_id LIMIT ?")
    else:
        query = ("SELECT f.id, f.path, (SELECT max(fa.max_offset) FROM file_access fa WHERE fa.file_id = f.id) AS m "
                 "FROM files f WHERE f.id > ? AND f.run_id = ? AND f.size IS NULL AND m IS NOT NULL "
                 "ORDER BY f.id LIMIT ?")
    after = 0
    while True:
        rows = conn.execute(query, (after, run_id, SIZE_BATCH)).fetchall()
        if not rows:
            return
        after = rows[-1][0]
        upd = []
        for fid, path, maxoff in rows:
            try:
                st = os.stat(text_of(path))
                if st.st_mode & 0o170000 == 0o100000:
                    upd.append((st.st_size, "stat", fid))
                    continue
            except (OSError, ValueError):       # ValueError: a NUL in a damaged log's name
                pass
            upd.append((maxoff or 0, "max_offset", fid))
        conn.executemany("UPDATE files SET size = ?, size_source = ? WHERE id = ?", upd)


def fill_replicas(conn, run_id: int, cmd: list[str] | None, warn) -> int:
    """Resolve replica hosts of the run's not yet resolved Gfarm files (one gfwhere per GFWHERE_BATCH paths)."""
    todo = [text_of(r[0]) for r in conn.execute(
        "SELECT DISTINCT gfarm_path FROM files WHERE run_id = ? AND gfarm_path IS NOT NULL AND resolved_at IS NULL",
        (run_id,))]
    if not todo:
        return 0
    if cmd is None:
        warn(f"{len(todo)} Gfarm files: replica hosts not resolved (no Gfarm configured: set GFARM_CONFIG_FILE "
             f"or pass --gfwhere-cmd); locality unknown")
        return 0
    try:
        found, errors = resolve_replicas(todo, cmd, warn=warn)
    except RuntimeError as e:
        warn(f"replica hosts not resolved ({e}); locality unknown")
        return 0
    now = time.time()
    conn.executemany("UPDATE files SET replica_hosts = ?, resolved_at = ?, resolve_error = ? "
                     "WHERE run_id = ? AND gfarm_path = ?",
                     [(json.dumps(found.get(p, [])), now, db_text(errors.get(p)), run_id, db_text(p)) for p in todo])
    if errors:
        ex = next(iter(errors.items()))
        warn(f"{len(errors)} of {len(todo)} Gfarm files have no replica (deleted since?), e.g. {readable(ex[0])}: "
             f"{readable(ex[1])}")
    return len(found)


# ---- driver --------------------------------------------------------------------------------------------------------

def _stderr_warn(msg: str) -> None:
    print(f"mtcprof ingest: warning: {msg}", file=sys.stderr)


def ingest(db: str, logdir: str, *, run: str | None = None, strict: bool = False,
           gfwhere_cmd: list[str] | str | None = "auto", progress: bool | None = None,
           warn=_stderr_warn, max_log_bytes: int = MAX_LOG_BYTES, source: str = "mtcprof") -> IngestResult:
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
        paths = find_logs(os.path.abspath(logdir))
        if not paths:
            raise IngestError(f"{readable(logdir)}: no mtcprof logs (*.mtclog) found; was the run traced with "
                              f"MTCPROF_DIR={readable(logdir)}?")
        reader, read_one = None, _read
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

    def read(path, load=None):
        rows, w = read_one(path, max_log_bytes, load)
        if w is not None and path not in log_warning:
            log_warning[path] = w
            res.bad_logs += 1
            warn_(*w)
        return rows

    created = not os.path.exists(db)
    conn = store.connect(db)
    ahead = prefetch.Prefetch(max_log_bytes) if read_ahead else None
    try:
        default_run = run or os.path.basename(os.path.normpath(os.path.abspath(logdir))) or "run"
        pending = paths
        labels: dict = {}          # path -> run name, learnt when a log was read for another run
        bar = Progress(len(paths), "ingest", progress)
        conn.execute("PRAGMA synchronous = OFF")
        cache = conn.execute("PRAGMA cache_size").fetchone()[0]
        # a run's indexes outgrow SQLite's default 2 MB page cache: pages spilled and read again cost a third of the
        # system time at a million tasks; 64 MiB bounds it (the sorters of build_tasks take the same budget)
        conn.execute(f"PRAGMA cache_size = {CACHE_KIB}")
        try:
            if strict:
                conn.execute("BEGIN IMMEDIATE")
            while pending:
                pending = _ingest_one_run(conn, pending, labels, read, log_warning, warn_, res, run, default_run,
                                          logdir, gfwhere_cmd, bar, own_transaction=not strict, ahead=ahead)
            if strict:
                if res.bad_logs:
                    conn.execute("ROLLBACK")
                    res.committed = False
                else:
                    conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        finally:
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute(f"PRAGMA cache_size = {int(cache)}")
        bar.done()
    finally:
        if ahead is not None:
            ahead.close()
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
                    bar, own_transaction: bool, ahead: "prefetch.Prefetch | None" = None) -> list:
    """Ingest the logs of the run of pending[0] (one transaction unless the caller holds one); returns the logs
    that belong to other runs."""
    cur_run = labels.get(pending[0])
    later, writer, stored = [], None, []     # stored: warnings kept with this run
    n_warn0 = len(res.details)
    if own_transaction:
        conn.execute("BEGIN IMMEDIATE")
    try:
        for path, load in (ahead.each(pending) if ahead is not None else ((p, None) for p in pending)):
            if path in labels and cur_run is not None and labels[path] != cur_run:
                later.append(path)
                continue
            log = read(path, load)
            if log is None:
                if path in log_warning:
                    stored.append(log_warning[path])
                bar.update()
                continue
            name = run or log.proc.get("run") or default_run
            if cur_run is None:
                cur_run = name
            if name != cur_run:
                labels[path] = name
                later.append(path)
                continue
            if writer is None:
                rid = store.get_or_create_run(conn, cur_run, "trace", {"log_dir": os.path.abspath(logdir)})
                writer = _RunWriter(conn, rid)
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


class LogRows:
    """One log, reduced to what ingest stores: process dict, files as (fid, flags, path, 50 values), op chunks as
    (count, packed little-endian bytes), complete flag, error text, FILE records the reader kept out."""
    __slots__ = ("proc", "files", "ops", "complete", "error", "kept_out", "gaps", "task_source")

    def __init__(self, proc, files, ops, complete, error, kept_out=0):
        self.proc, self.files, self.ops, self.complete, self.error = proc, files, ops, complete, error
        self.kept_out = kept_out
        self.gaps = ()              # capture gaps (kind, fid or None, detail) of a Darshan log
        self.task_source = None     # where a Darshan log's task and stage came from


def read_rows(path: str, max_log_bytes: int = MAX_LOG_BYTES) -> tuple["LogRows | None", "lf.LogError | None"]:
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


def _read(path: str, max_log_bytes: int = MAX_LOG_BYTES, load=None):
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


# ---- CLI -----------------------------------------------------------------------------------------------------------

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = exit_table({1: "failed: --strict and a log is truncated, corrupt or unreadable (nothing stored); "
                              "the disk is full or read-only",
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
        return 1 if isinstance(e, store.DiskError) else 2
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
