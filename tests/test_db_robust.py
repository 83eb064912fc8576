"""Ingest and its outputs under hostile or unusual input, on logs of the real shim: names that are not UTF-8,
damaged logs (--strict), *.mtclog names that are not regular files, private output modes, records the shim
dropped at its limits, and the time of a copy_file_range counted once."""
import argparse
import json
import os
import sqlite3
import stat
import subprocess
import sys

import pytest
import yaml

from mtcio.db import export_chrome, model, report
from mtcio.db import ingest as ing
from mtcio.db import logformat as lf
from mtcio.db.api import Store
from mtcio.db.workflow_model import load
from mtcio.preload.testing import env_for, log_paths, prog, run

MTCPROF = [sys.executable, "-c", "import sys; from mtcio.cli import mtcprof; sys.exit(mtcprof())"]


def quiet(*a, **k):
    pass


def mtcprof(*args, **kw):
    return subprocess.run(MTCPROF + list(args), capture_output=True, **kw)


def mode(p) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


# ---- names that are not UTF-8 ---------------------------------------------------------------------------------------

CWD_NAME = b"d\xffir"
TASK, STAGE, HOST, RUN = b"t\xfe1", b"st\xe9age", b"h\xffost", b"R\xff"
SCRIPT = (b"printf abc > \"$(printf 'f\\377x')\"; mkdir \"$(printf 'sub\\376')\"; "
          b"cat \"$(printf 'f\\377x')\" > \"$(printf 'sub\\376')/g\"; printf 12 > \"$(printf 'a\\nb')\"; "
          b"printf 1234 > \xc3\xa9; cat \xc3\xa9 \"$(printf 'a\\nb')\" > /dev/null")


@pytest.fixture(scope="module")
def bad_names(tmp_path_factory):
    root = tmp_path_factory.mktemp("names")
    logs = root / "logs"
    logs.mkdir()
    cwd = os.fsencode(root) + b"/" + CWD_NAME
    os.mkdir(cwd)
    env = {os.fsencode(k): os.fsencode(v) for k, v in env_for(str(logs)).items()}
    env.update({b"MTCPROF_TASK": TASK, b"MTCPROF_STAGE": STAGE, b"MTCPROF_HOST": HOST, b"MTCPROF_RUN": RUN})
    r = subprocess.run([b"sh", b"-c", SCRIPT], cwd=cwd, env=env, capture_output=True)
    assert r.returncode == 0, r.stderr
    db = root / "x.db"
    got = []
    res = ing.ingest(str(db), str(logs), gfwhere_cmd=None, warn=got.append)
    return root, logs, cwd, db, res, got


def test_non_utf8_names_stored_exactly(bad_names):
    root, logs, cwd, db, res, got = bad_names
    run_name = os.fsdecode(RUN)
    assert got == [] and res.bad_logs == 0 and list(res.runs) == [run_name]
    s = Store(db)
    assert s.runs()["name"].tolist() == [run_name]
    pr = s.processes(run_name)
    assert len(pr) == res.runs[run_name]["logs_added"] >= 4
    assert {os.fsencode(c) for c in pr["cwd"]} == {cwd}
    assert {os.fsencode(x) for x in pr["task"]} == {TASK} and {os.fsencode(x) for x in pr["stage"]} == {STAGE}
    assert {os.fsencode(x) for x in pr["host"]} == {HOST}
    assert all(os.path.exists(p) and os.fsencode(p).startswith(os.fsencode(logs) + b"/" + HOST)
               for p in pr["log_path"])
    t = s.tasks(run_name)
    assert [os.fsencode(x) for x in t["name"]] == [TASK] and [os.fsencode(x) for x in t["stage"]] == [STAGE]
    files = {os.fsencode(p): p for p in s.files(run_name)["path"]}
    want = {cwd + b"/f\xffx": 3, cwd + b"/sub\xfe/g": 3, cwd + b"/a\nb": 2, cwd + "/é".encode(): 4}
    assert set(want) <= set(files)
    fa = s.file_access(run_name)
    for b, n in want.items():
        assert fa.loc[fa["path"] == files[b], "bytes_written"].sum() == n, b
        assert os.path.getsize(b) == n
    assert fa.loc[fa["path"] == files[cwd + b"/f\xffx"], "bytes_read"].sum() == 3
    # in SQLite: plain names stay TEXT, the others are BLOBs of their exact bytes
    c = sqlite3.connect(db)
    typ = dict(c.execute("SELECT CAST(path AS BLOB), typeof(path) FROM files"))

    def utf8(b):
        try:
            return bool(b.decode())
        except UnicodeDecodeError:
            return False
    assert typ[cwd + b"/f\xffx"] == "blob" and any(v == "text" for v in typ.values())
    assert all(v == ("text" if utf8(k) else "blob") for k, v in typ.items())
    assert c.execute("SELECT typeof(name) FROM hosts").fetchall() == [("blob",)]
    # shown readably
    r = Store(db, readable=True)
    assert r.tasks(run_name)["stage"].tolist() == ["st\\xe9age"]
    shown = set(r.files(run_name)["path"])
    assert os.fsdecode(cwd).replace("\udcff", "\\xff") + "/a\\x0ab" in shown


