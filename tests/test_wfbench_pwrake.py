"""The tiny WfBench workflow of tests/test_wfbench_testbed.py (a BLAST instance, 11 tasks, 4 MB in all) under real
Pwrake in its Gfarm mode with the mtcio plugin, on `mtcbed up --nodes 4 --sshd`, 2 hosts: the same checks as
under Rake (every task of the instance in the db exactly once with its stage, the bytes it read and wrote on Gfarm
equal to the instance's file sizes), each task on the host Pwrake says it ran on (task.csv exec_host).  Pwrake
runs from PWRAKE_SRC or as `pwrake` on PATH; skipped when neither exists (Pwrake is not part of mtcio)."""
import json
import os
import shutil
import sqlite3
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from montage_example import run as mrun  # noqa: E402
from mtcio.preload.testing import LIB, ensure_built  # noqa: E402

pytest.importorskip("wfcommons")
from wfbench_example import instance, prepare, run as wrun  # noqa: E402

MTCBED = [sys.executable, "-m", "mtcio.testbed.cli"]
pytestmark = [pytest.mark.testbed,
              pytest.mark.skipif(mrun.pwrake_command() is None,
                                 reason="Pwrake not available: set PWRAKE_SRC to a masa16/pwrake checkout "
                                        "or put pwrake on PATH"),
              pytest.mark.skipif(shutil.which("stress-ng") is None, reason="needs stress-ng")]


@pytest.fixture(scope="module")
def sshd_bed(bed_manager):
    """`mtcbed up --nodes 4 --sshd` for this module; the shared testbed comes back for the next user."""
    if not os.path.exists(LIB):
        ensure_built()
    bed_manager.release()
    r = subprocess.run(MTCBED + ["up", "--nodes", "4", "--sshd"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    yield mrun.Bed.current()
    bed_manager.release()


def test_tiny_wfbench_under_pwrake_bytes_equal_instance(sshd_bed, tmp_path):
    bed = sshd_bed
    src = str(tmp_path / "src")
    inst = instance.generate("blast", 45, seed=1).pruned(8)
    inst = inst.scaled(prepare.factor_for(inst, 4))
    prepare.prepare(src, inst)
    assert len(inst.tasks) == 11
    hosts = bed.hosts[:2]
    db = str(tmp_path / "mtc.db")
    top = f"/wfbench-pw-{os.getpid()}"
    spec = json.load(open(os.path.join(src, "tasks.json")))
    try:
        wrun.run_pwrake_once(bed, src, hosts, run="tinypw", db=db, top=top, keep=True, timeout=600)
        m0 = bed.mounts[hosts[0]] + top
        for t in spec["tasks"]:                   # the files really are there with the instance's sizes
            for f, size in t["outputs"].items():
                assert os.path.getsize(os.path.join(m0, f)) == size, f
    finally:
        bed.exec(hosts[0], ["rm", "-rf", bed.mounts[hosts[0]] + top], check=False)
    con = sqlite3.connect(db)
    rows = con.execute("SELECT t.name, t.stage, t.exit_status, t.bytes_read, t.bytes_written, h.name FROM tasks t "
                       "JOIN runs r ON r.id = t.run_id JOIN hosts h ON h.id = t.host_id WHERE r.name = 'tinypw'"
                       ).fetchall()
    pw = dict(con.execute("SELECT name, exec_host FROM pwrake_tasks WHERE has_action = 1"))
    con.close()
    names = [r[0] for r in rows]
    expected = {(next(iter(t["outputs"])) if t["outputs"] else t["id"]): t for t in spec["tasks"]}
    assert sorted(names) == sorted(expected)          # every task once, nothing else
    assert {r[0]: r[5] for r in rows} == pw           # on Pwrake's exec_host
    sizes = {os.path.basename(k): v for t in spec["tasks"] for k, v in t["outputs"].items()}
    sizes.update({f: inst.sizes[f] for f in inst.inputs()})
    for name, stage, status, read, written, host in rows:
        t = expected[name]
        assert stage == t["stage"] and status == 0 and host in hosts, (name, stage, status, host)
        assert read == sum(sizes[os.path.basename(f)] for f in t["inputs"]), name
        assert written == sum(t["outputs"].values()), name
    assert sum(r[3] for r in rows) == sum(inst.sizes[f] for t in inst.tasks for f in t.inputs)
