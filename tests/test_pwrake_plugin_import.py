"""`mtcprof pwrake-import`: Pwrake's own profile (task.csv, command.csv written by Pwrake 2.3.1 in Gfarm mode on
the 4-host testbed: 12 fan-out tasks and a gather) into pwrake_tasks, next to a traced run."""
import os
import sqlite3
import subprocess
import sys

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "pwrake", "pwlog")
MTCPROF = os.path.join(os.path.dirname(sys.executable), "mtcprof")


def imp(*args):
    return subprocess.run([MTCPROF, "pwrake-import", *args], capture_output=True, text=True)


def test_import_profile_rows_and_reimport(tmp_path):
    db = str(tmp_path / "p.db")
    r = imp(FIX, "--db", db, "--run", "pw")
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines()[0] == "pwrake-import: 26 Pwrake tasks (13 with actions) into run pw; 0 of them traced"
    r2 = imp(FIX, "--db", db, "--run", "pw")                      # again: replaced, not added
    assert r2.returncode == 0 and r2.stderr == r.stderr
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA user_version").fetchone()[0] == 8
    assert con.execute("SELECT COUNT(*) FROM pwrake_tasks").fetchone()[0] == 26
    row = con.execute("SELECT exec_host, preq_loc, preq_local, preq_remote, n_commands, status, preq "
                      "FROM pwrake_tasks WHERE name = 'all.sum'").fetchone()
    assert row[:6] == ("mtc-node1", "LRRRLRRRLRRR", 3, 9, 1, "0")
    assert row[6] == '["d0.proj", "d1.proj", "d2.proj", "d3.proj", "d4.proj", "d5.proj", "d6.proj", ' \
                     '"d7.proj", "d8.proj", "d9.proj", "d10.proj", "d11.proj"]'
    assert con.execute("SELECT file_size, file_host, has_action FROM pwrake_tasks WHERE name = 'd3.in'").fetchone() \
        == (40000, '["mtc-node4"]', 0)
    assert con.execute("SELECT COUNT(*) FROM pwrake_tasks WHERE has_action = 1 AND preq_loc = 'L' "
                       "AND write_loc = 'L'").fetchone()[0] == 12
    con.close()


def test_import_needs_a_profile(tmp_path):
    r = imp(str(tmp_path), "--db", str(tmp_path / "p.db"), "--run", "pw")
    assert r.returncode == 2
    assert r.stderr == f"mtcprof pwrake-import: no task.csv in {tmp_path} (Pwrake's -L folder)\n"


def test_report_shows_pwrake_locality_beside_the_trace(tmp_path):
    """Three of Pwrake's tasks traced (two on Pwrake's host, one elsewhere): the report's Pwrake section counts them."""
    logs, db, out = tmp_path / "logs", str(tmp_path / "p.db"), tmp_path / "rep"
    for task, host, stage in (("d0.proj", "mtc-node1", "proj"), ("d1.proj", "mtc-node3", "proj"),
                              ("all.sum", "mtc-node1", "sum")):
        r = subprocess.run([MTCPROF, "run", "--dir", str(logs), "--run", "pw", "--task", task, "--stage", stage,
                            "--host", host, "--", "sh", "-c", f"echo {task} > {tmp_path / task}"],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    assert subprocess.run([MTCPROF, "ingest", str(logs), "--db", db, "--run", "pw", "--gfwhere-cmd", "none"],
                          capture_output=True, text=True).returncode == 0
    r = imp(FIX, "--db", db, "--run", "pw")
    assert r.returncode == 0 and "13 with actions) into run pw; 3 of them traced" in r.stderr, r.stderr
    r = subprocess.run([MTCPROF, "report", "--db", db, "--run", "pw", "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    page = (out / "index.html").read_text()
    sec = page.split("Pwrake's declared locality beside the measured one")[1]
    # per stage: tasks, on Pwrake's host, declared local share (mean), measured alpha (no replicas known here)
    assert "<tr><td>proj</td>" + "".join(f'<td class="num">{x}</td>' for x in ("2", "1", "100%", "—")) in sec
    assert "<tr><td>sum</td>" + "".join(f'<td class="num">{x}</td>' for x in ("1", "1", "25%", "—")) in sec
    assert "<tr><td>(not traced)</td>" + '<td class="num">10</td><td class="num">0</td>' in sec
    assert "<tr><td>d1.proj</td><td>mtc-node2</td><td>mtc-node3</td>" in sec
