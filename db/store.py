"""Opening the SQLite store (schema, versions, migrations) and the writers others call.

    conn = connect("mtc.db")                        # creates or upgrades; WAL, foreign keys on
    add_envelope_points(conn, "sweep-1", points)    # envelope harness, once per point is fine
    conn = connect("mtc.db", readonly=True)         # sqlite "mode=ro" URI; writes raise sqlite3.OperationalError

The schema is db/schema.sql (version SCHEMA_VERSION in PRAGMA user_version). An older db is upgraded on open by
MIGRATIONS[k] (version k+1 -> k+2); a newer db, a read-only file opened for writing, or a file that is not a
SQLite db raise StoreError with a message naming the file.
"""
from __future__ import annotations

import json
import math
import os
import sqlite3
import time
from importlib import resources
from typing import Any, Callable, Iterable

from mtcio.db import write_errors
# new dbs and outputs are private (mtcio/private.py); callers use them as store.*
from mtcio.private import PRIVATE_DIR, PRIVATE_FILE, private_dir, write_private  # noqa: F401

SCHEMA_VERSION = 8


class StoreError(RuntimeError):
    """A db that cannot be used as asked (newer schema, read-only file, not a db ...)."""


class DiskError(StoreError):
    """The db could not be written for its disk (full, an I/O error): not a fault of the input, exit 1 not 2."""


# ---- names: paths and labels are bytes ---------------------------------------------------------------------------
# In Python a name is a str decoded with surrogateescape (as os.listdir gives it): the exact bytes come back with
# os.fsencode.  In the db a name that is valid UTF-8 (and has no NUL) is TEXT as usual; any other name is stored as
# a BLOB of its exact bytes (SQLite columns take either), so nothing is lost and ordinary names are unchanged.

def db_text(s):
    """A name for the db: the str itself when it is plain UTF-8 text, else a BLOB (bytes) of its exact bytes."""
    if s is None or (s.isascii() and "\0" not in s):
        return s
    if "\0" not in s:
        try:
            s.encode("utf-8")
            return s
        except UnicodeEncodeError:
            pass
    return s.encode("utf-8", "surrogateescape")


def text_of(v):
    """A name read from the db -> str (surrogateescape for the bytes of a BLOB: os.fsencode gives them back)."""
    return v.decode("utf-8", "surrogateescape") if isinstance(v, (bytes, bytearray)) else v


_UNREADABLE = None


def readable(s):
    """A name as shown to people: undecodable bytes as \\xNN, control characters as \\xNN (\\n, \\t ...); plain
    names unchanged.  For display only: two different names may look alike."""
    global _UNREADABLE
    if isinstance(s, (bytes, bytearray)):
        s = s.decode("utf-8", "surrogateescape")
    if not isinstance(s, str):
        return s
    if _UNREADABLE is None:
        import re
        _UNREADABLE = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")
    if _UNREADABLE.search(s) is None:
        return s
    return _UNREADABLE.sub(lambda m: "\\x%02x" % (ord(m.group()) & 0xFF), s)


def schema_sql() -> str:
    return resources.files("mtcio.db").joinpath("schema.sql").read_text()


# ---- migrations: MIGRATIONS[k] takes a db at version k+1 to k+2 ---------------------------------------------------

def _v1_to_v2(conn: sqlite3.Connection) -> None:
    """Version 1 had runs + envelope_points only; version 2 adds the trace tables and predictions/validations.
    schema.sql is all CREATE ... IF NOT EXISTS, so applying it creates exactly what is missing."""
    conn.executescript(schema_sql())


def _v2_to_v3(conn: sqlite3.Connection) -> None:
    """Version 3 adds pwrake_tasks (Pwrake's own profile of a run); CREATE ... IF NOT EXISTS as above."""
    conn.executescript(schema_sql())


def _add_columns(conn: sqlite3.Connection, table: str, cols) -> None:
    """ALTER TABLE ADD COLUMN for each (name, type) the table lacks (a db migrated from version 1 got the tables
    from this schema.sql already)."""
    have = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
    for col, typ in cols:
        if col not in have:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {col} {typ}")


def _v3_to_v4(conn: sqlite3.Connection) -> None:
    """Version 4 adds file_access.seeks_end (log format 3), 0 for the rows ingested before."""
    _add_columns(conn, "file_access", (("seeks_end", "INTEGER DEFAULT 0"),))


CPU_CLOCK_COLS = (("cpus", "INTEGER"), ("uptime_start_s", "REAL"), ("idle_start_s", "REAL"), ("uptime_end_s", "REAL"),
                  ("idle_end_s", "REAL"))


