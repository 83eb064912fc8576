"""mtcprof ingest on logs written by the real shim: exact rows and counters, tasks, idempotence, bad logs."""
import os
import sqlite3
import subprocess
import sys

import numpy as np
import pytest

from mtcio.db import gfarm
from mtcio.db import ingest as ing
from mtcio.db import ingest_logs
from mtcio.db import ingest_replicas
from mtcio.db import ingest_writer
from mtcio.db import logformat as lf
from mtcio.db import store
from mtcio.db.api import Store
from mtcio.preload.testing import log_paths, prog, read_log

from helpers.tracing import make_run, quiet, traced

MTCPROF = [sys.executable, "-c", "import sys; from mtcio.cli import mtcprof; sys.exit(mtcprof())"]


def test_exact_counters_scripted(tmp_path):
    """Every counter and bin of every file record lands in file_access unchanged."""
    d, logs = tmp_path / "data", tmp_path / "logs"
    d.mkdir(), logs.mkdir()
    r = traced(logs, [prog("scripted"), str(d)], "only", "S")
    assert r.returncode == 0, r.stderr
    (log,) = [read_log(p) for p in log_paths(str(logs))]
    db = tmp_path / "x.db"
    res = ing.ingest(str(db), str(logs), gfwhere_cmd=None, warn=quiet)
    assert res.runs == {"logs": {"logs_added": 1, "logs_skipped": 0, "file_access": len(log.files), "ops": 0,
                                 "tasks": 1}}
    s = Store(db)
    fa = s.file_access("logs")
    assert len(fa) == len(log.files)
    byid = {f["id"]: f for f in log.files}
    for _, row in fa.iterrows():
        f = byid[row["fid"]]
        assert row["path"] == f["path"]
        for c in lf.COUNTERS:
            assert row[c] == f[c], (f["path"], c)
        assert [row[f"hr{i}"] for i in range(10)] == f["hist_read"]
        assert [row[f"hw{i}"] for i in range(10)] == f["hist_write"]
        assert row["flags"] == sum(b for b, n in lf.FILE_FLAGS.items() if n in f["flags"])
        assert row["task"] == "only" and row["stage"] == "S"
    a = fa[fa["path"] == str(d / "A")].iloc[0]         # values from tests/test_preload_counts.py
    assert (a["opens"], a["bytes_read"], a["bytes_written"], a["read_discont"], a["max_offset"]) == (2, 254, 380, 4,
                                                                                                   1050)
    p = s.processes("logs").iloc[0]
    for k in ("pid", "ppid", "start_ns", "end_ns", "exit_status", "ended_by", "origin", "exe", "argv"):
        assert p[k] == log.process[k], k
    assert p["log_complete"] == 1 and p["task"] == "only"
    t = s.tasks("logs").iloc[0]
    assert (t["name"], t["stage"], t["n_processes"], t["exit_status"]) == ("only", "S", 1, 0)
    assert t["start_ns"] == log.process["start_ns"] and t["end_ns"] == log.process["end_ns"]
    assert t["bytes_read"] == sum(f["bytes_read"] for f in log.files)
    assert t["bytes_written"] == sum(f["bytes_written"] for f in log.files)


