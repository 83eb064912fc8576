"""The Rake tracing plugin (pwrake_plugin/) with Debian's rake on this machine: quoting torture gives the same
files and output with and without the plugin, every task is stored once with its stage (rule name, first
program, or set by the Rakefile), a task with several `sh` calls is one task, a retried task has attempts 1 and
2, a failing task keeps its exit status and the workflow fails as it would without the plugin; disabled or
without a shim the workflow runs untraced with one warning.  Placement through an ssh-like launcher (a local
stand-in that, like ssh, joins its words into one shell line) keeps the quoting and respects slots per host."""
import os
import shutil
import sqlite3
import subprocess
import sys

import pytest

from mtcio import pwrake_plugin
from mtcio.preload.testing import LIB, ensure_built

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "pwrake")
MTCPROF = os.path.join(os.path.dirname(sys.executable), "mtcprof")

pytestmark = pytest.mark.skipif(shutil.which("rake") is None, reason="rake is not installed (Debian package rake)")


def shim():
    """The built shim (built now if missing)."""
    if not os.path.exists(LIB):
        ensure_built()
    return LIB


def run_rake(folder, rakefile, *args, plugin=True, env=None):
    os.makedirs(folder, exist_ok=True)
    shutil.copy(os.path.join(FIX, rakefile), os.path.join(folder, "Rakefile"))
    e = {k: v for k, v in os.environ.items() if not k.startswith("MTCPROF_") and k != "LD_PRELOAD"}
    e.update({"MTCPROF_CMD": MTCPROF, "MTCPROF_LIB": LIB, **(env or {})})
    pre = ["-I", pwrake_plugin.path(), "-r", "mtcio/rake"] if plugin else []
    return subprocess.run(["rake", *pre, *args], cwd=folder, env=e, capture_output=True, text=True, timeout=120)


def tree(folder):
    """{relative path: bytes} of the files a workflow left (the Rakefile and the plugin's own output excluded)."""
    out = {}
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d != "mtcprof-logs"]
        for f in files:
            p = os.path.join(root, f)
            rel = os.path.relpath(p, folder)
            if rel != "Rakefile" and not rel.startswith("mtcprof.db"):
                with open(p, "rb") as fh:
                    out[rel] = fh.read()
    return out


def own_stderr(text):
    """stderr without the lines of the end-of-run ingest."""
    return [line for line in text.splitlines() if not line.startswith(("mtcprof", "run "))]


def tasks(db, run):
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT t.name, t.attempt, t.stage, t.exit_status, t.n_processes FROM tasks t "
                           "JOIN runs r ON r.id = t.run_id WHERE r.name = ? ORDER BY t.name, t.attempt",
                           (run,)).fetchall()
    finally:
        con.close()


def test_quoting_torture_same_files_and_output(tmp_path):
    shim()
    plain = run_rake(tmp_path / "plain", "torture.Rakefile", plugin=False)
    traced = run_rake(tmp_path / "traced", "torture.Rakefile", env={"MTCPROF_RUN": "torture"})
    assert plain.returncode == 0, plain.stderr
    assert traced.returncode == 0, traced.stderr
    assert traced.stdout == plain.stdout
    assert own_stderr(traced.stderr) == own_stderr(plain.stderr)       # the commands echoed as written
    got = tree(tmp_path / "traced")
    assert got == tree(tmp_path / "plain")
    assert sorted(got) == ["back.txt", "dollar.txt", "envv.txt", "g *.dat", "g1.dat", "g2.dat", "glob.txt",
                           "heredoc.txt", "out file 1.txt"]
    assert got["dollar.txt"] == b"$HOME $HOME $x\n3\nit's\n"
    assert got["heredoc.txt"] == b"line '1' \"$x\" `not run`\n$HOME\nexpanded 6 'q'\n"

    db = str(tmp_path / "traced" / "mtcprof.db")
    assert f"mtcprof: run torture stored in {db}" in traced.stderr
    assert f"mtcprof report --db {db} --run torture" in traced.stderr
    assert tasks(db, "torture") == [
        ("argv", 1, "printf", 0, 2), ("backslash", 1, "printf", 0, 1), ("dollars", 1, "echo", 0, 1),
        ("envhash", 1, "sh", 0, 3), ("globs", 1, "touch", 0, 2), ("heredoc", 1, "cat", 0, 4),
        ("lists", 1, "echo", 0, 3), ("spaces", 1, "echo", 0, 1)]
    con = sqlite3.connect(db)
    # the redirection of the top shell is traced: the file written by `echo ... > "out file 1.txt"`
    row = con.execute("SELECT t.name, SUM(a.bytes_written) FROM file_access a JOIN files f ON f.id = a.file_id "
                      "JOIN processes p ON p.id = a.process_id JOIN tasks t ON t.id = p.task_id "
                      "WHERE f.path = ? GROUP BY t.name", (str(tmp_path / "traced" / "out file 1.txt"),)).fetchall()
    con.close()
    assert row == [("spaces", len(b"a  b c  d\n"))]


def test_rule_several_sh_retry_and_failure(tmp_path):
    shim()
    plain = run_rake(tmp_path / "plain", "tasks.Rakefile", plugin=False, env={"FAIL": "1"})
    traced = run_rake(tmp_path / "traced", "tasks.Rakefile", env={"FAIL": "1", "MTCPROF_RUN": "t"})
    # the workflow's own failure behaviour is unchanged
    assert plain.returncode == traced.returncode == 1
    msg = "Command failed with status (5): [cat a.txt > failing.out; exit 5...]"
    assert msg in plain.stderr
    assert own_stderr(traced.stderr.replace(str(tmp_path / "traced"), "D")) == \
        own_stderr(plain.stderr.replace(str(tmp_path / "plain"), "D"))
    assert traced.stdout == plain.stdout
    assert tree(tmp_path / "traced") == tree(tmp_path / "plain")
    db = str(tmp_path / "traced" / "mtcprof.db")
    assert "mtcprof: run t stored in" in traced.stderr       # ingested although the workflow failed
    assert tasks(db, "t") == [
        ("a.up", 1, ".up", 0, 2), ("b.up", 1, ".up", 0, 2),         # the shell's redirection, then tr
        ("failing", 1, "cat", 5, 2),
        ("inputs", 1, "setup-stage", 0, 4),                  # three sh calls (and a cat), one task
        ("retried", 1, "test", 3, 3), ("retried", 2, "test", 0, 2)]


