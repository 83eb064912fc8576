"""The tasks of an ingested run: `build_tasks` groups its process images into tasks (exec chains, fork trees,
attempts), `fill_task_io` sums each task's file records into its I/O counts and read locality.

Both work from the db, not from memory: exec chains are linked by a window query (over the (host, pid) with an image
ended by exec), images come grouped by task name from one sorted query (one group in Python at a time), per-task
sums are SQL (one pass over file_access for the tasks of one image).  Memory does not grow with the run
(db/ingest.py calls them after writing a run's logs).
"""
from __future__ import annotations

import json
import re
import shlex
import sqlite3
from collections import defaultdict

from mtcio.db.gfarm import host_match
from mtcio.db.store import db_text, text_of

I64_MAX = (1 << 63) - 1


_CHAINS = """
INSERT INTO temp.ingest_chain (id, head, prev)
SELECT id, first_value(id) OVER (PARTITION BY host_id, pid, chain ORDER BY start_ns), prev
FROM (SELECT id, host_id, pid, start_ns, prev,
             sum(prev IS NULL) OVER (PARTITION BY host_id, pid ORDER BY start_ns ROWS UNBOUNDED PRECEDING) AS chain
      FROM (SELECT id, host_id, pid, start_ns,
                   CASE WHEN lag(ended_by) OVER w = 'exec' THEN lag(id) OVER w END AS prev
            FROM processes WHERE run_id = ? AND (host_id, pid) IN (SELECT host_id, pid FROM temp.ingest_rep)
            WINDOW w AS (PARTITION BY host_id, pid ORDER BY start_ns)))"""
# the (host, pid) with an image ended by exec: only those can chain and need the window query; every other image is
# its own chain (head itself, no previous image).  The run's rows in id order, not by the run's index: one pass
_REPEATED = ("INSERT OR IGNORE INTO temp.ingest_rep SELECT host_id, pid FROM processes WHERE id BETWEEN ? AND ? AND "
             "+run_id = ? AND ended_by = 'exec'")
_SINGLES = ("INSERT INTO temp.ingest_chain (id, head, prev) SELECT id, id, NULL FROM processes p WHERE run_id = ? "
            "AND NOT EXISTS (SELECT 1 FROM temp.ingest_rep r WHERE r.host_id = p.host_id AND r.pid = p.pid)")
# every image with its chain, grouped by the chain head's task name (NULL and '' alike: no name), then by host
_GROUPED = """
SELECT COALESCE(h.task, ''), p.host_id, p.id, p.pid, p.ppid, p.start_ns, p.end_ns, p.exit_status, p.signal,
       p.stage, CASE WHEN p.id = c.head THEN p.argv END, c.head, c.prev
FROM temp.ingest_chain c JOIN processes p ON p.id = c.id JOIN processes h ON h.id = c.head
ORDER BY 1, p.host_id, p.pid, p.start_ns"""
_INSERT_TASKS = ("INSERT INTO tasks (id, run_id, name, attempt, stage, host_id, command, start_ns, end_ns, "
                 "exit_status, signal, n_processes, bytes_read, bytes_written, files_read, files_written, "
                 "bytes_read_local, bytes_read_remote, files_read_local, files_read_remote, bytes_read_unknown, "
                 "bytes_written_local, t_io_ns) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,0,0,0,0,0,0,0,0,0,0,0)")
TASK_BATCH = 20000      # task rows and process updates per executemany


