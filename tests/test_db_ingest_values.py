"""Ingest of logs whose records are well framed but carry values no shim writes (an empty clock string, a FILE
record with too few counters or too many bins): one warning naming the log, the rest of the run ingested."""
import os
import sqlite3
import struct
import subprocess
import sys

from mtcio.db import ingest as ing
from mtcio.db import logformat as lf
from mtcio.preload.testing import log_paths, run

MTCPROF = [sys.executable, "-c", "import sys; from mtcio.cli import mtcprof; sys.exit(mtcprof())"]


def three_logs(tmp_path):
    """Three real logs of run R (three tasks), in tmp_path/logs."""
    d, logs = tmp_path / "d", tmp_path / "logs"
    d.mkdir(), logs.mkdir()
    (d / "in").write_bytes(b"x" * 5000)
    for t in ("t1", "t2", "t3"):
        r = run(["cat", str(d / "in")], str(logs), env_extra={"MTCPROF_TASK": t, "MTCPROF_STAGE": "S",
                                                               "MTCPROF_RUN": "R"})
        assert r.returncode == 0, r.stderr
    paths = log_paths(str(logs))
    assert len(paths) == 3
    return logs, paths


def string_record(buf: bytes, key: int) -> int:
    """Payload offset of the log's STR record with this key."""
    for rtype, p, _length, bo in lf.iter_records(buf):
        if rtype == lf.R_STR and struct.unpack_from(bo + "I", buf, p)[0] == key:
            return p
    raise AssertionError(f"no string {key}")


def with_empty_string(buf: bytes, name: str) -> bytes:
    """The log with one of its strings emptied (length 0; the record keeps its size, the rest is padding)."""
    key = {v: k for k, v in lf.STR_KEYS.items()}[name]
    p = string_record(buf, key)
    return buf[:p + 4] + struct.pack("<I", 0) + buf[p + 8:]


def ingest_cli(logs, db):
    return subprocess.run(MTCPROF + ["ingest", str(logs), "--db", str(db), "--gfwhere-cmd", "none",
                                     "--no-progress"], capture_output=True, text=True)


def test_an_empty_cpu_clock_string_loses_only_the_clock(tmp_path):
    """The string is framed correctly, so the log is whole: its process is stored, complete, without a clock; the
    other logs beside it are ingested as usual and nothing is called unexpected."""
    logs, paths = three_logs(tmp_path)
    victim = paths[1]
    buf = open(victim, "rb").read()
    assert ing.rows_from_bytes(buf, victim)[0].proc["cpu_clock"]          # the shim writes one
    for name in ("cpu_clock", "sched"):
        buf = with_empty_string(buf, name)
    open(victim, "wb").write(buf)
    rows, err = ing.rows_from_bytes(buf, victim)
    assert err is None and rows.proc["cpu_clock"] == "" and rows.proc["sched"] == ""
    db = tmp_path / "x.db"
    r = ingest_cli(logs, db)
    assert r.returncode == 0, r.stderr
    assert "unexpected" not in r.stderr and "Traceback" not in r.stderr
    assert "run R: 3 logs added (0 already present), 3 tasks" in r.stderr, r.stderr
    c = sqlite3.connect(db)
    got = dict(c.execute("SELECT log_path, cpus FROM processes").fetchall())
    assert set(got) == set(paths)
    assert got[victim] is None and all(got[p] >= 1 for p in paths if p != victim)
    assert c.execute("SELECT log_complete, sched_cpu_s FROM processes WHERE log_path = ?",
                     (victim,)).fetchone() == (1, None)


def test_clock_strings_of_any_shape_give_no_clock():
    for text in ("", " ", "\t\n", "4", "4 1 2 3", "4 1 2 3 4 5", "x 1 2 3 4", "4 1 2 nan 4", None, "0 1 2 3 4"):
        assert ing.cpu_clock(text) == (None,) * 5, text
        assert ing.sched(text) == (None,) * 3, text
        assert ing.call_wait(text) == (None, None), text
    assert ing.cpu_clock("4 10 20 12 26") == (4, 10.0, 20.0, 12.0, 26.0)
