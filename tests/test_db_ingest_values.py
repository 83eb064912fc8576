"""Ingest of logs whose records are well framed but carry values no shim writes (an empty clock string, a FILE
record with too few counters or too many bins): one warning naming the log, the rest of the run ingested."""
import os
import sqlite3
import struct
import subprocess
import sys

import pytest

from mtcio.db import ingest_read
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
    assert ingest_read.rows_from_bytes(buf, victim)[0].proc["cpu_clock"]          # the shim writes one
    for name in ("cpu_clock", "sched"):
        buf = with_empty_string(buf, name)
    open(victim, "wb").write(buf)
    rows, err = ingest_read.rows_from_bytes(buf, victim)
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
        assert ingest_read.cpu_clock(text) == (None,) * 5, text
        assert ingest_read.sched(text) == (None,) * 3, text
        assert ingest_read.call_wait(text) == (None, None), text
    assert ingest_read.cpu_clock("4 10 20 12 26") == (4, 10.0, 20.0, 12.0, 26.0)


# ---- FILE records with counts no shim writes ------------------------------------------------------------------------

def with_file_record(buf: bytes, n_counters: int, n_bins: int, fid: int = 999999, name: bytes = b"odd",
                     values: dict | None = None) -> tuple[bytes, int]:
    """The (version-3) log with one more FILE record before its END: n_counters and n_bins as given, the counters
    in `values` set as 64-bit values (default: opens = 1), named `name` in the log's first folder.  Returns the
    new log and the record's offset."""
    recs = [(t, p, n) for t, p, n, _ in lf.iter_records(buf)]
    (_, end_p, _), = [r for r in recs if r[0] == lf.R_END]
    did = struct.unpack_from("<I", buf, next(p for t, p, _ in recs if t == lf.R_DIR))[0]
    slots = sorted((lf.COUNTERS.index(k), v) for k, v in (values or {"opens": 1}).items())
    mask = sum(1 << k for k, _ in slots)
    payload = struct.pack("<IHHIBBHQQ", fid, 0x10, len(name), did, n_counters, n_bins, 0, mask, mask) + \
        b"".join(struct.pack("<Q", v) for _, v in slots) + name
    payload += bytes(-len(payload) % 8)
    rec = struct.pack("<HHI", lf.R_FILE, 0, len(payload)) + payload
    at = end_p - 8
    n_before, = struct.unpack_from("<I", buf, end_p)
    end = struct.pack("<HHI", lf.R_END, 0, 16) + struct.pack("<IIQ", n_before + 1, 0, at + len(rec))
    return buf[:at] + rec + end, at