def test_tasks_chains_and_classes(tmp_path):
    d, logs = make_run(tmp_path)
    db = tmp_path / "x.db"
    ing.ingest(str(db), str(logs), gfwhere_cmd=None, warn=quiet)
    s = Store(db)
    assert s.runs()["name"].tolist() == ["R"]           # MTCPROF_RUN names the run
    t = s.tasks("R").set_index("name")
    assert t.loc["t1", "command"].startswith("sh -c ") and t.loc["t1", "stage"] == "S1"
    # t1: sh, cat, fork child of sh (redirect) -> exec wc chain, cat, cat (every log is one image)
    pr = s.processes("R")
    t1 = pr[pr["task_id"] == t.loc["t1", "id"]]
    assert sorted(a[0] for a in t1["argv"]) == ["cat", "cat", "cat", "sh", "sh", "wc"]
    wc = t1[t1["argv"].map(lambda a: a[0] == "wc")].iloc[0]
    prev = pr[pr["id"] == wc["chain_prev_id"]].iloc[0]
    assert prev["pid"] == wc["pid"] and prev["ended_by"] == "exec" and prev["origin"] == "fork"
    root = t1[t1["argv"].map(lambda a: a[0] == "sh") & (t1["origin"] == "exec")].iloc[0]
    assert t.loc["t1", "start_ns"] == t1["start_ns"].min() == root["start_ns"]
    assert t.loc["t1", "end_ns"] == t1["end_ns"].max()
    assert t.loc["t1", "exit_status"] == root["exit_status"] == 0
    # bytes: in (12) twice, in2 (5000) twice; written: out 12, out2 "5000\n" (wc writes 4 of its 5 bytes with an
    # inline putc macro the shim cannot see, preload/FORMAT.md)
    assert (t.loc["t1", "bytes_read"], t.loc["t1", "bytes_written"]) == (10024, 16)
    assert (t.loc["t2", "bytes_read"], t.loc["t2", "bytes_written"]) == (5000, 5000)
    assert (t.loc["t3", "bytes_read"], t.loc["t3", "bytes_written"]) == (5012, 5012)
    assert (t.loc["t1", "files_read"], t.loc["t1", "files_written"]) == (2, 2)
    # classes: in2 read by t1 and t2 (S1) -> N-1; in read by t1 only -> 1-1; out3/out read by t3 only (S2) -> 1-1
    tf = s.task_files("R")
    cls = {(r.stage, os.path.basename(r.key)): r.read_class for r in tf[tf["read"]].itertuples()}
    assert cls == {("S1", "in"): "1-1", ("S1", "in2"): "N-1", ("S2", "out3"): "1-1", ("S2", "out"): "1-1"}
    st = s.stages("R").set_index("stage")
    assert st.loc["S1", "tasks"] == 2 and st.loc["S2", "tasks"] == 1
    assert (st.loc["S1", "read_Nto1_files"], st.loc["S1", "read_Nto1_bytes"], st.loc["S1", "shared_size"]) == \
        (1, 15000, 5000)
    assert (st.loc["S1", "read_1to1_files"], st.loc["S1", "read_1to1_bytes"]) == (1, 24)
    assert st.loc["S1", "reread_factor"] == pytest.approx((24 + 15000) / (12 + 5000 + 5000))
    assert st.loc["S2", "reread_factor"] == pytest.approx(1.0)
    assert (st.loc["S1", "D_min"], st.loc["S1", "D_max"], st.loc["S1", "D_mean"]) == (0, 24, 12)
    assert (st.loc["S2", "out_mean"], st.loc["S2", "files_written"]) == (5012, 1)
    assert st.loc["S1", "creates"] == 3 and st.loc["S2", "creates"] == 1
    ac = s.access_classes("R")
    assert ac[(ac["stage"] == "S1") & (ac["class"] == "N-1")]["tasks"].item() == 2
    h = s.histograms("R", by="stage")
    assert h[(h.stage == "S2") & (h.kind == "write")]["count"].sum() > 0
    assert s.busiest_files("R", 1)["key"].item().endswith("in2")
    assert len(s.timeline("R")) == 3


def test_idempotent_and_incremental(tmp_path):
    d, logs = make_run(tmp_path)
    db = tmp_path / "x.db"
    ing.ingest(str(db), str(logs), gfwhere_cmd=None, warn=quiet)

    def counts():
        c = sqlite3.connect(db)
        out = {t: c.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
               for t in ("runs", "hosts", "tasks", "processes", "files", "file_access", "ops")}
        c.close()
        return out
    before = counts()
    res = ing.ingest(str(db), str(logs), gfwhere_cmd=None, warn=quiet)
    assert res.runs["R"]["logs_added"] == 0 and res.runs["R"]["logs_skipped"] == before["processes"]
    assert counts() == before
    # a new task's logs arrive later: only they are added, tasks rebuilt
    assert traced(logs, ["sh", "-c", f"cat {d}/in > /dev/null"], "t4", "S2", "R").returncode == 0
    res = ing.ingest(str(db), str(logs), gfwhere_cmd=None, warn=quiet)
    assert res.runs["R"]["logs_added"] == 2
    after = counts()
    assert after["tasks"] == before["tasks"] + 1 and after["processes"] == before["processes"] + 2
    assert sorted(Store(db).tasks("R")["name"]) == ["t1", "t2", "t3", "t4"]


