"""The queries the envelope harness and the predictor make of envelope runs and their points.

The writers (runs, points, predictions) are in store.py; this module holds the envelope-specific reads and the
in-place updates (a point's precision, a run's status), so that no SQL text lives outside db/.
"""
from __future__ import annotations

import json
import sqlite3

POINT_COLS = ("metric", "file_size", "procs_per_host", "hosts", "value", "unit", "repeat", "tool", "config", "ok",
              "error")


def open_readonly(path: str) -> sqlite3.Connection:
    """A read-only connection that never creates the file (sqlite "mode=ro")."""
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def kind_of(conn: sqlite3.Connection, name: str) -> str | None:
    """The kind of run `name` ('trace', 'envelope'), None when the db has none of that name."""
    row = conn.execute("SELECT kind FROM runs WHERE name = ?", (name,)).fetchone()
    return row[0] if row else None


def envelope_runs(conn: sqlite3.Connection) -> list[tuple]:
    """(id, name, meta JSON text) of every envelope run, oldest first."""
    return conn.execute("SELECT id, name, meta FROM runs WHERE kind = 'envelope' ORDER BY id").fetchall()


def points_of(conn: sqlite3.Connection, run_id: int) -> list[dict]:
    """Every point of envelope run `run_id`, as {POINT_COLS...}."""
    rows = conn.execute(f"SELECT {', '.join(POINT_COLS)} FROM envelope_points WHERE run_id = ?", (run_id,))
    return [dict(zip(POINT_COLS, r)) for r in rows]


def ok_values(conn: sqlite3.Connection, run: str, metrics) -> list[tuple]:
    """(metric, file_size, hosts, procs_per_host, value) of run `run`'s good points (ok, value > 0) of `metrics`."""
    metrics = list(metrics)
    return conn.execute("SELECT p.metric, p.file_size, p.hosts, p.procs_per_host, p.value FROM envelope_points p "
                        "JOIN runs r ON r.id = p.run_id WHERE r.name = ? AND p.ok = 1 AND p.value > 0 AND "
                        f"p.metric IN ({', '.join('?' * len(metrics))})", (run, *metrics)).fetchall()


def next_repeat(conn: sqlite3.Connection, name: str) -> int:
    """The repeat number a run appended to starts at: one past its highest, 0 for a run with no point."""
    mx = conn.execute("SELECT MAX(repeat) FROM envelope_points p JOIN runs r ON r.id = p.run_id WHERE r.name = ?",
                      (name,)).fetchone()[0]
    return 0 if mx is None else mx + 1


def source_shas(conn: sqlite3.Connection, run_id: int) -> set:
    """The sha256 of every imported tool output the run's points came from."""
    return {r[0] for r in conn.execute("SELECT DISTINCT json_extract(config, '$.source_sha256') FROM envelope_points "
                                       "WHERE run_id = ?", (run_id,)) if r[0]}


def max_repeats(conn: sqlite3.Connection, run_id: int) -> dict:
    """{(metric, file_size, procs_per_host, hosts, tool): highest repeat} of the run's points."""
    return {tuple(r[:5]): r[5] for r in conn.execute(
        "SELECT metric, file_size, procs_per_host, hosts, tool, MAX(repeat) FROM envelope_points WHERE run_id = ? "
        "GROUP BY 1, 2, 3, 4, 5", (run_id,))}


def holds_point(conn: sqlite3.Connection, run_id: int, row: dict) -> bool:
    """Whether the run holds a point with the same key, repeat, value and config as `row` (a Point.to_row())."""
    return conn.execute(
        "SELECT COUNT(*) FROM envelope_points WHERE run_id = ? AND metric = ? AND file_size = ? AND "
        "procs_per_host = ? AND hosts = ? AND tool = ? AND repeat = ? AND value IS ? AND config = ?",
        (run_id, row["metric"], row["file_size"], row["procs_per_host"], row["hosts"], row["tool"], row["repeat"],
         row["value"], row["config"])).fetchone()[0] > 0


def meta_of(conn: sqlite3.Connection, name: str) -> dict | None:
    """Run `name`'s meta as a dict ({} when it has none), None when there is no such run.  Raises ValueError when
    the stored meta is not JSON."""
    row = conn.execute("SELECT meta FROM runs WHERE name = ?", (name,)).fetchone()
    if row is None:
        return None
    return json.loads(row[0]) if row[0] else {}


def meta_of_id(conn: sqlite3.Connection, run_id: int) -> str | None:
    """Run `run_id`'s meta as stored (JSON text or None)."""
    row = conn.execute("SELECT meta FROM runs WHERE id = ?", (run_id,)).fetchone()
    return row[0] if row else None


def set_meta(conn: sqlite3.Connection, name: str, meta: dict) -> None:
    with conn:
        conn.execute("UPDATE runs SET meta = ? WHERE name = ?", (json.dumps(meta, sort_keys=True), name))


def set_precision(conn: sqlite3.Connection, name: str, metrics, size: int, ppn: int, hosts: int,
                  rep_lo: int, rep_hi: int, precision) -> None:
    """Write a point's precision into the config of each of its repeats rep_lo..rep_hi."""
    metrics = list(metrics)
    with conn:
        conn.execute(
            "UPDATE envelope_points SET config = json_set(config, '$.precision', json(?)) "
            "WHERE run_id = (SELECT id FROM runs WHERE name = ?) AND metric IN (%s) AND "
            "file_size = ? AND procs_per_host = ? AND hosts = ? AND repeat BETWEEN ? AND ?"
            % ",".join("?" * len(metrics)),
            (json.dumps(precision), name, *metrics, size, ppn, hosts, rep_lo, rep_hi))