@pytest.mark.parametrize("env,warning", [
    ({"MTCPROF_PLUGIN": "off"}, "mtcprof: warning: plugin disabled by MTCPROF_PLUGIN=off; the workflow runs untraced"),
    ({"MTCPROF_LIB": "/nonexistent/libmtcprof.so"},
     "mtcprof: warning: shim not found: /nonexistent/libmtcprof.so (set MTCPROF_LIB or run `make -C preload`); "
     "the workflow runs untraced")])
def test_disabled_or_no_shim_runs_untraced_with_one_warning(tmp_path, env, warning):
    plain = run_rake(tmp_path / "plain", "torture.Rakefile", plugin=False)
    off = run_rake(tmp_path / "off", "torture.Rakefile", env=env)
    assert off.returncode == plain.returncode == 0
    assert off.stdout == plain.stdout
    assert tree(tmp_path / "off") == tree(tmp_path / "plain")
    assert off.stderr.splitlines() == [warning] + plain.stderr.splitlines()
    assert sorted(os.listdir(tmp_path / "off")) == sorted(os.listdir(tmp_path / "plain"))   # no logs, no db


def test_plugin_path_command():
    r = subprocess.run([MTCPROF, "plugin-path"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == ""
    assert os.path.isfile(os.path.join(r.stdout.strip(), "mtcio", "rake.rb"))
    r = subprocess.run([MTCPROF, "plugin-path", "rake"], capture_output=True, text=True)
    assert r.stdout.strip() == os.path.join(pwrake_plugin.LIB_DIR, "mtcio", "rake.rb")


def fake_ssh(folder):
    """An `ssh` that behaves as ssh does with its command words: joins them with spaces and hands the line to a
    shell (here, on this host, with MTCPROF_HOST naming the host asked for)."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "ssh")
    with open(path, "w") as fh:
        fh.write('#!/bin/sh\nh=$1; shift\nMTCPROF_HOST=$h exec /bin/sh -c "$*"\n')
    os.chmod(path, 0o755)
    return folder


def test_placement_through_an_ssh_launcher_keeps_quoting(tmp_path):
    shim()
    plain = run_rake(tmp_path / "plain", "torture.Rakefile", plugin=False)
    bindir = fake_ssh(str(tmp_path / "bin"))
    placed = run_rake(tmp_path / "placed", "torture.Rakefile", env={
        "MTCPROF_RUN": "ssh", "MTCPROF_HOSTS": "h1:1", "MTCPROF_LAUNCHER": "ssh {host}",
        "PATH": f"{bindir}:{os.environ['PATH']}"})
    assert placed.returncode == 0, placed.stderr
    assert placed.stdout == plain.stdout
    assert tree(tmp_path / "placed") == tree(tmp_path / "plain")
    con = sqlite3.connect(str(tmp_path / "placed" / "mtcprof.db"))
    hosts = con.execute("SELECT DISTINCT h.name FROM tasks t JOIN hosts h ON h.id = t.host_id").fetchall()
    n = con.execute("SELECT COUNT(*) FROM tasks").fetchone()[0]
    con.close()
    assert (hosts, n) == ([("h1",)], 8)


def test_placement_slots_per_host(tmp_path):
    """Without inputs on Gfarm every task goes to the least busy host; a host never runs more tasks at once than
    it has slots (rake -m -j 6, two hosts with 1 and 2 slots)."""
    shim()
    bindir = fake_ssh(str(tmp_path / "bin"))
    folder = tmp_path / "slots"
    folder.mkdir()
    (folder / "Rakefile").write_text('multitask :default => (0...6).map { |i| "s#{i}" }\n'
                                     '(0...6).each { |i| task("s#{i}") { sh "sleep 0.3; echo #{i} > s#{i}.out" } }\n')
    e = {k: v for k, v in os.environ.items() if not k.startswith("MTCPROF_")}
    e.update(MTCPROF_CMD=MTCPROF, MTCPROF_LIB=LIB, MTCPROF_RUN="slots", MTCPROF_HOSTS="a:1,b:2",
             MTCPROF_LAUNCHER="ssh {host}", PATH=f"{bindir}:{os.environ['PATH']}")
    r = subprocess.run(["rake", "-I", pwrake_plugin.path(), "-r", "mtcio/rake", "-m", "-j", "6"], cwd=folder,
                       env=e, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    con = sqlite3.connect(str(folder / "mtcprof.db"))
    rows = con.execute("SELECT h.name, t.start_ns, t.end_ns FROM tasks t JOIN hosts h ON h.id = t.host_id").fetchall()
    con.close()
    assert len(rows) == 6 and {h for h, _, _ in rows} == {"a", "b"}
    for host, slots in (("a", 1), ("b", 2)):
        spans = [(s, e) for h, s, e in rows if h == host]
        most = max(sum(1 for s2, e2 in spans if s2 <= s < e2) for s, _ in spans)
        assert most == slots, (host, spans)          # full, never over
    assert sorted(p.name for p in folder.glob("s*.out")) == [f"s{i}.out" for i in range(6)]