def test_file_records_with_counts_no_shim_writes_are_kept_out_with_a_warning(tmp_path):
    """1 counter, 28 counters (no version has them) and 11 bins: each such record is left out of the log's files
    (its values cannot be put in their slots); the log gives one warning naming it and the first such record's
    offset, its other records are stored, and the process is marked incomplete; the run's other logs are whole."""
    logs, paths = three_logs(tmp_path)
    ok = with_file_record(open(paths[0], "rb").read(), 30, 10)[0]      # the same record with the shim's counts
    rows, err = ingest_read.rows_from_bytes(ok, paths[0])
    assert err is None and rows.complete and rows.files[-1][2].endswith("/odd") and rows.files[-1][3][0] == 1
    ref = {}
    for victim, counts in ((paths[0], [(1, 10)]), (paths[1], [(28, 10), (30, 11)])):
        buf = open(victim, "rb").read()
        ref[victim] = len(ingest_read.rows_from_bytes(buf, victim)[0].files)
        offsets = []
        for k, (nc, nb) in enumerate(counts):
            buf, at = with_file_record(buf, nc, nb, fid=999999 - k)
            offsets.append(at)
        open(victim, "wb").write(buf)
        log = lf.parse(buf, victim)
        assert log.error is None and log.complete and len(log.files) == ref[victim]
        assert [e.offset for e in log.kept_out] == offsets
    db = tmp_path / "x.db"
    r = ingest_cli(logs, db)
    assert r.returncode == 0, r.stderr
    warn = [w for w in r.stderr.splitlines() if "warning:" in w]
    a, b = paths[0], paths[1]
    oa = lf.parse(open(a, "rb").read()).kept_out[0].offset
    ob = lf.parse(open(b, "rb").read()).kept_out[0].offset
    assert warn == [
        f"mtcprof ingest: warning: {a}: file record with 1 counters and 10 bins (a version-3 log has 30 and 10) "
        f"at byte offset {oa}; kept out, the rest of the log kept",
        f"mtcprof ingest: warning: {b}: file record with 28 counters and 10 bins (a version-3 log has 30 and 10) "
        f"at byte offset {ob} (and 1 more like it); kept out, the rest of the log kept"], r.stderr
    assert "mtcprof ingest: 2 truncated or corrupt logs (see warnings)" in r.stderr
    c = sqlite3.connect(db)
    got = {p: (n, complete) for p, n, complete in c.execute(
        "SELECT p.log_path, count(fa.fid), p.log_complete FROM processes p LEFT JOIN file_access fa "
        "ON fa.process_id = p.id GROUP BY p.id")}
    n2 = len(ingest_read.rows_from_bytes(open(paths[2], "rb").read(), paths[2])[0].files)
    assert got == {a: (ref[a], 0), b: (ref[b], 0), paths[2]: (n2, 1)}
    assert c.execute("SELECT count(*) FROM files WHERE path LIKE '%/odd'").fetchone()[0] == 0
    assert c.execute("SELECT count(*) FROM ingest_warnings").fetchone()[0] == 2
    d = subprocess.run(MTCPROF + ["dump", "--no-ops", b], capture_output=True, text=True)
    assert d.returncode == 1
    kept = [ln for ln in d.stdout.splitlines() if '"kept-out"' in ln]
    assert len(kept) == 2 and f'"offset":{ob},' in kept[0] and '"odd"' not in d.stdout


def test_bytes_after_the_end_record_mark_the_process_incomplete(tmp_path):
    """END's length cut from 16 to 8: its last 8 bytes trail it.  The warning says so and the process, whose
    records before it are all kept, is stored as incomplete (not complete beside a warning)."""
    logs, paths = three_logs(tmp_path)
    buf = bytearray(open(paths[0], "rb").read())
    end = len(buf) - 24
    assert struct.unpack_from("<HHI", buf, end) == (lf.R_END, 0, 16)
    struct.pack_into("<I", buf, end + 4, 8)
    open(paths[0], "wb").write(buf)
    r = ingest_cli(logs, tmp_path / "x.db")
    assert r.returncode == 0, r.stderr
    assert (f"warning: {paths[0]}: 8 trailing bytes after END record at byte offset {len(buf) - 8}; its valid "
            f"records before it were kept") in r.stderr, r.stderr
    c = sqlite3.connect(tmp_path / "x.db")
    assert dict(c.execute("SELECT log_path, log_complete FROM processes")) == {paths[0]: 0, paths[1]: 1,
                                                                                paths[2]: 1}


@pytest.mark.parametrize("names", [(b"big1", b"big1", b"big2", b"big2"),   # one path twice: SQLite's sum overflows
                                   (b"big1", b"big2", b"big3", b"big4")])  # four paths: the task's total does
