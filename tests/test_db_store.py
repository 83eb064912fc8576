"""db/store.py: schema creation, versions and migrations, read-only files, envelope points."""
import json
import math
import os
import sqlite3
import subprocess
import sys

import pytest

from mtcio.db import store
from mtcio.db.api import Store
from mtcio.envelope.points import Point

V1_DDL = """
CREATE TABLE runs (id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, kind TEXT NOT NULL, created REAL, meta TEXT);
CREATE TABLE envelope_points (id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  metric TEXT NOT NULL, file_size INTEGER NOT NULL, procs_per_host INTEGER NOT NULL, hosts INTEGER NOT NULL,
  value REAL, unit TEXT NOT NULL, repeat INTEGER NOT NULL, tool TEXT NOT NULL, tool_version TEXT, config TEXT,
  ok INTEGER NOT NULL, error TEXT, measured_at REAL);
CREATE INDEX envelope_points_lookup ON envelope_points (run_id, metric, file_size, procs_per_host, hosts);
INSERT INTO runs VALUES (1, 'old-sweep', 'envelope', 1.0, '{"x": 1}');
INSERT INTO envelope_points VALUES (1, 1, 'Tm', 0, 1, 2, 123.5, 'ops/s', 0, 'mdtest', '4.0', '{}', 1, NULL, 2.0);
PRAGMA user_version = 1;
"""


def tables(conn):
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def test_create_fresh(tmp_path):
    db = tmp_path / "a.db"
    conn = store.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert {"runs", "envelope_points", "hosts", "tasks", "processes", "files", "file_access", "ops",
            "predictions", "validations"} <= tables(conn)
    conn.close()
    conn = store.connect(db)     # reopen: nothing to do
    assert conn.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION


def test_migrate_from_v1_keeps_points(tmp_path):
    db = tmp_path / "old.db"
    c = sqlite3.connect(db)
    c.executescript(V1_DDL)
    c.close()
    with pytest.raises(store.StoreError, match="older than .*migrate"):
        store.connect(db, readonly=True)
    conn = store.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION
    assert "tasks" in tables(conn) and "file_access" in tables(conn)
    conn.close()
    env = Store(db).envelope()
    assert env[["run", "metric", "value", "tool"]].values.tolist() == [["old-sweep", "Tm", 123.5, "mdtest"]]


def test_migrate_from_v3_adds_seeks_end(tmp_path):
    """A version-3 db (file_access without seeks_end) gains the column, 0 in the rows stored before."""
    db = tmp_path / "v3.db"
    store.connect(db).close()
    c = sqlite3.connect(db)
    c.execute("INSERT INTO file_access (process_id, fid, file_id, flags, seeks) VALUES (1, 0, 1, 0, 5)")
    c.execute("ALTER TABLE file_access DROP COLUMN seeks_end")
    c.execute("PRAGMA user_version = 3")
    c.commit()
    c.close()
    conn = store.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION
    assert [tuple(r) for r in conn.execute("SELECT seeks, seeks_end FROM file_access")] == [(5, 0)]


def _older(tmp_path, version: int, cols, insert: str) -> sqlite3.Connection:
    """A db of this schema taken back to `version` by dropping `cols` from processes (after one row is inserted),
    then opened (migrated) by store.connect."""
    db = tmp_path / f"v{version}.db"
    store.connect(db).close()
    c = sqlite3.connect(db)
    c.execute(insert)
    for col, _ in cols:
        c.execute(f"ALTER TABLE processes DROP COLUMN {col}")
    c.execute(f"PRAGMA user_version = {version}")
    c.commit()
    c.close()
    conn = store.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION == 8
    return conn


def test_migrate_from_v4_adds_the_cpu_clock(tmp_path):
    """A version-4 db (processes without the CPU clock) gains its five columns, NULL in the rows stored before."""
    conn = _older(tmp_path, 4, store.CPU_CLOCK_COLS + store.SCHED_COLS + store.CALL_WAIT_COLS,
                  "INSERT INTO processes (run_id, host_id, pid, start_ns, log_complete) VALUES (1, 1, 42, 7, 1)")
    assert [tuple(r) for r in conn.execute("SELECT pid, cpus, uptime_start_s, idle_start_s, uptime_end_s, idle_end_s, "
                                           "sched_cpu_s, sched_wait_s, sched_slices FROM processes")] == [
        (42, None, None, None, None, None, None, None, None)]


def test_migrate_from_v5_adds_the_scheduler_clock(tmp_path):
    """A version-5 db (processes without the scheduler clock) gains its three columns, NULL in the rows before,
    and keeps the CPU clock stored there."""
    conn = _older(tmp_path, 5, store.SCHED_COLS + store.CALL_WAIT_COLS,
                  "INSERT INTO processes (run_id, host_id, pid, start_ns, log_complete, cpus) VALUES (1, 1, 42, 7, 1, 2)")
    assert [tuple(r) for r in conn.execute("SELECT pid, cpus, sched_cpu_s, sched_wait_s, sched_slices "
                                           "FROM processes")] == [(42, 2, None, None, None)]


def test_migrate_from_v6_adds_the_calls_wait_for_a_cpu(tmp_path):
    """A version-6 db gains io_cpu_wait_s and io_cpu_wait_calls, NULL in the rows before, its scheduler clock kept."""
    conn = _older(tmp_path, 6, store.CALL_WAIT_COLS, "INSERT INTO processes (run_id, host_id, pid, start_ns, "
                  "log_complete, sched_wait_s) VALUES (1, 1, 42, 7, 1, 0.25)")
    assert [tuple(r) for r in conn.execute("SELECT pid, sched_wait_s, io_cpu_wait_s, io_cpu_wait_calls "
                                           "FROM processes")] == [(42, 0.25, None, None)]