def build_tasks(conn, run_id: int) -> int:
    """(Re)build the tasks of a run from its processes; link exec chains.  Returns the number of tasks.

    Exec chains (consecutive images of one (host, pid), the earlier ended by exec) are linked in SQL; the images
    then come grouped by their chain head's task name (the unnamed ones host by host: their tasks are root trees,
    and a parent is on its child's host), and only one group is in memory at a time.  Tasks start with zero I/O
    counts (fill_task_io sets those of tasks with file records)."""
    # the run's tasks' processes found by the task index (a new run has none: no scan of its processes)
    conn.execute("UPDATE processes SET task_id = NULL WHERE task_id IN (SELECT id FROM tasks WHERE run_id = ?) AND "
                 "run_id = ?", (run_id, run_id))
    conn.execute("DELETE FROM tasks WHERE run_id = ?", (run_id,))
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS ingest_chain (id INTEGER PRIMARY KEY, head INTEGER NOT NULL, "
                 "prev INTEGER)")
    conn.execute("DELETE FROM temp.ingest_chain")
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS ingest_rep (host_id INTEGER, pid INTEGER, "
                 "PRIMARY KEY (host_id, pid)) WITHOUT ROWID")
    conn.execute("DELETE FROM temp.ingest_rep")
    lo, hi = conn.execute("SELECT min(id), max(id) FROM processes WHERE run_id = ?", (run_id,)).fetchone()
    conn.execute(_REPEATED, (lo, hi, run_id))
    conn.execute(_SINGLES, (run_id,))
    if conn.execute("SELECT 1 FROM temp.ingest_rep LIMIT 1").fetchone():
        conn.execute(_CHAINS, (run_id,))
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS ingest_assign (id INTEGER PRIMARY KEY, task_id INTEGER NOT NULL, "
                 "prev INTEGER)")
    conn.execute("DELETE FROM temp.ingest_assign")
    out = _TaskOut(conn, run_id, (conn.execute("SELECT max(id) FROM tasks").fetchone()[0] or 0) + 1)
    cur = conn.cursor()
    cur.row_factory = None
    group, key = [], None
    for r in cur.execute(_GROUPED):
        k = r[0] if r[0] != "" else ("", r[1])
        if k != key:
            if group:
                out.group(key, group)
            group, key = [], k
        group.append(r)
    if group:
        out.group(key, group)
    out.flush()
    # one UPDATE from the assignments gathered: ~3x cheaper than an UPDATE statement per process
    conn.execute("UPDATE processes SET task_id = a.task_id, chain_prev_id = a.prev FROM temp.ingest_assign a "
                 "WHERE processes.id = a.id")
    conn.execute("DELETE FROM temp.ingest_chain")
    conn.execute("DELETE FROM temp.ingest_assign")
    conn.execute("DELETE FROM temp.ingest_rep")
    return out.n


class _TaskOut:
    """The tasks of one group of images at a time, written in batches."""

    def __init__(self, conn, run_id: int, next_tid: int):
        self.conn, self.run_id, self.next_tid = conn, run_id, next_tid
        self.task_rows, self.assign, self.n = [], [], 0

    def group(self, key, rows) -> None:
        name = "" if isinstance(key, tuple) else (text_of(key) or "")
        if len(rows) == 1:              # one image, its own chain and root: most tasks
            _, hid, i, pid, _ppid, start, end, status, sig, stage, argv, _h, _p = rows[0]
            self._task(name, 1, i, hid, pid, start, stage or None, argv, start, end, status, sig, 1)
            self.assign.append((self.next_tid - 1, None, i))
        else:
            self._general(name, rows)
        if len(self.task_rows) >= TASK_BATCH or len(self.assign) >= TASK_BATCH:
            self.flush()

    def _task(self, name, k, root_id, hid, pid, root_start, stage, argv, start, end, status, sig, n) -> None:
        tname = name if name else f"pid{pid}@{hid}:{root_start}"
        try:
            cmd = _command(_json_list(argv or "[]"))
        except ValueError:
            cmd = None
        self.task_rows.append((self.next_tid, self.run_id, db_text(tname), k if name else 1, stage, hid,
                               db_text(cmd), start, end, status, sig, n))
        self.next_tid += 1
        self.n += 1

    def _general(self, name, rows) -> None:
        """Exec chains, fork trees and attempts of one group: a head is a root when its parent (host, ppid) is not
        a process of the group; a root starting after a failed earlier attempt ended begins a new attempt (named
        tasks); unnamed: every root tree is its own task."""
        # byid: (id, host, pid, ppid, -, start, end, -, exit, signal, -, stage as str, argv)
        byid, chain_prev, chain_last = {}, {}, {}
        for _, hid, i, pid, ppid, start, end, status, sig, stage, argv, head, prev in rows:
            byid[i] = (i, hid, pid, ppid, None, start, end, None, status, sig, None, text_of(stage), argv)
            if prev is not None:
                chain_prev[i] = prev
            chain_last[head] = i            # rows are in chain order, so the last assignment wins
        heads = list(chain_last)
        pids = {(byid[h][1], byid[h][2]): h for h in heads}
        parent = {h: pids.get((byid[h][1], byid[h][3])) for h in heads}
        parent = {h: (p if p != h else None) for h, p in parent.items()}
        roots = sorted((h for h in heads if parent[h] is None), key=lambda h: byid[h][5])
        if not roots:                       # a cycle from pid reuse: take the earliest
            roots = [min(heads, key=lambda h: byid[h][5])]
            parent[roots[0]] = None

        def root_of(h):
            seen = set()
            while parent.get(h) is not None and h not in seen:
                seen.add(h)
                h = parent[h]
            return h
        members = defaultdict(list)        # root -> chain heads
        for h in heads:
            members[root_of(h)].append(h)
        attempts = []
        for rt in roots:
            images = [i for h in members[rt] for i in _chain(h, chain_last, chain_prev)]
            start = min(byid[i][5] for i in images)
            end = max(byid[i][6] for i in images)
            last = byid[chain_last[rt]]
            if name and attempts:
                a = attempts[-1]
                if not (start > a["end"] and a["exit"] not in (0, None)):
                    a["images"] += images
                    a["end"] = max(a["end"], end)
                    continue
            attempts.append({"root": rt, "images": images, "start": start, "end": end, "exit": last[8],
                             "signal": last[9]})
        for k, a in enumerate(attempts, 1):
            root = byid[a["root"]]
            stage = root[11] or next((byid[i][11] for i in a["images"] if byid[i][11]), None)
            self._task(name, k, root[0], root[1], root[2], root[5], db_text(stage), root[12], a["start"], a["end"],
                       a["exit"], a["signal"], len(a["images"]))
            self.assign.extend((self.next_tid - 1, chain_prev.get(i), i) for i in a["images"])

    def flush(self) -> None:
        if self.task_rows:
            self.conn.executemany(_INSERT_TASKS, self.task_rows)
        if self.assign:
            self.conn.executemany("INSERT INTO temp.ingest_assign (task_id, prev, id) VALUES (?,?,?)", self.assign)
        self.task_rows, self.assign = [], []


