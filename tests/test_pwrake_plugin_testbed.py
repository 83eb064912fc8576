"""The Rake plugin with placement on the real 4-host testbed (Debian's rake, `rake -m -j 12`): a rule, a 12-task
multitask fan-out whose inputs sit 3 per host, and a gather task.  Every task is in the db exactly once, with
its stage and the host it ran on; each fan-out task ran on the host holding its input (3 slots per host, so a
slot was always free); the gather task ran on the host holding most of its input bytes; outputs are stored
where they were written (gfwhere); placement asked Gfarm about each input once, not once per task."""
import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

import pytest

from mtcio import pwrake_plugin
from mtcio.db.api import Store
from mtcio.preload.testing import LIB, ensure_built

pytestmark = [pytest.mark.testbed,
              pytest.mark.skipif(shutil.which("rake") is None, reason="rake is not installed (Debian package rake)")]
FIX = os.path.join(os.path.dirname(__file__), "fixtures", "pwrake")
MTCPROF = os.path.join(os.path.dirname(sys.executable), "mtcprof")
MTCBED = f"{sys.executable} -m mtcio.testbed.cli"
N = 12


@contextlib.contextmanager
def gfarm_folder(testbed, host, name):
    """(top, logs): a fresh Gfarm folder, made through `host`'s mount, and a log folder the testbed user can
    write (tasks run as that user); both removed afterwards."""
    top = f"/{name}-{os.getpid()}"
    logs = tempfile.mkdtemp(prefix="mtcplg.")
    try:
        os.chmod(logs, 0o1777)
        testbed.exec(host, ["mkdir", "-p", testbed.mount(host) + top])
        yield top, logs
    finally:
        shutil.rmtree(logs, ignore_errors=True)
        testbed.exec(host, ["rm", "-rf", testbed.mount(host) + top], check=False)


def rake_placed(master, rakefile, *, logs, db, run, hosts, slots, jobs, **extra_env):
    """`rake -m -j jobs` under the plugin with placement (`slots` per host) in `master`, the folder seen through
    the first host's mount, with the fixture `rakefile` as its Rakefile."""
    if not os.path.exists(LIB):
        ensure_built()
    shutil.copy(os.path.join(FIX, rakefile), master + "/Rakefile")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MTCPROF_")}
    env.update(MTCPROF_CMD=MTCPROF, MTCPROF_LIB=LIB, MTCPROF_DIR=logs, MTCPROF_RUN=run, MTCPROF_DB=db,
               MTCPROF_HOSTS=" ".join(f"{h}:{slots}" for h in hosts), MTCPROF_LAUNCHER=f"{MTCBED} exec {{host}} --",
               MTCPROF_MOUNT="/mnt/mtcbed/{host}")
    env.update(extra_env)
    return subprocess.run(["rake", "-I", pwrake_plugin.path(), "-r", "mtcio/rake", "-m", "-j", str(jobs)],
                          cwd=master, env=env, capture_output=True, text=True, timeout=300)