def test_task_totals_past_2_63_are_stored_not_fatal(tmp_path, names):
    """Each counter fits SQLite's INTEGER but a task's total does not (four FILE records of about 2^62 bytes
    read): the run is ingested and the totals stored as the REAL they are close to."""
    logs, paths = three_logs(tmp_path)
    big = (1 << 62) + 1
    buf = open(paths[0], "rb").read()
    for k, name in enumerate(names):
        buf = with_file_record(buf, 30, 10, fid=900000 + k, name=name,
                               values={"opens": 1, "reads": 1, "bytes_read": big})[0]
    open(paths[0], "wb").write(buf)
    assert ingest_read.rows_from_bytes(buf, paths[0])[1] is None
    r = ingest_cli(logs, tmp_path / "x.db")
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    c = sqlite3.connect(tmp_path / "x.db")
    (got, kind), = c.execute("SELECT t.bytes_read, typeof(t.bytes_read) FROM tasks t JOIN processes p "
                             "ON p.task_id = t.id WHERE p.log_path = ?", (paths[0],))
    assert kind == "real" and got == float(4 * big + 5000)
    assert c.execute("SELECT bytes_read, typeof(bytes_read) FROM tasks WHERE name = 't2'").fetchone() == \
        (5000, "integer")


def test_a_large_file_that_is_not_a_log_is_not_read(tmp_path):
    """A 900 MB *.mtclog that is not a log was read whole (1.87 GB RSS) before its magic was looked at: only its
    header's 32 bytes are read now (the process's count of bytes read, /proc/self/io rchar, says so), and
    ingest names it with the same warning as before."""
    logs, paths = three_logs(tmp_path)
    big = logs / "big.mtclog"
    with open(big, "wb") as f:
        f.write(b"#!/bin/sh\n")
        f.truncate(900 << 20)                       # sparse: nothing on the disk
    code = ("import sys\nfrom mtcio.db import logformat as lf\n"
            "def rchar():\n    return int([ln.split()[1] for ln in open('/proc/self/io') if ln.startswith('rchar')][0])\n"
            "r0 = rchar(); b = lf.read_bytes(sys.argv[1]); r1 = rchar()\n"
            "print(len(b), r1 - r0)\n")            # r1 - r0 counts one read of /proc/self/io too (~200 bytes)
    r = subprocess.run([sys.executable, "-c", code, str(big)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    n, read = map(int, r.stdout.split())
    assert n == lf.HEADER_SIZE and read < 4096, r.stdout
    r = ingest_cli(logs, tmp_path / "x.db")
    assert r.returncode == 0, r.stderr
    assert f"warning: {big}: bad magic (not an mtcprof log) at byte offset 0; no process record, skipped" in r.stderr
    assert "run R: 3 logs added" in r.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a folder to another user")
def test_log_folders_another_user_could_fill_are_named(tmp_path):
    """The shim and `mtcprof run` refuse a log folder owned by another user, or writable by others and not
    sticky; ingest read one without a word.  It says so once (naming the first, counting the others) and
    ingests the logs (a testbed's tasks write as its own user, and root ingests them)."""
    logs, paths = three_logs(tmp_path)
    sub = logs / "sub"
    sub.mkdir()
    os.chmod(sub, 0o1777)                            # sticky, like /tmp: the shim accepts it
    assert "warning" not in ingest_cli(logs, tmp_path / "a.db").stderr
    os.chown(logs, 65534, 65534)
    r = ingest_cli(logs, tmp_path / "b.db")
    assert r.returncode == 0, r.stderr
    import pwd
    who = pwd.getpwuid(65534).pw_name
    assert r.stderr.splitlines()[0] == (
        f"mtcprof ingest: warning: {logs}: log folder owned by another user (uid 65534, {who}; you are uid 0, root): "
        f"its logs may not be the run's; ingested as they are")
    assert "run R: 3 logs added" in r.stderr
    os.chown(logs, 0, 0)
    os.chmod(logs, 0o777)
    os.chmod(sub, 0o777)
    r = ingest_cli(logs, tmp_path / "c.db")
    assert r.returncode == 0 and r.stderr.splitlines()[0] == (
        f"mtcprof ingest: warning: {logs}: log folder writable by others (mode 0777) (and 1 more folder under it "
        f"like it): its logs may not be the run's; ingested as they are"), r.stderr