# shlex.quote's safe characters, and the NUL that joins the args here (an arg holding a NUL is caught by the count)
_UNSAFE = re.compile(r"[^\w@%+=:,./\0-]", re.ASCII).search


def _command(args: list) -> str:
    """The args shell-quoted, as " ".join(shlex.quote(a) for a in args); most commands need no quote, which one
    search over all the args tells."""
    joined = "\0".join(args)
    if all(args) and _UNSAFE(joined) is None and joined.count("\0") == len(args) - 1:
        return joined.replace("\0", " ")
    return " ".join(shlex.quote(a) for a in args)


_SCAN = json.decoder.JSONDecoder().scan_once


def _json_list(text: str):
    """json.loads(text), without its Python-level wrappers for the JSON text of a list that json.dumps wrote."""
    try:
        obj, end = _SCAN(text, 0)
    except StopIteration:
        obj, end = None, -1
    return obj if end == len(text) and isinstance(obj, list) else json.loads(text)


def _chain(head, chain_last, chain_prev):
    out, i = [], chain_last[head]
    while i is not None:
        out.append(i)
        i = chain_prev.get(i)
    return out


# ---- per-task I/O -----------------------------------------------------------------------------------------------

_TASK_IO_COLS = ("bytes_read", "bytes_written", "files_read", "files_written", "bytes_read_local",
                 "bytes_read_remote", "files_read_local", "files_read_remote", "bytes_read_unknown",
                 "bytes_written_local", "t_io_ns")
# per task x file (a Gfarm file by its Gfarm path: one file whichever mount read it): its summed counters
_TASK_FILES = (
    "SELECT p.task_id AS tid, COALESCE(f.gfarm_path, f.path) AS k, max(f.replica_hosts) AS reps, "
    "max(f.resolved_at) AS res, SUM(fa.bytes_read) AS br, SUM(fa.bytes_written) AS bw, SUM(fa.reads) AS nr, "
    "SUM(fa.writes) AS nw, SUM(fa.t_open_ns + fa.t_read_ns + fa.t_write_ns + fa.t_close_ns + fa.t_meta_ns) AS tio "
    "FROM file_access fa JOIN processes p ON p.id = fa.process_id JOIN files f ON f.id = fa.file_id "
    "WHERE p.run_id = ? AND p.task_id IS NOT NULL GROUP BY p.task_id, k")
