"""The tracing plugin under real Pwrake, in its Gfarm mode, on `mtcbed up --nodes 4 --sshd`: Pwrake runs from a
checkout named by PWRAKE_SRC (`ruby -I SRC/lib SRC/bin/pwrake`) or as `pwrake` on PATH; skipped when neither
exists.  Pwrake is not part of mtcio and is never installed by it.

The fan-out Rakefile (a rule, 12 tasks whose inputs sit 3 per host, a gather task): every task is stored once,
on the host Pwrake says it ran on (task.csv exec_host), and the measured alpha matches Pwrake's preq_loc (the
bytes of the prerequisites it marked L over all prerequisite bytes); Pwrake's worker mounts are gone at the end."""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

import pytest

from mtcio import pwrake_plugin
from mtcio.preload.testing import LIB

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "pwrake")
MTCPROF = os.path.join(os.path.dirname(sys.executable), "mtcprof")
MTCBED = [sys.executable, "-m", "mtcio.testbed.cli"]
SRC = os.environ.get("PWRAKE_SRC")
N = 12

pytestmark = [pytest.mark.testbed,
              pytest.mark.skipif(not (SRC and os.path.isfile(os.path.join(SRC, "bin", "pwrake")))
                                 and shutil.which("pwrake") is None,
                                 reason="Pwrake not available: set PWRAKE_SRC to a masa16/pwrake checkout "
                                        "or put pwrake on PATH")]


def pwrake_argv():
    if SRC and os.path.isfile(os.path.join(SRC, "bin", "pwrake")):
        return ["ruby", "-I", os.path.join(SRC, "lib"), os.path.join(SRC, "bin", "pwrake")], os.path.join(SRC, "bin")
    return [shutil.which("pwrake")], os.path.dirname(shutil.which("pwrake"))


def bed(*args, check=True):
    return subprocess.run(MTCBED + list(args), capture_output=True, text=True, check=check)


def on(host, *argv, **kw):
    return subprocess.run(MTCBED + ["exec", host, "--", *argv], capture_output=True, text=True, check=True, **kw)


def where(host, path):
    return on(host, "gfwhere", path).stdout.split()



def run_pwrake(host, cwd, work, *extra, compat=True, plugin=True, timeout=300):
    """Pwrake's master to its end, in a session of its own, killed with everything it started (its ssh workers
    each have a process group of their own) when it is not done in `timeout` s: then returncode is None."""
    argv, bindir = pwrake_argv()
    env = ["env", f"PATH={bindir}:{os.environ['PATH']}", f"MTCPROF_CMD={MTCPROF}", f"MTCPROF_LIB={LIB}",
           f"MTCPROF_DIR={work}/logs", "MTCPROF_RUN=pw", f"MTCPROF_DB={work}/pw.db"]
    req = (["-r", pwrake_plugin.path("compat")] if compat else []) + (["-r", pwrake_plugin.path("pwrake")] if plugin else [])
    cmd = MTCBED + ["exec", host, "--", *env, *argv, *req, "--hostfile", f"{work}/hosts", *extra]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=err, text=True, start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            kill_session(p.pid)
            p.wait()
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(cmd, rc, out.read(), err.read())