def test_non_utf8_names_in_model_report_export(bad_names):
    root, logs, cwd, db, res, got = bad_names
    y = root / "m.yaml"
    r = mtcprof("model", "--db", str(db), "--run", RUN, "-o", str(y), "--files", "all")
    assert r.returncode == 0, r.stderr
    wf = load(str(y))
    assert [os.fsencode(s.name) for s in wf.stages] == [STAGE] and os.fsencode(wf.run) == RUN
    assert "st\\uDCE9age" in y.read_text()
    rep = root / "rep"
    r = mtcprof("report", "--db", str(db), "--run", RUN, "-o", str(rep))
    assert r.returncode == 0, r.stderr
    page = (rep / "index.html").read_text(encoding="utf-8")
    assert "st\\xe9age" in page and "h\\xffost" in page and "f\\xffx" in page
    out = root / "trace.json"
    r = mtcprof("export", "--db", str(db), "--run", RUN, "-o", str(out))
    assert r.returncode == 0, r.stderr
    tr = json.loads(out.read_text(encoding="utf-8"))
    names = [e["args"]["name"] for e in tr["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"]
    assert names == ["t\\xfe1 [st\\xe9age]"]
    assert tr["otherData"]["run"] == "R\\xff"


# ---- damaged logs ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def good_logs(tmp_path_factory):
    d = tmp_path_factory.mktemp("good")
    data, logs = d / "data", d / "logs"
    data.mkdir(), logs.mkdir()
    assert run([prog("scripted"), str(data)], str(logs), env_extra={"MTCPROF_TASK": "t", "MTCPROF_STAGE": "S",
                                                                    "MTCPROF_RUN": "R"}).returncode == 0
    (data / "in").write_bytes(b"x" * 5000)
    assert run(["sh", "-c", f"cat {data}/in > /dev/null"], str(logs),
               env_extra={"MTCPROF_TASK": "u", "MTCPROF_STAGE": "S", "MTCPROF_RUN": "R"}).returncode == 0
    return {os.path.basename(p): open(p, "rb").read() for p in log_paths(str(logs))}


def _records(buf):
    return [(t, p - 8, n) for t, p, n, _ in lf.iter_records(buf)]


def _folder(tmp_path, logs: dict):
    d = tmp_path / "logs"
    d.mkdir()
    for n, b in logs.items():
        (d / n).write_bytes(b)
    return d


def test_damaged_logs_warn_once_keep_prefix_and_strict_stores_nothing(good_logs, tmp_path):
    name, big = max(good_logs.items(), key=lambda kv: len(kv[1]))
    recs = _records(big)
    f1 = next(i for i, r in enumerate(recs) if r[0] == lf.R_FILE)
    _, off, n = recs[f1]
    dup = big[:off + 8 + n] + big[off:off + 8 + n] + big[off + 8 + n:]          # a FILE record twice
    huge = bytearray(big)
    huge[32 + 8 + 16:32 + 8 + 24] = b"\xff" * 8                                 # PROC end_ns = 2^64 - 1
    nul = bytearray(big)
    d_off = next(r[1] for r in recs if r[0] == lf.R_DIR)
    nul[d_off + 16] = 0                                                         # a NUL in a folder name
    logs = dict(good_logs)
    logs.update({"a-dup.mtclog": dup, "a-huge.mtclog": bytes(huge), "a-nul.mtclog": bytes(nul),
                 "a-short.mtclog": big[:-24] + bytes([2, 0, 0, 0, 0, 0, 0, 0])})   # a zero-length STR at the end
    d = _folder(tmp_path, logs)
    db = tmp_path / "x.db"
    r = mtcprof("ingest", str(d), "--db", str(db), "--gfwhere-cmd", "none", "--strict", text=True)
    assert r.returncode == 1 and "4 truncated or corrupt logs" in r.stderr and "nothing stored" in r.stderr
    assert os.listdir(tmp_path) == ["logs"]                  # no db: nothing was stored in it
    r = mtcprof("ingest", str(d), "--db", str(db), "--gfwhere-cmd", "none", text=True)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    warn = [w for w in r.stderr.splitlines() if "warning:" in w]
    assert len(warn) == 4
    assert f"{d}/a-dup.mtclog: duplicate file id " in r.stderr
    assert f"at byte offset {off + 8 + n}; its valid records before it were kept" in r.stderr
    assert f"{d}/a-huge.mtclog: process record value out of range at byte offset 32; no process record" in r.stderr
    assert f"{d}/a-nul.mtclog: NUL byte in a folder name at byte offset {d_off}" in r.stderr
    assert f"{d}/a-short.mtclog: short string record (0 bytes) at byte offset {len(big) - 24}" in r.stderr
    s = Store(db)
    pr = s.processes("R")
    assert len(pr) == len(good_logs)                  # damaged copies of a logged process are not stored twice
    assert pr["log_complete"].all()                   # the complete log replaced the damaged copy stored first
    assert len(s.warnings("R")) == 4


def test_logs_that_are_not_logs_store_nothing_and_leave_no_db(good_logs, tmp_path):
    """A folder of *.mtclog files none of which is a log: exit 2 (1 with --strict), and no db made; a db that was
    there before is left as it was."""
    d = tmp_path / "bad"
    d.mkdir()
    (d / "a.mtclog").write_bytes(b"hello\n")
    (d / "b.mtclog").write_bytes(b"MTCPROF?" + bytes(range(256)) * 4)
    (d / "c.mtclog").write_bytes(b"")
    db = tmp_path / "x.db"
    for strict, rc, last in (([], 2, f"mtcprof ingest: none of the 3 logs under {d} has a process record: nothing "
                                     f"stored"),
                             (["--strict"], 1, "mtcprof ingest: 3 truncated or corrupt logs (see warnings); "
                                               "--strict: nothing stored")):
        r = mtcprof("ingest", str(d), "--db", str(db), "--gfwhere-cmd", "none", "--no-progress", *strict, text=True)
        lines = r.stderr.splitlines()
        assert (r.returncode, len(lines), lines[-1]) == (rc, 4, last), r.stderr
        assert sum("no process record, skipped" in w for w in lines) == 3
        assert os.listdir(tmp_path) == ["bad"]
    good = _folder(tmp_path, good_logs)
    r = mtcprof("ingest", str(good), "--db", str(db), "--gfwhere-cmd", "none", "--run", "R", text=True)
    assert r.returncode == 0, r.stderr
    before = db.read_bytes()
    r = mtcprof("ingest", str(d), "--db", str(db), "--gfwhere-cmd", "none", text=True)
    assert r.returncode == 2 and db.read_bytes() == before


# ---- what ingest opens --------------------------------------------------------------------------------------------

def test_only_regular_files_are_read(good_logs, tmp_path):
    d = _folder(tmp_path, good_logs)
    secret = tmp_path / "secret"
    secret.write_bytes(b"TOPSECRET-PASSWORD\x00\x01\x02" * 4)
    os.symlink("/dev/zero", d / "zero.mtclog")
    os.symlink(secret, d / "link.mtclog")
    os.mkfifo(d / "fifo.mtclog")
    (d / "garbage.mtclog").write_bytes(secret.read_bytes())
    db = tmp_path / "x.db"
    r = mtcprof("ingest", str(d), "--db", str(db), "--gfwhere-cmd", "none", text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert f"{d}/zero.mtclog: cannot read (not a regular file (symbolic link)); skipped" in r.stderr
    assert f"{d}/link.mtclog: cannot read (not a regular file (symbolic link)); skipped" in r.stderr
    assert f"{d}/fifo.mtclog: cannot read (not a regular file (FIFO)); skipped" in r.stderr
    assert f"{d}/garbage.mtclog: bad magic (not an mtcprof log) at byte offset 0" in r.stderr
    assert "TOPSECRET" not in r.stderr and "\\x00" not in r.stderr
    s = Store(db)
    assert len(s.processes("R")) == len(good_logs)
    msgs = " ".join(s.warnings("R")["message"])
    assert len(s.warnings("R")) == 4 and "TOPSECRET" not in msgs
    with pytest.raises(lf.NotALogFile):
        lf.read_log(d / "zero.mtclog")
    big = tmp_path / "big.mtclog"
    with open(big, "wb") as f:
        f.truncate(1 << 40)                           # sparse 1 TiB: refused unread
    with pytest.raises(lf.NotALogFile, match="larger than"):
        lf.read_bytes(big)


# ---- private outputs ----------------------------------------------------------------------------------------------

def test_outputs_are_private_and_no_tmp_left(good_logs, tmp_path):
    old = os.umask(0o022)
    try:
        d = _folder(tmp_path, good_logs)
        db = tmp_path / "x.db"
        r = mtcprof("ingest", str(d), "--db", str(db), "--gfwhere-cmd", "none")
        assert r.returncode == 0, r.stderr
        assert mode(db) == 0o600
        c = sqlite3.connect(db)                       # the WAL files while the db is open
        c.execute("PRAGMA journal_mode = WAL")
        c.execute("CREATE TABLE IF NOT EXISTS t (x)")
        c.commit()
        assert mode(str(db) + "-wal") == 0o600 and mode(str(db) + "-shm") == 0o600
        c.close()
        y, rep, tr = tmp_path / "m.yaml", tmp_path / "out" / "rep", tmp_path / "t.json"
        assert mtcprof("model", "--db", str(db), "--run", "R", "-o", str(y), "--files", "all").returncode == 0
        assert mtcprof("report", "--db", str(db), "--run", "R", "-o", str(rep)).returncode == 0
        assert mtcprof("export", "--db", str(db), "--run", "R", "-o", str(tr)).returncode == 0
        assert (mode(y), mode(tr), mode(rep)) == (0o600, 0o600, 0o700)
        assert sorted(os.listdir(rep)) == ["histograms.png", "index.html", "timeline.png"]
        assert {mode(rep / f) for f in os.listdir(rep)} == {0o600}
        # an existing folder as -o: a one-line error, and no DIR.tmp (or any temp file) left behind
        target = tmp_path / "dir"
        target.mkdir()
        before = sorted(os.listdir(tmp_path))
        r = mtcprof("model", "--db", str(db), "--run", "R", "-o", str(target), "--files", "all", text=True)
        assert r.returncode == 2 and r.stderr == f"mtcprof model: {target}: is a folder, not a file name\n"
        r = mtcprof("export", "--db", str(db), "--run", "R", "-o", str(target), text=True)
        assert r.returncode == 1 and r.stderr == f"mtcprof export: {target}: is a folder, not a file name\n"
        assert sorted(os.listdir(tmp_path)) == before and os.listdir(target) == []
    finally:
        os.umask(old)


# ---- records the shim dropped -------------------------------------------------------------------------------------

def test_dropped_records_are_said_everywhere(tmp_path, capsys):
    logs = tmp_path / "logs"
    logs.mkdir()
    code = ("import os\nfor i in range(65600):\n    try: os.stat('%s/n%%d' %% i)\n    except OSError: pass\n"
            "open('%s/x', 'w').write('abc')\n") % (tmp_path, tmp_path)
    r = run(["/usr/bin/python3", "-c", code], str(logs),
            env_extra={"MTCPROF_TASK": "big", "MTCPROF_STAGE": "S", "MTCPROF_TRACE": "ops", "MTCPROF_TRACE_MAX": 5})
    assert r.returncode == 0, r.stderr
    (p,) = log_paths(str(logs))
    proc = lf.read_log(p, strict=True).process
    fd, od = proc["files_dropped"], proc["ops_dropped"]
    assert fd > 0 and od > 65000 and proc["ops_traced"] == 5
    db = tmp_path / "x.db"
    got = []
    res = ing.ingest(str(db), str(logs), gfwhere_cmd=None, warn=got.append)
    assert got == [f"1 processes dropped records beyond the shim's limits: {fd:,} files (over 65,536 per process) "
                   f"and {od:,} ops (over MTCPROF_TRACE_MAX): their bytes, counts and times are missing from the "
                   f"run's numbers (e.g. {p})"]
    assert res.runs["logs"]["dropped"] == {"processes": 1, "files": fd, "ops": od}
    s = Store(db)
    assert s.warnings("logs")["message"].tolist() == got
    st = s.stages("logs", "all")
    assert (st["files_dropped"].item(), st["ops_dropped"].item()) == (fd, od)
    assert (s.tasks("logs")["files_dropped"].item(), s.tasks("logs")["ops_dropped"].item()) == (fd, od)
    # model, report and export in this process (65,536 files: each CLI start would redo the same analysis)
    y = tmp_path / "m.yaml"
    rc = model.main(argparse.Namespace(db=str(db), run="logs", output=str(y), envelope_run=None, files="all"))
    assert rc == 0 and "the shim dropped" in capsys.readouterr().err
    assert yaml.safe_load(y.read_text())["stages"][0]["x-dropped"] == {"files": fd, "ops": od}
    load(str(y))
    rs = Store(db, readable=True)
    page = open(report.build_report(rs, "logs", str(tmp_path / "rep"))).read()
    assert f"dropped {fd:,} file records" in page and f"{od:,} ops" in page and f"+ {od:,} dropped" in page
    assert "S †" in page
    other = export_chrome.chrome_trace(rs, "logs")["otherData"]
    assert (other["dropped"]["files"], other["dropped"]["ops"]) == (fd, od)


# ---- copy_file_range: time once -------------------------------------------------------------------------------------

def test_copy_time_counted_once(tmp_path):
    """A single-threaded cp (copy_file_range): bytes both ways, but time in I/O at most the process's run time."""
    src, dst, logs = tmp_path / "src", tmp_path / "dst", tmp_path / "logs"
    logs.mkdir()
    src.write_bytes(os.urandom(1 << 20) * 96)        # 96 MiB: the copy is most of cp's run time
    r = run(["cp", str(src), str(dst)], str(logs), env_extra={"MTCPROF_TASK": "cp", "MTCPROF_TRACE": "ops"})
    assert r.returncode == 0, r.stderr
    db = tmp_path / "x.db"
    ing.ingest(str(db), str(logs), gfwhere_cmd=None, warn=quiet)
    s = Store(db)
    fa = s.file_access("logs").set_index("path")
    rd, wr = fa.loc[str(src)], fa.loc[str(dst)]
    assert rd["bytes_read"] == wr["bytes_written"] == 96 << 20
    t = s.tasks("logs").iloc[0]
    copy_s = (rd["t_read_ns"] + wr["t_write_ns"]) / 1e9
    assert copy_s > 0.3 * t["duration_s"]             # the copy dominates: counted twice it would exceed the run
    assert t["t_io_s"] <= t["duration_s"]
    ops = s.ops("logs")
    cp = ops[(ops["flags"] & 0x20) != 0]
    assert len(cp) >= 2 and set(cp["op"]) == {"read", "write"}
    for (_, a), (_, b) in zip(cp[cp["op"] == "read"].iterrows(), cp[cp["op"] == "write"].iterrows()):
        assert abs(int(a["start_ns"] + a["dur_ns"]) - int(b["start_ns"])) < 1000   # the call's two halves


def test_report_of_names_that_look_like_tex(tmp_path):
    """Stage and host names are text in the figures, not matplotlib math (a stage "$\\foo$" used to fail)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    r = run(["sh", "-c", "cat /etc/hostname > /dev/null"], str(logs),
            env_extra={"MTCPROF_STAGE": "$\\foo$", "MTCPROF_TASK": "t", "MTCPROF_HOST": "$h_1$"})
    assert r.returncode == 0, r.stderr
    db = tmp_path / "x.db"
    ing.ingest(str(db), str(logs), gfwhere_cmd=None, warn=quiet)
    r = mtcprof("report", "--db", str(db), "--run", "logs", "-o", str(tmp_path / "rep"), text=True)
    assert r.returncode == 0, r.stderr
    page = (tmp_path / "rep" / "index.html").read_text()
    assert "$\\foo$" in page and "$h_1$" in page and (tmp_path / "rep" / "timeline.png").stat().st_size > 1000