# ... summed per task in SQL; a file is local when a replica is on the task's host (mtcio_local, in Python)
_TASK_IO = f"""
WITH k AS ({_TASK_FILES}),
l AS (SELECT k.*, (br > 0 OR nr > 0) AS rd, CASE WHEN reps IS NULL OR res IS NULL THEN NULL
                                                 ELSE mtcio_local(t.host_id, reps) END AS loc
      FROM k JOIN tasks t ON t.id = k.tid)
UPDATE tasks SET ({', '.join(_TASK_IO_COLS)}) =
    (a.br, a.bw, a.fr, a.fw, a.brl, a.brr, a.frl, a.frr, a.bru, a.bwl, a.tio)
FROM (SELECT tid, sum(br) AS br, sum(bw) AS bw, sum(rd) AS fr, sum(bw > 0 OR nw > 0) AS fw,
             sum(CASE WHEN loc = 1 AND rd THEN br ELSE 0 END) AS brl,
             sum(CASE WHEN loc = 0 AND rd THEN br ELSE 0 END) AS brr,
             sum(loc = 1 AND rd) AS frl, sum(loc = 0 AND rd) AS frr,
             sum(CASE WHEN loc IS NULL THEN br ELSE 0 END) AS bru,
             sum(CASE WHEN loc = 1 THEN bw ELSE 0 END) AS bwl, sum(tio) AS tio
      FROM l GROUP BY tid) AS a
WHERE tasks.id = a.tid"""


# The same sums for the tasks of one image (most tasks), streamed: file_access in its key's order, one group per
# process, no sort of the run's rows.  A row per file record is a row per (task, file) when the image's records name
# distinct files (n = nk); an image naming one file twice (two mounts of one Gfarm file) takes the general query.
_ONE_IMAGE_IO = f"""
INSERT INTO temp.ingest_task_io (tid, n, nk, {', '.join(_TASK_IO_COLS)})
SELECT tid, count(*), count(DISTINCT k), sum(br), sum(bw), sum(rd), sum(bw > 0 OR nw > 0),
       sum(CASE WHEN loc = 1 AND rd THEN br ELSE 0 END), sum(CASE WHEN loc = 0 AND rd THEN br ELSE 0 END),
       sum(loc = 1 AND rd), sum(loc = 0 AND rd), sum(CASE WHEN loc IS NULL THEN br ELSE 0 END),
       sum(CASE WHEN loc = 1 THEN bw ELSE 0 END), sum(tio)
FROM (SELECT fa.process_id AS pid, p.task_id AS tid, COALESCE(f.gfarm_path, f.path) AS k, fa.bytes_read AS br,
             fa.bytes_written AS bw, fa.writes AS nw, (fa.bytes_read > 0 OR fa.reads > 0) AS rd,
             CASE WHEN f.replica_hosts IS NULL OR f.resolved_at IS NULL THEN NULL
                  ELSE mtcio_local(p.host_id, f.replica_hosts) END AS loc,
             fa.t_open_ns + fa.t_read_ns + fa.t_write_ns + fa.t_close_ns + fa.t_meta_ns AS tio
      FROM file_access fa CROSS JOIN processes p ON p.id = fa.process_id CROSS JOIN files f ON f.id = fa.file_id
      WHERE fa.process_id BETWEEN ? AND ? AND p.run_id = ? AND p.task_id IS NOT NULL
            AND p.task_id NOT IN (SELECT id FROM temp.ingest_general))
GROUP BY pid"""
# the general query for the other tasks (several images, or a file named twice), into the same table
_GENERAL_IO = _TASK_IO.split("UPDATE tasks SET")[0].replace(
    "WHERE p.run_id = ? AND p.task_id IS NOT NULL",
    "WHERE p.task_id IN (SELECT id FROM temp.ingest_general) AND p.run_id = ?") + f"""
INSERT INTO temp.ingest_task_io (tid, n, nk, {', '.join(_TASK_IO_COLS)})
SELECT tid, 1, 1, sum(br), sum(bw), sum(rd), sum(bw > 0 OR nw > 0),
       sum(CASE WHEN loc = 1 AND rd THEN br ELSE 0 END), sum(CASE WHEN loc = 0 AND rd THEN br ELSE 0 END),
       sum(loc = 1 AND rd), sum(loc = 0 AND rd), sum(CASE WHEN loc IS NULL THEN br ELSE 0 END),
       sum(CASE WHEN loc = 1 THEN bw ELSE 0 END), sum(tio)
FROM l GROUP BY tid"""
_UPDATE_IO = f"""
UPDATE tasks SET ({', '.join(_TASK_IO_COLS)}) = ({', '.join('a.' + c for c in _TASK_IO_COLS)})
FROM temp.ingest_task_io a WHERE tasks.id = a.tid"""