def _tables(db):
    c = sqlite3.connect(db)
    out = {t: c.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall()
           for t in ("hosts", "tasks", "processes", "files", "file_access", "ops")}
    c.close()
    return out


def test_small_batches_and_a_small_file_cache_store_the_same(tmp_path, monkeypatch):
    """The writer's other paths: a batch breaking the process key redone log by log (a log repeated, a re-ingest),
    file ids looked up in the db once the cache restarted."""
    d, logs = make_run(tmp_path)
    big, small = tmp_path / "big.db", tmp_path / "small.db"
    ing.ingest(str(big), str(logs), gfwhere_cmd=None, warn=quiet)
    n = len(log_paths(str(logs)))
    copy = logs / "again"
    copy.mkdir()
    first = log_paths(str(logs))[0]
    (copy / os.path.basename(first)).write_bytes(open(first, "rb").read())      # one log given twice
    monkeypatch.setattr(ingest_writer, "BATCH", 2)
    monkeypatch.setattr(ingest_writer, "FILE_CACHE", 1)
    res = ing.ingest(str(small), str(logs), gfwhere_cmd=None, warn=quiet)
    assert (res.runs["R"]["logs_added"], res.runs["R"]["logs_skipped"]) == (n, 1)
    res = ing.ingest(str(small), str(logs), gfwhere_cmd=None, warn=quiet)
    assert (res.runs["R"]["logs_added"], res.runs["R"]["logs_skipped"]) == (0, n + 1)
    a, b = _tables(big), _tables(small)
    for db in (big, small):         # ingest writes with foreign keys off: every row's parents are there all the same
        c = sqlite3.connect(db)
        assert c.execute("PRAGMA foreign_key_check").fetchall() == []
        c.close()
    c = sqlite3.connect(small)
    log_path = [r[1] for r in c.execute("PRAGMA table_info(processes)")].index("log_path")   # whichever copy came first
    c.close()
    assert [r[:log_path] + r[log_path + 1:] for r in a["processes"]] == \
        [r[:log_path] + r[log_path + 1:] for r in b["processes"]]
    assert {t: v for t, v in a.items() if t != "processes"} == {t: v for t, v in b.items() if t != "processes"}


def test_logs_listed_in_path_order_across_folders(tmp_path):
    for p in ("a/x", "a/b/y", "a/z", "a/b0/q", "a-b/r", "c", "a/.hidden", "a/b/.tmp"):
        f = tmp_path / (p + ".mtclog")
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"")
    (tmp_path / "a" / "notes.txt").write_text("x")
    got = list(ingest_logs.find_logs(str(tmp_path)))
    assert [os.path.relpath(p, tmp_path) for p in got] == \
        ["a-b/r.mtclog", "a/b/y.mtclog", "a/b0/q.mtclog", "a/x.mtclog", "a/z.mtclog", "c.mtclog"]
    assert len(ingest_logs.find_logs(str(tmp_path))) == 6 and ingest_logs.find_logs(str(tmp_path))[3] == got[3]