def kill_session(sid):
    for d in os.listdir("/proc"):
        try:
            with open(f"/proc/{d}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            if int(fields[3]) == sid:            # the fields after "(comm)": state, ppid, pgrp, session
                os.kill(int(d), 9)
        except (OSError, ValueError, IndexError):
            pass


def test_pwrake_gfarm_mode_every_task_once_on_exec_host(sshd_bed, tmp_path):
    hosts = [f"mtc-node{k}" for k in range(1, 5)]
    top = f"/pwr-{os.getpid()}"
    work = tempfile.mkdtemp(prefix="mtcpwr.")
    try:
        os.chmod(work, 0o1777)               # Pwrake and its tasks run as the testbed user
        on(hosts[0], "mkdir", "-p", f"/mnt/mtcbed/{hosts[0]}{top}")
        size = {i: 10_000 * (i + 1) for i in range(N)}
        home = {i: hosts[i % 4] for i in range(N)}
        for i in range(N):
            on(home[i], "sh", "-c", f"head -c {size[i]} /dev/urandom > /mnt/mtcbed/{home[i]}{top}/d{i}.in")
        master = f"/mnt/mtcbed/{hosts[0]}{top}"          # on gfarm2fs: Pwrake switches to its Gfarm mode
        shutil.copy(os.path.join(FIX, "fanout.Rakefile"), master + "/Rakefile")
        with open(os.path.join(work, "hosts"), "w") as fh:
            fh.write("".join(f"{h} 3\n" for h in hosts))
        db = os.path.join(work, "pw.db")
        r = run_pwrake(hosts[0], master, work, "-L", f"{work}/pwlog")
        assert r.returncode == 0, r.stderr[-3000:]
        assert "mtcprof: warning" not in r.stderr, r.stderr[-3000:]
        assert f"mtcprof: run pw stored in {db}" in r.stderr
        assert "pwrake-import: 26 Pwrake tasks (13 with actions) into run pw; 13 of them traced" in r.stderr

        con = sqlite3.connect(db)
        traced = con.execute("SELECT t.name, t.attempt, t.stage, h.name, t.exit_status, t.bytes_read_local, "
                             "t.bytes_read_remote FROM tasks t JOIN hosts h ON h.id = t.host_id").fetchall()
        pw = {row[0]: row[1:] for row in con.execute(
            "SELECT name, exec_host, preq, preq_loc FROM pwrake_tasks WHERE run_id = "
            "(SELECT id FROM runs WHERE name = 'pw') AND has_action = 1")}
        con.close()
        assert len(traced) == len({t[0] for t in traced}) == N + 1      # every task exactly once
        assert sorted(pw) == sorted(t[0] for t in traced)
        proj_size = {f"d{i}.proj": size[i] for i in range(N)}
        for name, attempt, stage, host, status, local, remote in traced:
            exec_host, preq, loc = pw[name]
            assert (attempt, status, host) == (1, 0, exec_host), name
            assert stage == ("gather" if name == "all.sum" else ".proj"), name
            # alpha from Pwrake's preq_loc: the bytes of the prerequisites it marked local
            preq = json.loads(preq)
            sizes = [proj_size[p] if name == "all.sum" else size[int(p[1:-3])] for p in preq]
            assert len(loc) == len(preq), name
            assert (local, remote) == (sum(s for s, c in zip(sizes, loc) if c == "L"),
                                       sum(s for s, c in zip(sizes, loc) if c == "R")), name
        # the fan-out tasks ran where their input is (Pwrake's locality-aware queue) and wrote there
        for i in range(N):
            assert pw[f"d{i}.proj"][0] == home[i]
            assert where(hosts[0], f"{top}/d{i}.proj") == [home[i]]
        with open("/proc/mounts") as fh:
            assert [m for m in fh if "/pwrake_" in m] == []                   # Pwrake unmounted its own
    finally:
        shutil.rmtree(work, ignore_errors=True)
        bed("exec", hosts[0], "--", "rm", "-rf", f"/mnt/mtcbed/{hosts[0]}{top}", check=False)


def test_pwrake_plain_mode_and_the_ruby3_deadlock(sshd_bed, tmp_path):
    """Plain mode (the master's folder is a local one every host sees): tasks spread over the hosts by ssh,
    each stored once on its exec_host.  Without the compatibility file Pwrake 2.3.1 does not get through this
    fan-out: it stops with Ruby's fiber deadlock, or (Ruby 3.1.2 on 2026-11-29) hangs before any task; with it the
    same workflow runs."""
    hosts = sshd_bed.hosts
    work = tempfile.mkdtemp(prefix="mtcpwr.")
    try:
        wf = os.path.join(work, "wf")
        os.mkdir(wf)
        shutil.copy(os.path.join(FIX, "fanout.Rakefile"), wf + "/Rakefile")
        for i in range(N):
            with open(f"{wf}/d{i}.in", "wb") as fh:
                fh.write(os.urandom(1000 + i))
        with open(os.path.join(work, "hosts"), "w") as fh:
            fh.write("".join(f"{h} 2\n" for h in hosts))
        for root, dirs, files in os.walk(work):
            for x in dirs + files:
                os.chmod(os.path.join(root, x), 0o1777 if x in dirs else 0o666)
        os.chmod(work, 0o1777)
        ver = subprocess.run(["ruby", "-e", "print RUBY_VERSION >= '3.0.2' ? 1 : 0"], capture_output=True,
                             text=True).stdout
        argv, _ = pwrake_argv()
        pver = subprocess.run([*argv, "--version"], capture_output=True, text=True).stdout
        if ver == "1" and "2.3.1" in pver:
            r = run_pwrake(hosts[0], wf, work, compat=False, plugin=False, timeout=60)
            if r.returncode is None:        # hung: nothing made
                assert not os.path.exists(f"{wf}/all.sum") and not os.path.exists(f"{work}/pw.db"), r.stderr
            else:
                assert r.returncode == 1, r.stderr[-3000:]
                assert "ThreadError: deadlock; lock already owned by another fiber" in r.stderr
        r = run_pwrake(hosts[0], wf, work, "-L", f"{work}/pwlog")
        assert r.returncode == 0, r.stderr[-3000:]
        con = sqlite3.connect(f"{work}/pw.db")
        traced = dict(con.execute("SELECT t.name, h.name FROM tasks t JOIN hosts h ON h.id = t.host_id"))
        pw = dict(con.execute("SELECT name, exec_host FROM pwrake_tasks WHERE has_action = 1"))
        n = con.execute("SELECT COUNT(*) FROM tasks").fetchone()[0]
        con.close()
        assert n == len(traced) == N + 1
        assert traced == pw
        assert len(set(traced.values())) >= 2                  # spread over hosts by ssh
        with open(f"{wf}/all.sum") as fh:
            assert int(fh.read()) == sum(1000 + i for i in range(N))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_pwrake_task_ends_once_its_outputs_are_closed_on_gfarm(sshd_bed, tmp_path):
    """gfarm2fs closes a file on Gfarm in FUSE's release, after the writer's close has returned: under Rake a
    task placed at once on another host read its input short (placement.rb waits for the close, tested in
    test_pwrake_plugin_testbed.py).  Pwrake enqueues a task's successors only after its master has looked the
    output up (File::Stat, gfwhere-pipe), and each worker has its own mount: the same handoff chain, each task
    pinned to the other host than the one before (HANDOFF_HOSTS, Pwrake's allow=), 40 tasks each reading the
    2 MB output of the one before on the host that did not write it and failing on a short input, passes under
    Pwrake with the plugin (no guard of the plugin's), each task on its pinned host."""
    hosts = sshd_bed.hosts[:2]
    top = f"/pwho-{os.getpid()}"
    work = tempfile.mkdtemp(prefix="mtcpwr.")
    master = f"/mnt/mtcbed/{hosts[0]}{top}"
    try:
        os.chmod(work, 0o1777)
        on(hosts[0], "mkdir", "-p", master)
        on(hosts[0], "cp", os.path.join(FIX, "handoff.Rakefile"), master + "/Rakefile")
        with open(os.path.join(work, "hosts"), "w") as fh:
            fh.write("".join(f"{h} 1\n" for h in hosts))
        r = run_pwrake(hosts[0], master, work, "-L", f"{work}/pwlog", "HANDOFF_HOSTS=" + " ".join(hosts))
        assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
        assert "short input" not in r.stdout + r.stderr
        for i in range(41):
            assert os.path.getsize(f"{master}/h{i}") == 2_000_000, i
        con = sqlite3.connect(f"{work}/pw.db")
        pw = dict(con.execute("SELECT name, exec_host FROM pwrake_tasks WHERE has_action = 1"))
        traced = dict(con.execute("SELECT t.name, h.name FROM tasks t JOIN hosts h ON h.id = t.host_id"))
        con.close()
        assert pw == traced == {f"h{i}": hosts[i % 2] for i in range(41)}
    finally:
        shutil.rmtree(work, ignore_errors=True)
        bed("exec", hosts[0], "--", "rm", "-rf", master, check=False)