def test_fanout_with_placement(testbed, tmp_path):
    hosts = testbed.hosts[:4]
    with gfarm_folder(testbed, hosts[0], "plg") as (top, logs):
        size = {i: 10_000 * (i + 1) for i in range(N)}
        home = {i: hosts[i % 4] for i in range(N)}       # input i is stored on host i mod 4
        for i in range(N):
            testbed.exec(home[i], ["sh", "-c", f"head -c {size[i]} /dev/urandom > {testbed.mount(home[i])}{top}/d{i}.in"])
        for i in range(N):
            assert testbed.where(f"{top}/d{i}.in") == [home[i]]
        master = testbed.mount(hosts[0]) + top           # the master's folder, through host 1's mount
        db = str(tmp_path / "bed.db")
        calls = tmp_path / "gfarm-calls"                  # Gfarm's clients through a wrapper noting each call
        gfarm_cmd = tmp_path / "gfarm-cmd"
        gfarm_cmd.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec {MTCBED} exec {hosts[0]} -- "$@"\n')
        gfarm_cmd.chmod(0o755)
        r = rake_placed(master, "fanout.Rakefile", logs=logs, db=db, run="fan", hosts=hosts, slots=3, jobs=N,
                        MTCPROF_VERBOSE="1", MTCPROF_GFARM_CMD=str(gfarm_cmd))
        assert r.returncode == 0, r.stderr
        assert "mtcprof: warning" not in r.stderr, r.stderr        # (ingest may warn about the folder itself)
        assert f"mtcprof: run fan stored in {db}" in r.stderr

        con = sqlite3.connect(db)
        rows = con.execute("SELECT t.name, t.attempt, t.stage, h.name, t.exit_status, t.bytes_read, "
                           "t.bytes_written_local FROM tasks t JOIN hosts h ON h.id = t.host_id").fetchall()
        con.close()
        got = {row[0]: row[1:] for row in rows}
        assert len(rows) == len(got) == N + 1              # every task exactly once
        # the gather task's input bytes per host: 15, 18, 21, 24 x 10 kB -> the 4th host
        expect = {f"d{i}.proj": (1, ".proj", home[i], 0, size[i], size[i] + len(home[i]) + 1) for i in range(N)}
        total = sum(size.values())
        expect["all.sum"] = (1, "gather", hosts[3], 0, total, len(f"{total}\n"))
        assert got == expect, r.stderr
        for i in range(N):                                  # where each task really ran, and its outputs
            assert testbed.exec(hosts[0], ["cat", f"{testbed.mount(hosts[0])}{top}/d{i}.proj.host"]).stdout \
                == home[i] + "\n"
            assert testbed.where(f"{top}/d{i}.proj") == [home[i]]
            assert testbed.where(f"{top}/d{i}.proj.host") == [home[i]]
        assert testbed.where(f"{top}/all.sum") == [hosts[3]]
        # placement asked Gfarm about every input once, the 12 fan-out tasks (ready together) in fewer calls
        placing = [line.split() for line in calls.read_text().splitlines() if line.startswith("sh -c gfwhere")]
        asked = sorted(w for words in placing for w in words if w.startswith(top + "/"))
        assert asked == sorted([f"{top}/d{i}.in" for i in range(N)] + [f"{top}/d{i}.proj" for i in range(N)])
        assert len(placing) < N + 1, placing


def test_slots_not_rakes_pool_bound_a_deep_graph(testbed, tmp_path):
    """Eight 0.3 s leaves under a chain a fan-out of four shares, 2 hosts x 2 slots, `rake -m -j 4`: all four
    slots run at once (Rake's pool of 4 alone has its threads waiting for the shared chain and runs the
    leaves one at a time), never more than 2 on a host."""
    hosts = testbed.hosts[:2]
    with gfarm_folder(testbed, hosts[0], "deep") as (top, logs):
        db = str(tmp_path / "deep.db")
        r = rake_placed(testbed.mount(hosts[0]) + top, "deep.Rakefile", logs=logs, db=db, run="deep", hosts=hosts,
                        slots=2, jobs=4)
        assert r.returncode == 0, r.stderr
    with Store(db) as s:
        leaves = s.stages("deep").set_index("stage").loc["sleep"]     # a stage is named by its first program
    # 4 at once, at most 2 on a host: so 2 on each
    assert (leaves["tasks"], leaves["concurrency"], leaves["per_host_concurrency"]) == (8, 4, 2)


def test_a_task_ends_once_its_outputs_are_closed_on_gfarm(testbed, tmp_path):
    """gfarm2fs closes a file on Gfarm after the writer's close returns (FUSE release): without waiting for it,
    a task reading that output on another host at once saw it short (size 0). Each of 40 tasks here reads the
    2 MB output of the one before on the other host (a launcher swapping the two hosts) and fails on a short
    input; all must pass."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from montage_example.run import Bed, host_launchers
    hosts = testbed.hosts[:2]
    with gfarm_folder(testbed, hosts[0], "handoff") as (top, logs):
        bed = Bed(testbed.hosts, {h: testbed.mount(h) for h in testbed.hosts}, testbed.user)
        shift_dir, launcher, mount = host_launchers(bed, hosts, 1)
        try:
            r = rake_placed(testbed.mount(hosts[0]) + top, "handoff.Rakefile", logs=logs,
                            db=str(tmp_path / "h.db"), run="handoff", hosts=hosts, slots=1, jobs=2,
                            MTCPROF_LAUNCHER=launcher, MTCPROF_MOUNT=mount, MTCPROF_INGEST="off")
        finally:
            shutil.rmtree(shift_dir, ignore_errors=True)
        assert r.returncode == 0, r.stderr
        for i in range(41):
            assert os.path.getsize(f"{testbed.mount(hosts[0])}{top}/h{i}") == 2_000_000