def _v4_to_v5(conn: sqlite3.Connection) -> None:
    """Version 5 adds the processes' CPU clock (the shim's cpu_clock string), NULL for the rows ingested before."""
    _add_columns(conn, "processes", CPU_CLOCK_COLS)


SCHED_COLS = (("sched_cpu_s", "REAL"), ("sched_wait_s", "REAL"), ("sched_slices", "INTEGER"))


def _v5_to_v6(conn: sqlite3.Connection) -> None:
    """Version 6 adds the processes' scheduler clock (the shim's sched string), NULL for the rows ingested before."""
    _add_columns(conn, "processes", SCHED_COLS)


CALL_WAIT_COLS = (("io_cpu_wait_s", "REAL"), ("io_cpu_wait_calls", "INTEGER"))


def _v6_to_v7(conn: sqlite3.Connection) -> None:
    """Version 7 adds the processes' timed calls' wait for a CPU (the shim's cpu_wait string), NULL before."""
    _add_columns(conn, "processes", CALL_WAIT_COLS)


def _v7_to_v8(conn: sqlite3.Connection) -> None:
    """Version 8 adds capture_gaps (what a Darshan log cannot tell); CREATE ... IF NOT EXISTS as for version 2."""
    conn.executescript(schema_sql())


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_v1_to_v2, _v2_to_v3, _v3_to_v4, _v4_to_v5, _v5_to_v6,
                                                          _v6_to_v7, _v7_to_v8]
assert len(MIGRATIONS) == SCHEMA_VERSION - 1


def _is_readonly_file(path: str) -> bool:
    try:
        fd = os.open(path, os.O_RDWR)
    except PermissionError:
        return True
    except OSError:
        return False
    os.close(fd)
    d = os.path.dirname(os.path.abspath(path))
    return not os.access(d, os.W_OK | os.X_OK)   # WAL needs the -wal/-shm files next to the db


def connect(path: str | os.PathLike, *, readonly: bool = False, timeout: float = 60.0) -> sqlite3.Connection:
    """Open (creating if needed) the store at `path` and bring its schema up to date.

    readonly=True opens with the `mode=ro` URI and never changes the file (no schema creation or migration: an
    older db must be opened read-write once).  Row factory is sqlite3.Row."""
    path = os.fspath(path)
    exists = os.path.exists(path)
    created = False
    if readonly:
        if not exists:
            raise StoreError(f"{path}: no such database")
        uri = "file:" + _uri_quote(os.path.abspath(path)) + "?mode=ro"
        conn = sqlite3.connect(uri, uri=True, timeout=timeout)
        try:
            conn.execute("PRAGMA user_version").fetchone()
        except sqlite3.OperationalError:
            # a WAL db in a folder we cannot write (no -shm can be made): read it as immutable (no locking: a
            # concurrent writer's changes may not be seen by this connection)
            conn.close()
            conn = sqlite3.connect(uri + "&immutable=1", uri=True, timeout=timeout)
        except sqlite3.DatabaseError:
            pass
    else:
        d = os.path.dirname(os.path.abspath(path))
        if not exists and not os.path.isdir(d):
            raise StoreError(f"{path}: folder {d} does not exist")
        if write_errors.read_only_fs(path):
            raise StoreError(write_errors.read_only_fs_words(path))
        if exists and _is_readonly_file(path):
            raise StoreError(write_errors.read_only_words(path))
        created = not exists and _create_private(path)
        conn = sqlite3.connect(path, timeout=timeout)
    conn.row_factory = sqlite3.Row
    try:
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.DatabaseError as e:
            # a full disk or a read-only file says so: only a file SQLite cannot read as a db is "not a db"
            raise _disk_error(path, e) or StoreError(f"{path}: not an mtcio database ({e})") from None
        if version > SCHEMA_VERSION:
            raise StoreError(f"{path}: database schema version {version} is newer than this mtcio supports "
                             f"({SCHEMA_VERSION}); upgrade mtcio")
        if readonly:
            if version == 0:
                raise StoreError(f"{path}: not an mtcio database (empty or schema version 0)")
            if version < SCHEMA_VERSION:
                raise StoreError(f"{path}: database schema version {version} is older than {SCHEMA_VERSION}; "
                                 f"open it once read-write to migrate it")
            return conn
        if version == 0:
            tables = conn.execute("SELECT count(*) FROM sqlite_master WHERE type='table'").fetchone()[0]
            if tables:
                raise StoreError(f"{path}: a SQLite db with {tables} tables but no mtcio schema version; "
                                 f"refusing to touch it")
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            if version < SCHEMA_VERSION:
                _upgrade(conn, version, path)
        except sqlite3.OperationalError as e:
            err = _disk_error(path, e)
            if err is None:
                raise
            raise err from None
        return conn
    except BaseException:
        conn.close()
        if not readonly and created:            # a db this call created and could not set up: not left behind
            for suffix in ("", "-wal", "-shm", "-journal"):
                try:
                    os.unlink(path + suffix)
                except OSError:
                    pass
        raise


