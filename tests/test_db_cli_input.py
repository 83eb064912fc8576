"""Bad input to the db commands and `mtcprof run --dir`: exit 2, one line naming what is wrong, nothing written.
(pwrake-import of an empty profile or to a run the db does not have, workflow-model counts below 1, an unknown
--run in report/export, report -o naming a file, model --envelope-run naming a trace run, --dir with a missing
parent.)"""
import os
import shutil
import sqlite3
import subprocess
import sys

import pytest

from mtcio.db import store
from mtcio.db import workflow_model as wm
from mtcio.preload.testing import ensure_built

BIN = os.path.dirname(sys.executable)
MTCPROF = os.path.join(BIN, "mtcprof")
PWLOG = os.path.join(os.path.dirname(__file__), "fixtures", "pwrake", "pwlog")


def sh(*argv, **kw):
    return subprocess.run([MTCPROF, *argv], capture_output=True, text=True, stdin=subprocess.DEVNULL, **kw)


def one_line(r) -> str:
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


def runs(db) -> list:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT name, kind FROM runs ORDER BY id").fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """A db with a traced run R (one task) and an envelope run env1 (no points)."""
    ensure_built()
    tmp = tmp_path_factory.mktemp("dbin")
    logs, db = tmp / "logs", str(tmp / "t.db")
    r = sh("run", "--dir", str(logs), "--run", "R", "--task", "t1", "--stage", "cp", "--",
           "sh", "-c", f"echo hi > {tmp / 'out'}")
    assert r.returncode == 0, r.stderr
    r = sh("ingest", str(logs), "--db", db, "--run", "R", "--no-progress", "--gfwhere-cmd", "none")
    assert r.returncode == 0, r.stderr
    conn = store.connect(db)
    store.add_envelope_points(conn, "env1", [])
    conn.close()
    return db


# ---- pwrake-import -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("content", ["", "task_id,task_name,start_time,end_time,elap_time,preq,exec_host\n"],
                         ids=["empty", "header-only"])
def test_pwrake_import_of_a_profile_without_tasks(tmp_path, content):
    d = tmp_path / "pwlog"
    d.mkdir()
    (d / "task.csv").write_text(content)
    db = tmp_path / "new.db"
    r = sh("pwrake-import", str(d), "--db", str(db), "--run", "r1")
    assert r.returncode == 2
    assert one_line(r) == f"mtcprof pwrake-import: {d}/task.csv: no tasks"
    assert not db.exists()                                      # nothing written: not even an empty db


def test_pwrake_import_refuses_a_run_the_db_does_not_have(tmp_path):
    db = str(tmp_path / "p.db")
    assert sh("pwrake-import", PWLOG, "--db", db, "--run", "pw").returncode == 0    # a new db: the run is made
    r = sh("pwrake-import", PWLOG, "--db", db, "--run", "TYPO")
    assert r.returncode == 2
    assert one_line(r) == f"mtcprof pwrake-import: no run named 'TYPO' in {db} (traced runs: pw)"
    assert runs(db) == [("pw", "trace")]
    conn = store.connect(db)
    store.add_envelope_points(conn, "env1", [])
    conn.close()
    r = sh("pwrake-import", PWLOG, "--db", db, "--run", "env1")
    assert r.returncode == 2
    assert one_line(r) == (f"mtcprof pwrake-import: run 'env1' is of kind 'envelope', not a traced run in {db} "
                           f"(traced runs: pw)")
    con = sqlite3.connect(db)
    assert con.execute("SELECT r.name, COUNT(*) FROM pwrake_tasks p JOIN runs r ON r.id = p.run_id "
                       "GROUP BY r.name").fetchall() == [("pw", 26)]
    con.close()


def test_pwrake_import_into_a_traced_run(traced, tmp_path):
    db = str(tmp_path / "t.db")
    shutil.copy(traced, db)
    r = sh("pwrake-import", PWLOG, "--db", db, "--run", "R")
    assert r.returncode == 0 and "into run R;" in r.stderr, r.stderr
    r = sh("pwrake-import", PWLOG, "--db", db, "--run", "R2")
    assert r.returncode == 2 and "no run named 'R2'" in one_line(r) and "(traced runs: R)" in r.stderr
    assert [n for n, _ in runs(db)] == ["R", "env1"]


# ---- workflow model: counts and the I/O concurrency --------------------------------------------------------------

GOOD = ("mtcio_workflow: 1\n"
        "stages:\n"
        "  - name: a\n"
        "    tasks: 3\n"
        "    hosts: 2\n"
        "    read: {bytes_per_task: {min: 1, mean: 2, max: 3}}\n")


@pytest.mark.parametrize("field,value", [("io_concurrency", "0"), ("io_concurrency", "0.5"),
                                         ("procs_per_host", "0"), ("concurrency", "0")])
def test_workflow_model_refuses_counts_below_one(tmp_path, field, value):
    p = tmp_path / "wf.yaml"
    p.write_text(GOOD + f"    {field}: {value}\n")
    with pytest.raises(wm.ModelError) as e:
        wm.load(str(p))
    assert str(e.value) == f"{p}: line 7: stages[0].{field}: must be >= 1, got {value}"


@pytest.mark.parametrize("value", ["null", "1", "2"])
def test_workflow_model_counts_null_or_at_least_one(tmp_path, value):
    p = tmp_path / "wf.yaml"
    p.write_text(GOOD + "".join(f"    {f}: {value}\n" for f in ("io_concurrency", "procs_per_host", "concurrency")))
    st = wm.load(str(p)).stages[0]
    want = None if value == "null" else int(value)
    assert (st.io_concurrency, st.procs_per_host, st.concurrency) == (want, want, want)
    st = wm.load(_write(tmp_path, GOOD)).stages[0]                  # absent: unknown
    assert (st.io_concurrency, st.procs_per_host, st.concurrency) == (None, None, None)


def _write(tmp_path, text):
    p = tmp_path / "plain.yaml"
    p.write_text(text)
    return str(p)


# ---- report / export / model ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("cmd,out", [("report", "rep"), ("export", "t.json")])
def test_report_and_export_unknown_run_is_bad_input(traced, tmp_path, cmd, out):
    r = sh(cmd, "--db", traced, "--run", "TYPO", "-o", str(tmp_path / out))
    assert r.returncode == 2
    assert one_line(r) == f"mtcprof {cmd}: no run named 'TYPO' in {traced} (runs: R, env1)"
    r = sh(cmd, "--db", traced, "--run", "env1", "-o", str(tmp_path / out))
    assert r.returncode == 2
    assert one_line(r) == f"mtcprof {cmd}: run 'env1' is of kind 'envelope', not a traced run (traced runs: R)"
    assert not (tmp_path / out).exists()


def test_report_output_must_be_a_folder(traced, tmp_path):
    f = tmp_path / "existing"
    f.write_text("keep me")
    r = sh("report", "--db", traced, "--run", "R", "-o", str(f))
    assert r.returncode == 2
    assert one_line(r) == (f"mtcprof report: {f}: exists and is not a folder (-o takes the folder to write "
                           f"index.html and its figures into)")
    assert f.read_text() == "keep me"
    r = sh("report", "--db", traced, "--run", "R", "-o", str(tmp_path / "rep"))
    assert r.returncode == 0 and (tmp_path / "rep" / "index.html").is_file(), r.stderr


def test_model_envelope_run_must_be_an_envelope_run(traced, tmp_path):
    out = tmp_path / "wf.yaml"
    r = sh("model", "--db", traced, "--run", "R", "--files", "all", "-o", str(out), "--envelope-run", "R")
    assert r.returncode == 2
    assert one_line(r) == ("mtcprof model: --envelope-run: run 'R' is of kind 'trace', not an envelope run "
                           "(envelope runs: env1)")
    r = sh("model", "--db", traced, "--run", "R", "--files", "all", "-o", str(out), "--envelope-run", "nope")
    assert r.returncode == 2
    assert one_line(r) == "mtcprof model: --envelope-run: no run named 'nope' (envelope runs: env1)"
    assert not out.exists()
    r = sh("model", "--db", traced, "--run", "R", "--files", "all", "-o", str(out), "--envelope-run", "env1")
    assert r.returncode == 0, r.stderr
    assert wm.load(str(out)).envelope == {"run": "env1"}
