"""A full disk and a read-only file system, as ingest and report meet them (real tmpfs mounts, root only): one
line in the user's words (never "not an mtcio database", never an unexpected OperationalError), nothing left
behind (no empty db file, no empty report folder), exit 1 for a full disk and 2 for a read-only one."""
import os
import shutil
import sqlite3
import subprocess
import sys

import pytest

from mtcio.preload.testing import run

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to mount a tmpfs")
MTCPROF = [sys.executable, "-c", "import sys; from mtcio.cli import mtcprof; sys.exit(mtcprof())"]
FULL = "the disk is full (no space left on the file system that holds it); free some space or write somewhere else"
RO = "is on a read-only file system; write to a database (or folder) on a writable one"


def mtcprof(*args):
    return subprocess.run(MTCPROF + [str(a) for a in args], capture_output=True, text=True)


@pytest.fixture
def traced(tmp_path):
    """A folder of one real log (run R) and a db of it on an ordinary disk."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (tmp_path / "in").write_bytes(b"x" * 1000)
    assert run(["cat", str(tmp_path / "in")], str(logs), env_extra={"MTCPROF_TASK": "t", "MTCPROF_STAGE": "S",
                                                                    "MTCPROF_RUN": "R"}).returncode == 0
    db = tmp_path / "home.db"
    assert mtcprof("ingest", logs, "--db", db, "--gfwhere-cmd", "none").returncode == 0
    return logs, db


def fill(mnt):
    fd = os.open(mnt / "fill", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while os.write(fd, bytes(4096)):
            pass
    except OSError as e:
        assert e.errno == 28
    finally:
        os.close(fd)


def one_line(r, code):
    assert r.returncode == code and len(r.stderr.splitlines()) == 1, (r.returncode, r.stderr)
    assert "not an mtcio database" not in r.stderr and "unexpected" not in r.stderr and "readonly=True" not in \
        r.stderr
    return r.stderr.rstrip("\n")


@root_only
def test_a_full_disk(tmpfs, traced):
    logs, home = traced
    mnt = tmpfs("size=512k")
    old = mnt / "old.db"
    assert mtcprof("ingest", logs, "--db", old, "--gfwhere-cmd", "none").returncode == 0
    fill(mnt)           # the db closed has no -shm; SQLite cannot make one and says "disk I/O error"
    assert one_line(mtcprof("ingest", logs, "--db", old, "--run", "R2", "--gfwhere-cmd", "none"), 1) == \
        f"mtcprof ingest: {old}: {FULL}"
    os.unlink(mnt / "fill")
    reader = sqlite3.connect(old)           # keeps the db's -wal and -shm: the ingest opens it, then cannot write
    reader.execute("SELECT count(*) FROM runs").fetchone()
    fill(mnt)
    assert one_line(mtcprof("ingest", logs, "--db", old, "--run", "R2", "--gfwhere-cmd", "none"), 1) == \
        f"mtcprof ingest: {old}: {FULL}; the run being ingested was not stored (runs stored before it are kept)"
    assert [r for r, in reader.execute("SELECT name FROM runs")] == ["R"]
    reader.close()
    new = mnt / "new.db"
    assert one_line(mtcprof("ingest", logs, "--db", new, "--gfwhere-cmd", "none"), 1) == \
        f"mtcprof ingest: {new}: {FULL}"
    assert "new.db" not in os.listdir(mnt)                                               # no empty db left
    out = mnt / "report"
    assert one_line(mtcprof("report", "--db", home, "--run", "R", "-o", out), 1) == \
        f"mtcprof report: {out}: {FULL}; no report written"
    assert not out.exists()


@root_only
def test_a_read_only_file_system(tmpfs, traced, tmp_path):
    logs, home = traced
    mnt = tmpfs("size=1m")
    shutil.copy(home, mnt / "copy.db")
    subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
    for db in (mnt / "copy.db", mnt / "new.db"):
        assert one_line(mtcprof("ingest", logs, "--db", db, "--run", "R2", "--gfwhere-cmd", "none"), 2) == \
            f"mtcprof ingest: {db}: {RO}"
    out = mnt / "report"
    assert one_line(mtcprof("report", "--db", home, "--run", "R", "-o", out), 1) == \
        f"mtcprof report: {out}: {RO}; no report written"
    assert sorted(os.listdir(mnt)) == ["copy.db"]
    r = mtcprof("model", "--db", mnt / "copy.db", "--run", "R", "-o", tmp_path / "m.yaml")    # reading is fine
    assert r.returncode == 0, r.stderr
