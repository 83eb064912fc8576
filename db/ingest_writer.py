"""Writing a run's decoded logs (ingest_read.LogRows) into the store: `RunWriter` assigns ids and inserts BATCH logs
at a time (processes, files, file_access, ops, capture gaps); `fill_sizes` gives the run's files a size afterwards.
Paths of gfarm2fs mounts become Gfarm paths here (`gfarm_path_of`).
"""
from __future__ import annotations

import json
import os
import sqlite3
from json.encoder import encode_basestring_ascii

import numpy as np

from mtcio.db import logformat as lf
from mtcio.db import store
from mtcio.db.ingest_read import LogRows, call_wait, cpu_clock, sched
from mtcio.db.store import db_text, text_of

NB = lf.NBINS
FA_COLS = ("process_id", "fid", "file_id", "flags") + lf.COUNTERS + \
    tuple(f"hr{i}" for i in range(NB)) + tuple(f"hw{i}" for i in range(NB))
PROC_COLS = ("id", "run_id", "host_id", "pid", "ppid", "uid", "origin", "start_ns", "end_ns", "exit_status",
             "ended_by", "signal", "parent_start_ns", "exe", "argv", "cwd", "task", "stage", "run_label",
             "gfarm_mounts", "ops_traced", "ops_dropped", "files_dropped", "munmaps", "trace_ops", "shim_version",
             "log_path", "log_complete", "log_error") + tuple(c for c, _ in store.CPU_CLOCK_COLS + store.SCHED_COLS +
                                                               store.CALL_WAIT_COLS)
BATCH = 4000            # logs per executemany batch
I64_MAX = (1 << 63) - 1


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


MAX_OFFSET = FA_COLS.index("max_offset")
_VAL_MAX_OFFSET = MAX_OFFSET - 4            # among a file record's 50 values
# positions in a prepared log's process values (PROC_COLS without id, run_id, host_id)
_PID, _START_NS, _OPS_DROPPED, _FILES_DROPPED = (PROC_COLS.index(c) - 3 for c in ("pid", "start_ns", "ops_dropped",
                                                                                 "files_dropped"))


def _json_strs(v) -> str:
    """json.dumps(v), for a list of str without json.dumps' Python-level wrappers (a tenth of a log's decoding):
    the same C escaping, the same separators; anything else through json.dumps."""
    if type(v) is list and all(type(a) is str for a in v):
        return "[" + ", ".join(map(encode_basestring_ascii, v)) + "]"
    return json.dumps(v)


def prepare(path: str, rec: LogRows) -> tuple:
    """A log's rows with everything that needs no id done: (host, run label, process values in PROC_COLS order
    without id/run_id/host_id, gfarm mounts, files (fid, flags, path, 50 values), ops (chunk, count, first_ns,
    last_ns, bytes), complete, capture gaps, task source).  Plain tuples: this is what ingest's decoder process
    sends back (db/ingest_decode.py), cheap to pickle; RunWriter then only gives ids."""
    p = rec.proc
    mounts = p.get("gfarm_mounts") or []
    tail = (p["pid"], p["ppid"], p["uid"], p["origin"], p["start_ns"], p["end_ns"], p["exit_status"], p["ended_by"],
            p["signal"], p["parent_start_ns"], db_text(p.get("exe")), _json_strs(p.get("argv", [])),
            db_text(p.get("cwd")), db_text(p.get("task")), db_text(p.get("stage")), db_text(p.get("run")),
            _json_strs(mounts) if mounts else "[]", p["ops_traced"], p["ops_dropped"], p["files_dropped"],
            p["munmaps"], int(p["trace_ops"]), db_text(p.get("shim_version")), db_text(path), int(rec.complete),
            db_text(rec.error), *cpu_clock(p.get("cpu_clock")), *sched(p.get("sched")),
            *call_wait(p.get("cpu_wait")))
    ops = []
    for chunk, (count, data) in enumerate(rec.ops):
        if not count:
            continue
        a = np.frombuffer(data, dtype=lf.OP_DTYPE)
        first, last = int(a["start_ns"].min()), int((a["start_ns"] + a["dur_ns"]).max())
        ops.append((chunk, count, first if first <= I64_MAX else None, last if last <= I64_MAX else None, data))
    host = p.get("host") or os.path.basename(path).split(".")[0]
    return (host, p.get("run"), tail, mounts, rec.files, ops, rec.complete, tuple(rec.gaps), rec.task_source)


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