def _disk_error(path: str, e: BaseException) -> StoreError | None:
    """The StoreError for a write that failed for its disk (full, read-only), else None."""
    words = write_errors.disk_words(path, e)
    if words is None:
        return None
    return DiskError(words) if write_errors.is_disk_fault(path, e) else StoreError(words)


def _create_private(path: str) -> bool:
    """A new db file is made 0600 before SQLite opens it: SQLite gives its -wal and -shm files the db's mode.
    Returns whether this call created it."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE))
        return True
    except FileExistsError:
        return False        # created meanwhile by another writer: theirs
    except OSError as e:
        raise _disk_error(path, e) or StoreError(f"{path}: cannot create it ({e.strerror})") from None


def _uri_quote(p: str) -> str:
    from urllib.parse import quote
    return quote(p, safe="/")


def _upgrade(conn: sqlite3.Connection, version: int, path: str) -> None:
    conn.commit()
    try:
        conn.execute("BEGIN IMMEDIATE")
        # re-read under the write lock: another process may have migrated meanwhile
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:
            for stmt in _statements(schema_sql()):
                conn.execute(stmt)
        else:
            for k in range(version, SCHEMA_VERSION):
                MIGRATIONS[k - 1](_NoCommit(conn))
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except sqlite3.OperationalError as e:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        err = _disk_error(path, e)
        if err is not None:
            raise err from None
        raise


class _NoCommit:
    """Connection proxy for migrations: executescript would COMMIT the migration's transaction half-way, so it is
    split into statements run one by one inside the caller's transaction."""

    def __init__(self, conn):
        self._c = conn

    def executescript(self, sql):
        for stmt in _statements(sql):
            self._c.execute(stmt)

    def __getattr__(self, name):
        return getattr(self._c, name)


def _statements(sql: str) -> list[str]:
    out, cur = [], ""
    for line in sql.splitlines(keepends=True):
        cur += line
        if sqlite3.complete_statement(cur):
            if cur.strip():
                out.append(cur)
            cur = ""
    if cur.strip() and not all(l.strip().startswith("--") or not l.strip() for l in cur.splitlines()):
        out.append(cur)
    return out


# ---- runs --------------------------------------------------------------------------------------------------------

def get_or_create_run(conn: sqlite3.Connection, name: str, kind: str, meta: dict | None = None) -> int:
    """Id of run `name`, created (with kind and meta) when missing.  A run of the other kind is an error."""
    conn.execute("INSERT INTO runs (name, kind, created, meta) VALUES (?, ?, ?, ?) ON CONFLICT (name) DO NOTHING",
                 (db_text(name), kind, time.time(), json.dumps(meta, sort_keys=True) if meta is not None else None))
    row = conn.execute("SELECT id, kind FROM runs WHERE name = ?", (db_text(name),)).fetchone()
    if row["kind"] != kind:
        raise StoreError(f"run {readable(name)!r} exists as a {row['kind']} run, not a {kind} run")
    return row["id"]


def run_kind(conn: sqlite3.Connection, name: str, kind: str) -> tuple[str | None, list[str]]:
    """(the kind of run `name`, None when the db has no such run; the readable names of the db's `kind` runs)."""
    runs = conn.execute("SELECT name, kind FROM runs ORDER BY id").fetchall()
    return (next((r[1] for r in runs if text_of(r[0]) == name), None), [readable(r[0]) for r in runs if r[1] == kind])


def not_of_kind(name: str, found: str | None, noun: str) -> str:
    """Why run `name` (of kind `found`, None: missing) is not the one asked for, e.g. noun 'an envelope'."""
    return (f"run {readable(name)!r} is of kind {found!r}, not {noun} run" if found
            else f"no run named {readable(name)!r}")


def run_id(conn: sqlite3.Connection, name: str) -> int:
    row = conn.execute("SELECT id FROM runs WHERE name = ?", (db_text(name),)).fetchone()
    if row is None:
        names = [readable(r[0]) for r in conn.execute("SELECT name FROM runs ORDER BY id")]
        raise StoreError(f"no run named {readable(name)!r} (runs: {', '.join(names) or 'none'})")
    return row[0]


# ---- envelope points ---------------------------------------------------------------------------------------------

