"""Exact per-file counters and op trace for a scripted C program (tests/preload_progs/scripted.c)."""
import os
import sys

import numpy as np

from mtcio.db.logformat import OP_CODES
from mtcio.preload.testing import logs, nonzero, prog, run


def _run_scripted(tmp_path, **extra):
    d, logdir = tmp_path / "data", tmp_path / "logs"
    d.mkdir(), logdir.mkdir()
    r = run([prog("scripted"), str(d)], str(logdir), env_extra=extra)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stderr == b""
    (log,) = logs(str(logdir))
    assert log.complete and log.error is None
    return str(d), log


EXPECTED = {
    "A": dict(opens=2, creates=1, closes=4, reads=5, writes=5, bytes_read=254, bytes_written=380, seeks=1,
              read_discont=4, write_discont=2, max_offset=1050, fsyncs=1, renames=1, mmaps=1, mmap_bytes=1050, dups=2),
    "B": dict(opens=2, creates=1, closes=2, reads=4, writes=6, bytes_read=112, bytes_written=198, seeks=1,
              read_discont=2, max_offset=198, stats=2, truncates=1),
    "NX": dict(errors=2),
    "D": dict(mkdirs=1, rmdirs=1),
    "A2": dict(unlinks=1),
    "C": dict(opens=2, creates=1, closes=2, reads=1, writes=1, bytes_read=3, bytes_written=7, read_discont=1,
              max_offset=7, stats=1, truncates=1),
    "": dict(opens=1, closes=1),           # the directory opened for openat
    "E": dict(opens=2, creates=1, closes=2, writes=2, bytes_written=7, max_offset=7),
    "sub": dict(mkdirs=1),
    "F": dict(opens=1, creates=1, closes=1, writes=1, bytes_written=3, max_offset=3),
}
HIST = {"A": ([4, 1], [2, 3]), "B": ([3, 1], [6, 0]), "C": ([1, 0], [1, 0]), "E": ([0, 0], [2, 0]), "F": ([0, 0], [1, 0])}


def test_seeks_to_the_end_counted_and_seek_time_in_meta(tmp_path):
    """seeks_end counts the seeks that need the file's size or layout (lseek SEEK_END/SEEK_DATA, fseek SEEK_END):
    on gfarm2fs each is a request to the daemon. A seek's time is in t_meta_ns (neither file is stat'ed or synced,
    so all of it is the seeks'); a failed lseek is an error, not a seek."""
    d, logdir = tmp_path / "data", tmp_path / "logs"
    d.mkdir(), logdir.mkdir()
    r = run([prog("seeks"), str(d)], str(logdir))
    assert r.returncode == 0 and r.stderr == b"", r.stderr.decode()
    (log,) = logs(str(logdir))
    byname = {os.path.relpath(f["path"], d): f for f in log.files}
    assert nonzero(byname["S"]) == dict(opens=1, creates=1, closes=1, writes=1, bytes_written=10, max_offset=10,
                                        seeks=4, seeks_end=2, errors=1)
    assert nonzero(byname["T"]) == dict(opens=1, creates=1, closes=1, writes=1, bytes_written=6, max_offset=6,
                                        seeks=3, seeks_end=1)
    assert byname["S"]["t_meta_ns"] > 0 and byname["T"]["t_meta_ns"] > 0


def test_scripted_exact_counts(tmp_path):
    d, log = _run_scripted(tmp_path)
    byname = {os.path.relpath(f["path"], d) if f["path"] != d else "": f for f in log.files}
    assert set(byname) == set(EXPECTED), sorted(byname)
    for name, exp in EXPECTED.items():
        assert nonzero(byname[name]) == exp, name
    for name, (hr, hw) in HIST.items():
        assert byname[name]["hist_read"] == hr + [0] * 8, name
        assert byname[name]["hist_write"] == hw + [0] * 8, name
    assert set(byname["A"]["flags"]) == {"created", "posix"}
    assert set(byname["B"]["flags"]) == {"created", "stdio"}
    assert "created" not in byname["NX"]["flags"]
    p = log.process
    assert p["munmaps"] == 1 and p["n_files"] == len(EXPECTED)
    assert p["exit_status"] == 0 and p["ended_by"] == "main_return"
    assert p["argv"] == [prog("scripted"), d] and p["exe"] == os.path.realpath(prog("scripted"))
    # timings: opened files have open/close times and timestamps inside the process lifetime
    for name in ("A", "B", "C", "E", "F"):
        f = byname[name]
        assert f["t_open_ns"] > 0 and f["t_close_ns"] > 0
        assert p["start_ns"] <= f["first_open_ns"] <= f["last_close_ns"] <= p["end_ns"]
    assert byname["A"]["t_write_ns"] > 0 and byname["A"]["t_read_ns"] > 0 and byname["B"]["t_meta_ns"] > 0


