"""The tiny WfBench workflow of tests/test_wfbench_testbed.py (a BLAST instance, 11 tasks, 4 MB in all) under real
Pwrake in its Gfarm mode with the mtcio plugin, on `mtcbed up --nodes 4 --sshd`, 2 hosts: the same checks as
under Rake (every task of the instance in the db exactly once with its stage, the bytes it read and wrote on Gfarm
equal to the instance's file sizes), each task on the host Pwrake says it ran on (task.csv exec_host).  Pwrake
runs from PWRAKE_SRC or as `pwrake` on PATH; skipped when neither exists (Pwrake is not part of mtcio)."""
import json
import os
import shutil
import sqlite3
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from montage_example import run as mrun  # noqa: E402

from helpers.wfbench import check_run_matches_instance  # noqa: E402

pytest.importorskip("wfcommons")
from wfbench_example import instance, prepare, run as wrun  # noqa: E402

pytestmark = [pytest.mark.testbed,
              pytest.mark.skipif(mrun.pwrake_command() is None,
                                 reason="Pwrake not available: set PWRAKE_SRC to a masa16/pwrake checkout "
                                        "or put pwrake on PATH"),
              pytest.mark.skipif(shutil.which("stress-ng") is None, reason="needs stress-ng")]



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
    rows = check_run_matches_instance(db, "tinypw", spec, inst, hosts)
    con = sqlite3.connect(db)
    pw = dict(con.execute("SELECT name, exec_host FROM pwrake_tasks WHERE has_action = 1"))
    con.close()
    assert {r[0]: r[5] for r in rows} == pw           # on Pwrake's exec_host