def test_run_name_override_and_several_runs(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    for i, r in enumerate(["A", "B", "A", "B"]):
        assert traced(logs, ["true"], f"t{i}", "S", r).returncode == 0
    db = tmp_path / "x.db"
    res = ing.ingest(str(db), str(logs), gfwhere_cmd=None, warn=quiet)
    assert {k: v["tasks"] for k, v in res.runs.items()} == {"A": 2, "B": 2}
    res = ing.ingest(str(db), str(logs), run="all", gfwhere_cmd=None, warn=quiet)
    assert res.runs["all"]["tasks"] == 4
    assert sorted(Store(db).runs()["name"]) == ["A", "B", "all"]


def test_attempts(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    assert traced(logs, ["sh", "-c", "exit 3"], "t", "S").returncode == 3
    assert traced(logs, ["sh", "-c", "exit 0"], "t", "S").returncode == 0
    assert traced(logs, ["sh", "-c", "exit 0"], "u", "S").returncode == 0
    assert traced(logs, ["sh", "-c", "exit 0"], "u", "S").returncode == 0    # ok twice: one attempt, 2 roots
    db = tmp_path / "x.db"
    ing.ingest(str(db), str(logs), gfwhere_cmd=None, warn=quiet)
    t = Store(db).tasks("logs")
    assert sorted(zip(t["name"], t["attempt"], t["exit_status"])) == [("t", 1, 3), ("t", 2, 0), ("u", 1, 0)]


def test_op_trace_roundtrip(tmp_path):
    d, logs = tmp_path / "data", tmp_path / "logs"
    d.mkdir(), logs.mkdir()
    assert traced(logs, [prog("scripted"), str(d)], "x", "S", MTCPROF_TRACE="ops").returncode == 0
    (log,) = [read_log(p) for p in log_paths(str(logs))]
    assert len(log.ops) > 10
    db = tmp_path / "x.db"
    res = ing.ingest(str(db), str(logs), gfwhere_cmd=None, warn=quiet)
    assert res.runs["logs"]["ops"] == len(log.ops)
    ops = Store(db).ops("logs")
    assert len(ops) == len(log.ops)
    for c, src in (("start_ns", "start_ns"), ("dur_ns", "dur_ns"), ("offset", "offset"), ("length", "length"),
                   ("op_code", "op"), ("fid", "file"), ("err", "err"), ("tid", "tid")):
        assert np.array_equal(ops[c].to_numpy(), log.ops[src]), c
    paths = {f["id"]: f["path"] for f in log.files}
    assert ops["path"].tolist() == [paths.get(f) for f in log.ops["file"]]
    assert ops["op"].tolist() == [lf.OPS[o] for o in log.ops["op"]]


def test_truncated_and_garbage_logs(tmp_path):
    d, logs = make_run(tmp_path)
    paths = log_paths(str(logs))
    victim = max(paths, key=os.path.getsize)
    size = os.path.getsize(victim)
    with open(victim, "r+b") as f:
        f.truncate(size - 20)                         # cuts the END record
    (logs / "junk.mtclog").write_bytes(b"not a log at all" * 10)
    (logs / "empty.mtclog").write_bytes(b"")
    (logs / "README.txt").write_text("ignored")
    db = tmp_path / "x.db"
    r = subprocess.run(MTCPROF + ["ingest", str(logs), "--db", str(db), "--gfwhere-cmd", "none"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert f"{victim}: missing END record" in r.stderr or f"{victim}: truncated" in r.stderr, r.stderr
    assert "byte offset" in r.stderr and "junk.mtclog" in r.stderr and "empty.mtclog" in r.stderr
    assert "3 truncated or corrupt logs" in r.stderr
    s = Store(db)
    pr = s.processes("R")
    assert len(pr) == len(paths)                      # the truncated log's valid part kept, the rest all in
    bad = pr[pr["log_path"] == victim].iloc[0]
    assert bad["log_complete"] == 0 and "byte offset" in bad["log_error"]
    w = s.warnings("R")
    assert len(w) == 3 and set(w["log_path"].map(os.path.basename)) == {os.path.basename(victim), "junk.mtclog",
                                                                          "empty.mtclog"}
    r2 = subprocess.run(MTCPROF + ["ingest", str(logs), "--db", str(db), "--strict", "--gfwhere-cmd", "none"],
                        capture_output=True, text=True)
    assert r2.returncode == 1 and "3 truncated or corrupt" in r2.stderr
    assert len(Store(db).processes("R")) == len(paths)   # nothing lost or doubled


def test_empty_folder_and_missing(tmp_path):
    (tmp_path / "empty").mkdir()
    r = subprocess.run(MTCPROF + ["ingest", str(tmp_path / "empty"), "--db", str(tmp_path / "x.db")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "no mtcprof logs (*.mtclog) found" in r.stderr
    r = subprocess.run(MTCPROF + ["ingest", str(tmp_path / "nope"), "--db", str(tmp_path / "x.db")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "not a folder" in r.stderr


def test_failure_midway_leaves_no_half_run(tmp_path, monkeypatch):
    d, logs = make_run(tmp_path)
    db = tmp_path / "x.db"
    store.connect(db).close()
    n = {"k": 0}
    real = ingest_writer.RunWriter.add

    def boom(self, path, log):
        n["k"] += 1
        if n["k"] == 3:
            raise KeyboardInterrupt
        return real(self, path, log)
    monkeypatch.setattr(ingest_writer.RunWriter, "add", boom)
    monkeypatch.setattr(ingest_writer, "BATCH", 1)             # rows of the first logs were already INSERTed
    with pytest.raises(KeyboardInterrupt):
        ing.ingest(str(db), str(logs), gfwhere_cmd=None, warn=quiet)
    c = sqlite3.connect(db)
    assert [c.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("runs", "processes", "file_access")] == \
        [0, 0, 0]


def test_readonly_db_refused_nothing_lost(tmp_path):
    d, logs = make_run(tmp_path)
    db = tmp_path / "x.db"
    ing.ingest(str(db), str(logs), gfwhere_cmd=None, warn=quiet)
    if os.geteuid() != 0:
        pytest.skip("needs root to switch user")
    for p in (tmp_path, tmp_path.parent, tmp_path.parent.parent):
        os.chmod(p, os.stat(p).st_mode | 0o005)
    os.chmod(db, 0o444)
    for p in logs.iterdir():
        os.chmod(p, 0o444)
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + MTCPROF +
                       ["ingest", str(logs), "--db", str(db), "--run", "other"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr == (
        f"mtcprof ingest: {db}: the database is read-only to you (its file or its folder is not writable by you); "
        f"make it writable, or write to another database\n"), r.stderr      # not an API hint (readonly=True)
    assert Store(db).runs()["name"].tolist() == ["R"]


FAKE_GFWHERE = """#!/bin/sh
# fake gfwhere: replicas from a table file "PATH HOST..." (argv after --)
[ "$1" = "--" ] && shift
n=$#
for p in "$@"; do
  line=$(grep "^$p " "%s" | cut -d' ' -f2-)
  if [ -z "$line" ]; then echo "$p: no such file or directory" >&2; continue; fi
  if [ $n -gt 1 ]; then echo "$p:"; echo "$line"; echo; else echo "$line"; fi
done
"""


def ingest_with_replicas(tmp_path, logs, table_text):
    """ingest LOGS into tmp_path/x.db, gfwhere answered by a fake from TABLE_TEXT's "PATH HOST..." lines; the db."""
    table = tmp_path / "table"
    table.write_text(table_text)
    fake = tmp_path / "gfwhere"
    fake.write_text(FAKE_GFWHERE % table)
    fake.chmod(0o755)
    db = tmp_path / "x.db"
    ing.ingest(str(db), str(logs), gfwhere_cmd=[str(fake)], warn=quiet)
    return db


def test_gfarm_paths_and_locality_with_fake_gfwhere(tmp_path):
    """Mount mapping and locality arithmetic (the real gfwhere on a real Gfarm: tests/test_db_testbed.py)."""
    # a process whose gfarm_mounts says /tmp/.../mnt is a gfarm2fs mount: fake it by editing nothing -- instead use
    # gfarm_path_of directly and a hand-made files table through the real ingest of a log pretending the host
    assert ingest_writer.gfarm_path_of("/mnt/g/a/b", ["/mnt/g"]) == "/a/b"
    assert ingest_writer.gfarm_path_of("/mnt/g", ["/mnt/g"]) == "/"
    assert ingest_writer.gfarm_path_of("/mnt/gx/a", ["/mnt/g"]) is None
    assert ingest_writer.gfarm_path_of("/mnt/g/h/a", ["/mnt/g", "/mnt/g/h"]) == "/a"
    assert ingest_writer.gfarm_path_of("gfarm:///x/y", []) == "/x/y"
    assert ingest_writer.gfarm_path_of("gfarm://meta:601/x/y", []) == "/x/y"
    assert gfarm.parse_gfwhere("/a:\nh1 h2\n\n/b:\nh3\n\n", ["/a", "/b"]) == {"/a": ["h1", "h2"], "/b": ["h3"]}
    assert gfarm.parse_gfwhere("/a:\n\th1\n\n\n/b:\n\th3\n", ["/a", "/b"]) == {"/a": ["h1"], "/b": ["h3"]}
    assert gfarm.parse_gfwhere("h2 h1\n", ["/a"]) == {"/a": ["h1", "h2"]}
    # one parser for the ingest and the envelope harness: hosts once each, a lone path's header line skipped
    assert gfarm.parse_gfwhere("/a:\nh1 h1 h2\n\n/b:\nh3\n", ["/a", "/b"]) == {"/a": ["h1", "h2"], "/b": ["h3"]}
    assert gfarm.parse_gfwhere("/a:\nh2 h1\n", ["/a"]) == {"/a": ["h1", "h2"]}
    assert gfarm.host_match("h1.example.org", ["h1"]) and gfarm.host_match("h1", ["h2", "h1.example.org"])
    assert not gfarm.host_match("h1", ["h11", "h2"])
    table = tmp_path / "table"
    table.write_text("/a h1\n/b h2 h1\n")
    fake = tmp_path / "gfwhere"
    fake.write_text(FAKE_GFWHERE % table)
    fake.chmod(0o755)
    found, errors = ingest_replicas.resolve_replicas(["/a", "/b", "/c"], [str(fake)])
    assert found == {"/a": ["h1"], "/b": ["h1", "h2"]} and set(errors) == {"/c"}
    found, errors = ingest_replicas.resolve_replicas(["/b"], [str(fake)])
    assert found == {"/b": ["h1", "h2"]} and not errors


def test_read_locality_and_write_placement_from_replica_hosts(tmp_path):
    """A folder declared a Gfarm mount (MTCPROF_GFARM_MOUNTS), tasks on two hosts, replicas from the fake gfwhere:
    each task's local / remote read bytes and files and its locally placed written bytes, by full or short host."""
    mnt, logs = tmp_path / "mnt", tmp_path / "logs"
    mnt.mkdir(), logs.mkdir()
    (mnt / "a").write_bytes(b"x" * 100)
    (mnt / "b").write_bytes(b"y" * 30)
    env = {"MTCPROF_GFARM_MOUNTS": str(mnt)}
    sh = lambda c: ["sh", "-c", c]                      # noqa: E731
    assert traced(logs, sh(f"cat {mnt}/a {mnt}/b > /dev/null"), "t1", "S", "R", MTCPROF_HOST="h1.example.org",
                  **env).returncode == 0
    assert traced(logs, sh(f"cat {mnt}/a > /dev/null; printf 12345 > {mnt}/c"), "t2", "S", "R",
                  MTCPROF_HOST="h2", **env).returncode == 0
    db = ingest_with_replicas(tmp_path, logs, "/a h1\n/b h2 h3\n/c h2\n")
    c = sqlite3.connect(db)
    got = {r[0]: r[1:] for r in c.execute(
        "SELECT name, bytes_read_local, bytes_read_remote, files_read_local, files_read_remote, bytes_read_unknown, "
        "bytes_written_local FROM tasks")}
    c.close()
    assert got["t1"][:5] == (100, 30, 1, 1, 0)          # /a on h1 (short name), /b elsewhere
    assert got["t2"][:4] == (0, 100, 0, 1) and got["t2"][5] == 5     # /c written where its replica is