def test_scripted_op_trace_matches_counters(tmp_path):
    d, log = _run_scripted(tmp_path, MTCPROF_TRACE="ops")
    ops = log.ops
    assert log.process["trace_ops"] and log.process["ops_traced"] == len(ops) and log.process["ops_dropped"] == 0
    byid = log.files_by_id()
    for f in log.files:
        mine = ops[ops["file"] == f["id"]]
        for kind, cnt, nbytes in (("read", "reads", "bytes_read"), ("write", "writes", "bytes_written")):
            sel = mine[(mine["op"] == OP_CODES[kind]) & (mine["err"] == 0)]
            assert len(sel) == f[cnt], (f["path"], kind)
            assert int(sel["length"].sum()) == f[nbytes], (f["path"], kind)
        opens = mine[mine["op"] == OP_CODES["open"]]
        assert (opens["err"] == 0).sum() == f["opens"], f["path"]
        assert (opens["err"] != 0).sum() == (1 if f["path"].endswith("/NX") else 0), f["path"]
    a = next(f for f in log.files if f["path"] == d + "/A")
    reads = ops[(ops["file"] == a["id"]) & (ops["op"] == OP_CODES["read"])]
    assert reads["offset"].tolist() == [0, 0, 1040, 64, 164]
    assert reads["length"].tolist() == [64, 64, 10, 100, 16]
    writes = ops[(ops["file"] == a["id"]) & (ops["op"] == OP_CODES["write"])]
    assert writes["offset"].tolist() == [0, 100, 200, 1000, 300]
    # timestamps are realtime ns inside the process lifetime, ordered per thread
    p = log.process
    assert (ops["start_ns"] >= p["start_ns"]).all() and (ops["start_ns"] + ops["dur_ns"] <= p["end_ns"]).all()
    assert (np.diff(ops["start_ns"].astype(np.int64)) >= 0).all()
    assert set(ops["tid"].tolist()) == {p["pid"]}
    rename = ops[ops["op"] == OP_CODES["rename"]]
    assert len(rename) == 1 and byid[int(rename["offset"][0])]["path"] == d + "/A2"


def test_include_exclude(tmp_path):
    d = tmp_path / "data"
    for extra, expect in (({"MTCPROF_EXCLUDE": f"{d}/B:{d}/C"}, set(EXPECTED) - {"B", "C"}),
                          ({"MTCPROF_INCLUDE": f"{d}/E:{d}/F/"}, {"E", "F"})):
        if d.exists():
            import shutil
            shutil.rmtree(tmp_path)
            tmp_path.mkdir()
        dd, log = _run_scripted(tmp_path, **extra)
        assert {os.path.relpath(f["path"], dd) if f["path"] != dd else "" for f in log.files} == expect
        if "E" in expect:
            e = next(f for f in log.files if f["path"].endswith("/E"))
            assert nonzero(e) == EXPECTED["E"]


def test_attribution_from_environment(tmp_path):
    _, log = _run_scripted(tmp_path, MTCPROF_RUN="r7", MTCPROF_TASK="t42", MTCPROF_STAGE="mProjectPP",
                           MTCPROF_HOST="node9")
    p = log.process
    assert (p["run"], p["task"], p["stage"], p["host"]) == ("r7", "t42", "mProjectPP", "node9")
    name = os.path.basename(log.path)
    assert name == f"node9.{p['pid']}.{p['start_ns']}.mtclog"
    assert oct(os.stat(log.path).st_mode & 0o777) == "0o600"
    assert os.listdir(os.path.dirname(log.path)) == [name]        # no temp file left


