"""The Rake plugin with MTCPROF_CAPTURE=darshan: each command runs with Darshan's environment (the library named
by MTCPROF_DARSHAN_LIB preloaded, DARSHAN_ENABLE_NONMPI=1, its own DARSHAN_LOGPATH with the date folders Darshan
expects) and the task's identity in mtcprof-task.env beside it; without the library, untraced with one warning.
With a real libdarshan (MTCIO_TEST_DARSHAN_LIB, e.g. one built from source) the run is ingested --from darshan."""
import os
import shutil
import sqlite3
import subprocess
import sys

import pytest

from mtcio import pwrake_plugin

MTCPROF = os.path.join(os.path.dirname(sys.executable), "mtcprof")
pytestmark = pytest.mark.skipif(shutil.which("rake") is None, reason="rake is not installed (Debian package rake)")

RAKEFILE = r'''
MtcIO.stage("make", /\.txt\z/) if defined?(MtcIO.stage)
file "a.txt" do
  sh "echo 'hello world' > a.txt; env | grep -E '^(DARSHAN_|LD_PRELOAD=)' | sort > a.env"
end
file "b.txt" => "a.txt" do
  sh "cat a.txt a.txt > b.txt"
end
task default: "b.txt"
'''


def run_rake(folder, env):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Rakefile").write_text(RAKEFILE)
    e = {k: v for k, v in os.environ.items() if not k.startswith(("MTCPROF_", "DARSHAN_")) and k != "LD_PRELOAD"}
    e.update({"MTCPROF_CMD": MTCPROF, "MTCPROF_CAPTURE": "darshan", **env})
    return subprocess.run(["rake", "-I", pwrake_plugin.path(), "-r", "mtcio/rake"], cwd=folder, env=e,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def empty_lib(tmp_path):
    """A real shared library that does nothing, standing in for libdarshan where none is installed."""
    src = tmp_path / "empty.c"
    src.write_text("int mtcio_test_empty;\n")
    lib = tmp_path / "libempty.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return str(lib)


def test_commands_get_darshans_environment_and_the_task_record(tmp_path, empty_lib):
    wf, logs = tmp_path / "wf", tmp_path / "logs"
    r = run_rake(wf, {"MTCPROF_DARSHAN_LIB": empty_lib, "MTCPROF_DIR": str(logs), "MTCPROF_RUN": "r1"})
    assert r.returncode == 0, r.stderr
    assert (wf / "b.txt").read_text() == "hello world\nhello world\n"
    env = dict(line.split("=", 1) for line in (wf / "a.env").read_text().splitlines())
    d = env["DARSHAN_LOGPATH"]
    assert env["DARSHAN_ENABLE_NONMPI"] == "1" and env["LD_PRELOAD"] == empty_lib
    assert os.path.dirname(os.path.dirname(d)) == str(logs / "darshan")
    records = sorted(os.path.join(root, f) for root, _, files in os.walk(logs) for f in files)
    assert len(records) == 2 and all(p.endswith("/mtcprof-task.env") for p in records)
    host = subprocess.run(["uname", "-n"], capture_output=True, text=True).stdout.strip()
    got = []
    for p in records:
        with open(p, "rb") as f:
            got.append(dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if kv))
    assert sorted(g[b"MTCPROF_TASK"] for g in got) == [b"a.txt", b"b.txt"]
    assert all(g[b"MTCPROF_STAGE"] == b"make" and g[b"MTCPROF_RUN"] == b"r1" and
               g[b"MTCPROF_HOST"] == host.encode() for g in got)
    # Darshan makes no folder: today's year/month/day is there for it
    days = [os.path.relpath(os.path.join(root, x), d) for root, dirs, _ in os.walk(d) for x in dirs]
    assert any(len(p.split("/")) == 3 for p in days)
    assert "no task was traced" in r.stderr          # the stand-in wrote no Darshan log


@pytest.mark.parametrize("env, warning", [
    ({}, "MTCPROF_CAPTURE=darshan needs MTCPROF_DARSHAN_LIB"),
    ({"MTCPROF_DARSHAN_LIB": "/nonexistent/libdarshan.so"}, "Darshan library not found: /nonexistent/libdarshan.so"),
    ({"MTCPROF_CAPTURE": "strace"}, "MTCPROF_CAPTURE=strace is neither shim nor darshan"),
])
def test_without_the_library_untraced_with_one_warning(tmp_path, env, warning):
    wf = tmp_path / "wf"
    r = run_rake(wf, {"MTCPROF_DIR": str(tmp_path / "logs"), **env})
    assert r.returncode == 0, r.stderr
    assert (wf / "b.txt").read_text() == "hello world\nhello world\n"
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("mtcprof")]
    assert len(lines) == 1 and lines[0].startswith(f"mtcprof: warning: {warning}") and \
        lines[0].endswith("; the workflow runs untraced"), lines
    assert "DARSHAN_LOGPATH" not in (wf / "a.env").read_text()


@pytest.mark.skipif(not os.environ.get("MTCIO_TEST_DARSHAN_LIB"),
                    reason="set MTCIO_TEST_DARSHAN_LIB to a libdarshan.so")
def test_real_darshan_run_is_ingested(tmp_path):
    wf, logs, db = tmp_path / "wf", tmp_path / "logs", tmp_path / "x.db"
    r = run_rake(wf, {"MTCPROF_DARSHAN_LIB": os.environ["MTCIO_TEST_DARSHAN_LIB"], "MTCPROF_DIR": str(logs),
                      "MTCPROF_RUN": "r1", "MTCPROF_DB": str(db)})
    assert r.returncode == 0, r.stderr
    assert "task and stage from plugin record" in r.stderr
    con = sqlite3.connect(db)
    tasks = dict(con.execute("SELECT name, stage FROM tasks"))
    assert tasks == {"a.txt": "make", "b.txt": "make"}
    # a.txt: the shell's echo wrote 12 bytes; b.txt: Darshan saw cat open a.txt twice (its bytes are a
    # copy_file_range on coreutils >= 9, which Darshan does not wrap: not asserted)
    assert con.execute("SELECT bytes_written FROM tasks WHERE name = 'a.txt'").fetchone() == (12,)
    assert con.execute("SELECT sum(fa.opens) FROM file_access fa JOIN processes p ON p.id = fa.process_id JOIN "
                       "files f ON f.id = fa.file_id JOIN tasks t ON t.id = p.task_id WHERE t.name = 'b.txt' AND "
                       "f.path = ? AND p.exe = 'cat'", (str(wf / "a.txt"),)).fetchone() == (2,)