def fill_task_io(conn, run_id: int) -> None:
    """Per-task byte/file counts, read locality (all reads) and write placement from file_access + files, in SQL:
    the tasks of one image streamed (_ONE_IMAGE_IO), the others grouped by (task, file) (_GENERAL_IO), then one
    UPDATE in task order.  Tasks without file records keep the zeros build_tasks gave them.  A damaged log's
    near-2^63 counters overflow SQLite's sums: that run's totals are then made in Python (_fill_task_io_big)."""
    hosts = {r[0]: text_of(r[1]) for r in conn.execute("SELECT id, name FROM hosts")}
    replicas: dict = {}

    def local(host_id, reps):
        r = replicas.get(reps)
        if r is None:
            r = replicas[reps] = frozenset(json.loads(reps))
        return int(host_match(hosts.get(host_id) or "", r))
    conn.create_function("mtcio_local", 2, local, deterministic=True)
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS ingest_general (id INTEGER PRIMARY KEY)")
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS ingest_task_io (tid INTEGER PRIMARY KEY, n INTEGER, nk INTEGER, "
                 + ", ".join(f"{c} INTEGER" for c in _TASK_IO_COLS) + ")")
    try:
        lo, hi = conn.execute("SELECT min(id), max(id) FROM processes WHERE run_id = ?", (run_id,)).fetchone()
        if lo is None:
            return
        # NULL n_processes (a task table not built here) counts as several images
        conn.execute("INSERT INTO temp.ingest_general SELECT id FROM tasks WHERE run_id = ? AND n_processes IS NOT 1",
                     (run_id,))
        conn.execute(_ONE_IMAGE_IO, (lo, hi, run_id))
        conn.execute("INSERT OR IGNORE INTO temp.ingest_general SELECT tid FROM temp.ingest_task_io WHERE n != nk")
        conn.execute("DELETE FROM temp.ingest_task_io WHERE n != nk")
        if conn.execute("SELECT 1 FROM temp.ingest_general LIMIT 1").fetchone():
            conn.execute(_GENERAL_IO, (run_id,))
        conn.execute(_UPDATE_IO)
    except sqlite3.OperationalError as e:
        if "integer overflow" not in str(e):
            raise
        _fill_task_io_big(conn, run_id, hosts)
    finally:
        conn.execute("DELETE FROM temp.ingest_general")
        conn.execute("DELETE FROM temp.ingest_task_io")


def _fill_task_io_big(conn, run_id: int, hosts: dict) -> None:
    """fill_task_io for counters whose sums leave SQLite's INTEGER, one task at a time: sums of a task's files in
    Python (a total over 2^63 is stored as the REAL it is close to); when a per-file sum overflows, every per-file
    sum of the run is taken as REAL (approximate) instead."""
    try:
        _task_io_in_python(conn, run_id, hosts, "sum")
    except sqlite3.OperationalError as e:
        if "integer overflow" not in str(e):
            raise
        _task_io_in_python(conn, run_id, hosts, "total")    # rewrites every task of the run


def _task_io_in_python(conn, run_id: int, hosts: dict, sum_fn: str) -> None:
    task_host = {r[0]: hosts.get(r[1]) for r in conn.execute("SELECT id, host_id FROM tasks WHERE run_id = ?",
                                                              (run_id,))}
    cur = conn.cursor()
    cur.row_factory = None
    rows = cur.execute(_TASK_FILES.replace("SUM", sum_fn) + " ORDER BY p.task_id", (run_id,))
    fit = lambda v: v if v <= I64_MAX else float(v)      # noqa: E731
    upd = f"UPDATE tasks SET {', '.join(c + ' = ?' for c in _TASK_IO_COLS)} WHERE id = ?"
    rep_cache, out, cur_tid, a = {}, [], None, None
    for tid, _k, reps, resolved, br, bw, nr, nw, tio in rows:
        if tid != cur_tid:
            if a is not None:
                out.append((*map(fit, a), cur_tid))
            cur_tid, a = tid, [0] * 11
        a[0] += br
        a[1] += bw
        a[2] += 1 if (br > 0 or nr > 0) else 0
        a[3] += 1 if (bw > 0 or nw > 0) else 0
        a[10] += tio
        if reps is None or resolved is None:
            a[8] += br
            continue
        r = rep_cache.get(reps)
        if r is None:
            r = rep_cache[reps] = frozenset(json.loads(reps))
        local = host_match(task_host.get(tid) or "", r)
        if br > 0 or nr > 0:
            if local:
                a[4] += br
                a[6] += 1
            else:
                a[5] += br
                a[7] += 1
        if local:
            a[9] += bw
    if a is not None:
        out.append((*map(fit, a), cur_tid))
    conn.executemany(upd, out)      # after the query: an overflow midway leaves no task half done