_POINT_COLS = ("metric", "file_size", "procs_per_host", "hosts", "value", "unit", "repeat", "tool", "tool_version",
               "config", "ok", "error")


def _point_row(p: Any) -> dict:
    row = p.to_row() if hasattr(p, "to_row") else dict(p)
    missing = [c for c in ("metric", "file_size", "procs_per_host", "hosts", "unit", "repeat", "tool", "ok")
               if row.get(c) is None]
    if missing:
        raise ValueError(f"envelope point {row!r} lacks {', '.join(missing)}")
    cfg = row.get("config")
    if cfg is not None and not isinstance(cfg, str):
        row["config"] = json.dumps(cfg, sort_keys=True)
    v = row.get("value")
    if v is not None and not math.isfinite(float(v)):
        row["value"] = None
    row["ok"] = int(bool(row["ok"]))
    return row


def add_envelope_points(conn: sqlite3.Connection, run_name: str, points: Iterable[Any], *,
                        meta: dict | None = None) -> int:
    """Store envelope points (Point objects or Point.to_row() dicts) under envelope run `run_name` (created with
    `meta` when missing).  One transaction; returns the number of rows added."""
    rows = [_point_row(p) for p in points]
    now = time.time()
    with conn:
        rid = get_or_create_run(conn, run_name, "envelope", meta)
        conn.executemany(
            "INSERT INTO envelope_points (run_id, metric, file_size, procs_per_host, hosts, value, unit, repeat, "
            "tool, tool_version, config, ok, error, measured_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [(rid, *(r.get(c) for c in _POINT_COLS), r.get("measured_at", now)) for r in rows])
    return len(rows)


# ---- predictions (mtcpredict) -------------------------------------------------------------------------------------

def add_prediction(conn: sqlite3.Connection, *, stage: str, variant: str, predicted_s: float,
                   run: str | None = None, envelope_run: str | None = None, N: int | None = None,
                   C: int | None = None, D: float | None = None, D_N: float | None = None,
                   alpha: float | None = None, inputs: dict | None = None, terms: dict | None = None,
                   bottleneck: str | None = None) -> int:
    """Store one stage prediction; returns its id."""
    with conn:
        rid = run_id(conn, run) if run is not None else None
        eid = run_id(conn, envelope_run) if envelope_run is not None else None
        cur = conn.execute(
            "INSERT INTO predictions (run_id, stage, envelope_run_id, variant, N, C, D, D_N, alpha, inputs, "
            "predicted_s, terms, bottleneck, created) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (rid, db_text(stage), eid, variant, N, C, D, D_N, alpha, json.dumps(inputs or {}, sort_keys=True),
             predicted_s, json.dumps(terms or {}, sort_keys=True), bottleneck, time.time()))
    return cur.lastrowid


def drop_prediction(conn: sqlite3.Connection, run: str, stage: str, variant: str, envelope: str) -> None:
    """Delete run `run`'s prediction of `stage` by `variant` made with `envelope` (its origin, as inputs holds it):
    a prediction made again replaces the earlier one.  The caller holds the transaction."""
    conn.execute("DELETE FROM predictions WHERE run_id = (SELECT id FROM runs WHERE name = ?) AND stage = ? AND "
                 "variant = ? AND json_extract(inputs, '$.envelope') = json_extract(?, '$')",
                 (db_text(run), db_text(stage), variant, json.dumps(envelope)))


def validated_predictions(conn: sqlite3.Connection, variant: str) -> list[tuple]:
    """(run name, stage, C, inputs JSON, predicted_s, measured_s) of every `variant` prediction with a
    validation, both times positive."""
    return conn.execute(
        "SELECT r.name, p.stage, p.C, p.inputs, p.predicted_s, v.measured_s FROM predictions p "
        "JOIN validations v ON v.prediction_id = p.id JOIN runs r ON r.id = p.run_id "
        "WHERE p.variant = ? AND v.measured_s > 0 AND p.predicted_s > 0", (variant,)).fetchall()


def add_validation(conn: sqlite3.Connection, prediction_id: int, measured_s: float, *,
                   source: str | None = None) -> int:
    with conn:
        row = conn.execute("SELECT predicted_s FROM predictions WHERE id = ?", (prediction_id,)).fetchone()
        if row is None:
            raise StoreError(f"no prediction with id {prediction_id}")
        ratio = row[0] / measured_s if measured_s else None
        cur = conn.execute("INSERT INTO validations (prediction_id, measured_s, ratio, source, created) "
                           "VALUES (?,?,?,?,?)", (prediction_id, measured_s, ratio, source, time.time()))
    return cur.lastrowid