def test_newer_db_refused(tmp_path):
    db = tmp_path / "new.db"
    store.connect(db).close()
    c = sqlite3.connect(db)
    c.execute(f"PRAGMA user_version = {store.SCHEMA_VERSION + 3}")
    c.close()
    for ro in (False, True):
        with pytest.raises(store.StoreError, match=r"newer than this mtcio supports"):
            store.connect(db, readonly=ro)


def test_not_a_db(tmp_path):
    p = tmp_path / "junk.db"
    p.write_bytes(b"hello, this is not sqlite" * 100)
    with pytest.raises(store.StoreError, match="not an mtcio database"):
        store.connect(p)
    other = tmp_path / "other.db"
    c = sqlite3.connect(other)
    c.execute("CREATE TABLE t (x)")
    c.commit()
    c.close()
    with pytest.raises(store.StoreError, match="no mtcio schema version"):
        store.connect(other)


def test_readonly_mode_refuses_writes(tmp_path):
    db = tmp_path / "a.db"
    conn = store.connect(db)
    store.add_envelope_points(conn, "s", [Point("Tm", 1024, 1, 1, 10.0, "ops/s", 0, "mdtest")])
    conn.close()
    ro = store.connect(db, readonly=True)
    assert ro.execute("SELECT count(*) FROM envelope_points").fetchone()[0] == 1
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        ro.execute("DELETE FROM envelope_points")
    ro.close()
    assert len(Store(db).envelope()) == 1


def test_readonly_file_clear_error_for_writer(tmp_path):
    """A db file the user cannot write: a clear StoreError when opened for writing, and it is still readable.
    Run as an unprivileged user (root ignores file modes)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to switch to an unprivileged user")
    d = tmp_path / "ro"
    d.mkdir()
    db = d / "a.db"
    conn = store.connect(db)
    store.add_envelope_points(conn, "s", [Point("Tm", 1024, 1, 1, 10.0, "ops/s", 0, "mdtest")])
    conn.close()
    os.chmod(db, 0o444)
    os.chmod(d, 0o755)
    for p in (tmp_path, tmp_path.parent, tmp_path.parent.parent):
        os.chmod(p, os.stat(p).st_mode | 0o005)
    code = ("import sys\nfrom mtcio.db import store\nfrom mtcio.db.api import Store\n"
            "try:\n    store.connect(sys.argv[1])\nexcept store.StoreError as e:\n    print('ERR', e)\n"
            "print('N', len(Store(sys.argv[1]).envelope()))\n")
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", code,
                        str(db)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "ERR" in r.stdout and "read-only" in r.stdout, r.stdout
    assert "N 1" in r.stdout


def test_add_envelope_points(tmp_path):
    conn = store.connect(tmp_path / "a.db")
    pts = [Point("T1L", 1 << 20, 2, 4, 100.0, "ops/s", r, "ior", "3.3", {"b": 1}) for r in range(3)]
    pts.append(Point.failed("B1R", 1 << 20, 2, 4, 0, "ior", "timeout"))
    assert store.add_envelope_points(conn, "sweep", pts, meta={"who": "test"}) == 4
    assert store.add_envelope_points(conn, "sweep", [pts[0].to_row()]) == 1   # dict rows, run reused
    with pytest.raises(store.StoreError, match="envelope run"):
        store.get_or_create_run(conn, "sweep", "trace")
    conn.close()
    s = Store(tmp_path / "a.db")
    runs = s.runs()
    assert runs["name"].tolist() == ["sweep"] and runs["kind"].tolist() == ["envelope"]
    assert runs["meta"][0] == {"who": "test"}
    env = s.envelope("sweep")
    assert len(env) == 5
    assert env["repeat"].tolist() == [0, 1, 2, 0, 0]
    failed = env[~env["ok"]]
    assert len(failed) == 1 and failed["error"].iloc[0] == "timeout" and math.isnan(failed["value"].iloc[0])
    assert json.loads(env["config"].iloc[0]) == {"b": 1}
    assert env["tool_version"].iloc[0] == "3.3"


def test_predictions_and_validations(tmp_path):
    conn = store.connect(tmp_path / "a.db")
    store.add_envelope_points(conn, "env", [Point("Tm", 1024, 1, 1, 10.0, "ops/s", 0, "mdtest")])
    pid = store.add_prediction(conn, stage="mProjectPP", variant="seed", predicted_s=2.64, envelope_run="env",
                               N=955, C=8, D=4.2e6, alpha=0.94, terms={"meta": 1.0}, bottleneck="meta")
    vid = store.add_validation(conn, pid, 2.28)
    r = conn.execute("SELECT ratio FROM validations WHERE id = ?", (vid,)).fetchone()[0]
    assert r == pytest.approx(2.64 / 2.28)
    conn.execute("DELETE FROM runs WHERE name = 'env'")   # cascades: prediction keeps, envelope_run_id NULL
    conn.commit()
    assert conn.execute("SELECT envelope_run_id FROM predictions").fetchone()[0] is None


def test_migrate_from_v7_adds_capture_gaps(tmp_path):
    """A version-7 db (no capture_gaps) gains the table, empty; its processes are kept."""
    db = tmp_path / "v7.db"
    store.connect(db).close()
    c = sqlite3.connect(db)
    c.execute("INSERT INTO processes (run_id, host_id, pid, start_ns, log_complete) VALUES (1, 1, 42, 7, 1)")
    c.execute("DROP TABLE capture_gaps")
    c.execute("PRAGMA user_version = 7")
    c.commit()
    c.close()
    conn = store.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 8
    assert conn.execute("SELECT count(*) FROM capture_gaps").fetchone()[0] == 0
    assert [r[0] for r in conn.execute("SELECT pid FROM processes")] == [42]