def test_sendfile_counts_a_read_and_a_write(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.write_bytes(os.urandom(12345))
    code = ("import os; s = os.open(%r, os.O_RDONLY); d = os.open(%r, os.O_WRONLY | os.O_CREAT, 0o600); "
            "assert os.sendfile(d, s, 100, 20000) == 12245" % (str(src), str(dst)))
    logdir = tmp_path / "logs"
    logdir.mkdir()
    run([sys.executable, "-c", code], logdir=str(logdir))
    (log,) = logs(str(logdir))
    assert log.file_by_path(str(src))["bytes_read"] == 12245
    assert log.file_by_path(str(dst))["bytes_written"] == 12245


def test_narrow_counters_carry(tmp_path):
    """The in-memory record keeps counts in 32 bits (times in clock ticks) and size bins in 8 bits, carrying into a
    second part: 4.5M 1-byte preads wrap the bin ~17,000 times and t_read (> 2^32 ticks ~ 1.65 s at 2.6 GHz) at
    least once — the log still has the exact totals."""
    data, logdir = tmp_path / "data", tmp_path / "logs"
    data.write_bytes(b"z" * 1024)
    logdir.mkdir()
    n = 4_500_000
    r = run([prog("bench_io"), "pread", str(data), str(n)], str(logdir))
    assert r.returncode == 0
    (log,) = logs(str(logdir))
    f = log.file_by_path(str(data))
    assert f["reads"] == f["hist_read"][0] == f["bytes_read"] == n + 1000
    assert f["read_discont"] > 0 and f["max_offset"] == 1024
    per_call = float(r.stdout)                        # ns per call measured by the program itself
    assert f["t_read_ns"] >= 0.8 * per_call * n
    assert f["t_read_ns"] <= log.process["end_ns"] - log.process["start_ns"]


def test_stream_calls_served_by_the_buffer_are_counted_without_time(tmp_path):
    """fwrite/fputc into room in a fully buffered stream and fread/fgetc of bytes already buffered make no system
    call: every one is counted (calls, bytes, size bins) with no time, and the clock is not read.  Timed, the 20,000
    writes would take >= 20,000 x two clock reads (~0.3 ms at the least); only the first is timed here (the bytes
    go to the kernel in fclose).  (The reads' time is the first fread's, which reads the whole file.)"""
    data, logdir = tmp_path / "f", tmp_path / "logs"
    logdir.mkdir()
    n = 10000
    r = run([prog("stdio_buffered"), str(data), str(n)], str(logdir))
    assert r.returncode == 0, r.stderr.decode()
    (log,) = logs(str(logdir))
    f = log.file_by_path(str(data))
    assert (f["writes"], f["bytes_written"], f["reads"], f["bytes_read"]) == (2 * n, 65 * n, 2 * n + 1, 65 * n)
    assert f["hist_write"] == [2 * n] + [0] * 9 and f["hist_read"] == [2 * n + 1] + [0] * 9
    assert f["t_write_ns"] < 100_000
    assert f["t_open_ns"] > 0 and f["t_close_ns"] > 0
    # in the op trace every call is an op; those the buffer served take no time, and the file's counters are the same
    logdir2 = tmp_path / "logs2"
    logdir2.mkdir()
    assert run([prog("stdio_buffered"), str(data), str(n)], str(logdir2),
               env_extra={"MTCPROF_TRACE": "ops"}).returncode == 0
    (log2,) = logs(str(logdir2))
    w = log2.ops[log2.ops["op"] == OP_CODES["write"]]
    assert len(w) == 2 * n and (w["dur_ns"][1:] == 0).all() and (w["start_ns"] > 0).all()
    assert (log2.ops["op"] == OP_CODES["read"]).sum() == 2 * n + 1
    assert log2.file_by_path(str(data))["t_write_ns"] == w["dur_ns"].sum() < 100_000