class RunWriter:
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

    def add(self, path: str, rec: "LogRows | tuple") -> None:
        """One log: its LogRows, or what prepare() made of them (ingest's decoder process gives that)."""
        if isinstance(rec, LogRows):
            rec = prepare(path, rec)
        host = rec[0]
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
            tail = rec[2]
            prev = c.execute("SELECT id, log_complete FROM processes WHERE run_id = ? AND host_id = ? AND pid = ? "
                             "AND start_ns = ?", (self.run_id, hid, tail[_PID], tail[_START_NS])).fetchone()
            if prev is not None:
                if not (rec[6] and not prev[1]):
                    self.skipped += 1
                    continue
                self._drop(prev[0])     # the complete log of a process stored from a damaged copy replaces it
            rows = _Batch()
            self._rows(path, hid, rec, rows)
            self._insert(rows)
            self._count(rows)

    def _rows(self, path: str, hid: int, prep: tuple, rows: _Batch) -> None:
        _host, _run, tail, mounts, files, ops, _complete, gaps, task_source = prep
        pid = self.next_pid
        self.next_pid += 1
        rows.procs.append((pid, self.run_id, hid) + tail)
        if tail[_FILES_DROPPED] or tail[_OPS_DROPPED]:
            d = rows.dropped
            d[0] += 1
            d[1] += tail[_FILES_DROPPED]
            d[2] += tail[_OPS_DROPPED]
            d[3] = d[3] or path
        cache, fas, maxoff = self.files, rows.fas, rows.maxoff
        for fid, flags, fpath, vals in files:
            file_id = cache.get(fpath)
            if file_id is None:
                file_id = self._file_id(fpath, mounts, rows)
            fas.append((pid, fid, file_id, flags) + vals)
            m = vals[_VAL_MAX_OFFSET]
            if m > maxoff.get(file_id, -1):
                maxoff[file_id] = m
        for chunk, count, first, last, data in ops:
            rows.ops.append((pid, chunk, count, first, last, data))
            rows.n_ops += count
        if gaps:
            rows.gaps.extend((pid, fid, kind, detail) for kind, fid, detail in gaps)
        if task_source:
            rows.task_sources[task_source] = rows.task_sources.get(task_source, 0) + 1

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
        """A stored process and its rows; by hand, not by ON DELETE CASCADE: ingest writes with foreign keys off."""
        self.replaced = True
        c = self.conn
        c.execute("UPDATE processes SET chain_prev_id = NULL WHERE chain_prev_id = ?", (process_id,))
        for table in ("file_access", "ops", "capture_gaps"):
            c.execute(f"DELETE FROM {table} WHERE process_id = ?", (process_id,))
        c.execute("DELETE FROM processes WHERE id = ?", (process_id,))


_INSERT_PROC = f"INSERT INTO processes ({', '.join(PROC_COLS)}) VALUES ({', '.join('?' * len(PROC_COLS))})"
_INSERT_FA = f"INSERT INTO file_access ({', '.join(FA_COLS)}) VALUES ({', '.join('?' * len(FA_COLS))})"


# Indexes no step of ingest reads while it writes a run and builds its tasks: built once after them (one sort) instead
# of row by row (a random B-tree insert per file record, the file ids being in no order; an index entry moved per
# process when build_tasks sets its task), when the table has no rows yet, so the build sorts only the run's own.
DEFERRED_INDEXES = (("file_access_file", "file_access"), ("processes_task", "processes"))


def defer_indexes(conn) -> list:
    """Drop the DEFERRED_INDEXES of still empty tables, inside the caller's transaction (a rollback brings them back);
    returns their CREATE statements for build_indexes."""
    out = []
    for name, table in DEFERRED_INDEXES:
        row = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?", (name,)).fetchone()
        if row is not None and conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is None:
            conn.execute(f"DROP INDEX {name}")
            out.append(row[0])
    return out


def build_indexes(conn, deferred: list) -> None:
    for sql in deferred:
        conn.execute(sql)


SIZE_BATCH = 10000


def fill_sizes(conn, run_id: int, writer: "RunWriter | None" = None) -> None:
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
