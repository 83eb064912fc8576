"""A process that ends with every fd it may have (EMFILE) still leaves its whole log, through the real `mtcprof run`,
and is not changed: the same fds, output, stderr (byte for byte) and status as untraced.  The limit is set with the
soft limit equal to the hard one, so the shim cannot raise it for itself."""
import os
import resource
import signal
import subprocess
import sys

import pytest

from mtcio.db.logformat import read_log
from mtcio.preload.testing import env_for, log_paths

MTCPROF = [sys.executable, "-c", "import sys; from mtcio.cli import mtcprof; sys.exit(mtcprof())"]
LIMIT = 256
# the reproducer, then: close the last `free` fds, say which fds it got, and end (or die of SIGTERM)
FILL = """import os, sys
l = []
try:
    while 1: l.append(os.open('/etc/hostname', 0))
except OSError: pass
free, end = int(sys.argv[1]), sys.argv[2]
for fd in l[len(l) - free:]: os.close(fd)
print(len(l), l[0], l[-1], flush=True)
if end == 'kill': os.kill(os.getpid(), 15)
"""


def at_limit():
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


def run_filler(tmp_path, free, end, logdir=None):
    argv = [sys.executable, "-c", FILL, str(free), end]
    if logdir is not None:
        argv = [*MTCPROF, "run", "--dir", str(logdir), "--", *argv]
    return subprocess.run(argv, capture_output=True, cwd=tmp_path, env=env_for(None), preexec_fn=at_limit,
                          timeout=120)


@pytest.mark.parametrize("free, end, ended_by", [(0, "exit", "main_return"), (1, "exit", "main_return"),
                                                 (0, "kill", "signal")],
                         ids=["no-fd-left", "one-fd-left", "killed-at-the-limit"])
def test_the_log_is_written_at_the_fd_limit_and_nothing_changes(tmp_path, free, end, ended_by):
    ref = run_filler(tmp_path, free, end)
    logdir = tmp_path / "L"
    got = run_filler(tmp_path, free, end, logdir)
    assert (got.returncode, got.stdout, got.stderr) == (ref.returncode, ref.stdout, ref.stderr)
    assert ref.returncode == (-signal.SIGTERM if end == "kill" else 0)
    n, first, last = map(int, ref.stdout.split())
    assert n == last - first + 1 and last == LIMIT - 1          # every fd up to the limit, as untraced

    paths = log_paths(str(logdir))
    assert len(paths) == 1 and not [p for p in os.listdir(logdir) if p.startswith(".")]
    log = read_log(paths[0], strict=True)
    p = log.process
    assert log.complete and (p["ended_by"], p["ppid"]) == (ended_by, os.getpid())
    # the lines read from kernel files at the end (an fd each) are there, the scheduler's the program's own
    assert p["cpu_clock"].split()[0] == str(os.cpu_count()) and len(p["cpu_clock"].split()) == 5
    assert len(p["sched"].split()) == 6 and int(p["sched"].split()[3]) >= int(p["sched"].split()[0]) > 0
    host = [f for f in log.files if f["path"] == "/etc/hostname"]
    assert [(f["opens"], f["errors"], f.get("closes", 0)) for f in host] == [(n, 1, free)]

    db = tmp_path / "t.db"
    r = subprocess.run([*MTCPROF, "ingest", "--db", str(db), str(logdir)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    import sqlite3
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM processes").fetchone()[0] == 1
    assert conn.execute("SELECT sum(a.opens) FROM file_access a JOIN files f ON f.id = a.file_id "
                        "WHERE f.path = '/etc/hostname'").fetchone()[0] == n


# at the limit, then exec: the log written before the exec by a copy of the process must not signal or leave a child
# to the program (a blocked SIGCHLD would stay pending over the exec; a child left unreaped would be waitable)
EXEC_AFTER = """import os, signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
l = []
try:
    while 1: l.append(os.open('/etc/hostname', 0))
except OSError: pass
print(len(l), flush=True)
os.execv(sys.executable, [sys.executable, '-c', '''import os, signal
print(sorted(signal.sigpending()))
try: print(os.waitpid(-1, os.WNOHANG))
except ChildProcessError as e: print(e)'''])
"""


def test_the_copy_that_writes_the_log_is_never_the_programs_child(tmp_path):
    argv = [sys.executable, "-c", EXEC_AFTER]
    ref = subprocess.run(argv, capture_output=True, env=env_for(None), preexec_fn=at_limit, timeout=120)
    got = subprocess.run([*MTCPROF, "run", "--dir", str(tmp_path / "L"), "--", *argv], capture_output=True,
                         env=env_for(None), preexec_fn=at_limit, timeout=120)
    assert (got.returncode, got.stdout, got.stderr) == (ref.returncode, ref.stdout, ref.stderr)
    assert ref.stdout.decode().splitlines()[1:] == ["[]", "[Errno 10] No child processes"]
    logs = sorted((read_log(p, strict=True) for p in log_paths(str(tmp_path / "L"))),
                  key=lambda g: g.process["start_ns"])
    assert [g.process["ended_by"] for g in logs] == ["exec", "main_return"]
    n = int(ref.stdout.split()[0])
    assert [f["opens"] for f in logs[0].files if f["path"] == "/etc/hostname"] == [n]
