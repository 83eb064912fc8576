"""Montage 6.0 under real Pwrake in its Gfarm mode, traced by the mtcio plugin, on `mtcbed up --nodes 4
--sshd`: a tiny mosaic (4 tiles, 2 hosts) end to end.  Every stage has the task count it has under rake, every
task is stored once, on the host Pwrake says it ran on (task.csv exec_host), and the mosaic's pixels equal
those of an untraced plain-Rake run.  Pwrake runs from PWRAKE_SRC or as `pwrake` on PATH; skipped when neither
exists (Pwrake is not part of mtcio)."""
import os
import shutil
import sqlite3
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from montage_example import prepare, run as mrun, sky  # noqa: E402

pytestmark = [pytest.mark.testbed,
              pytest.mark.skipif(mrun.pwrake_command() is None,
                                 reason="Pwrake not available: set PWRAKE_SRC to a masa16/pwrake checkout "
                                        "or put pwrake on PATH"),
              pytest.mark.skipif(shutil.which("rake") is None or shutil.which("mProjectPP") is None,
                                 reason="needs Debian's rake and montage")]
# the same counts as under rake (tests/test_montage_testbed.py): 4 tiles, 6 overlaps
COUNTS = {"mImgtbl-raw": 1, "mMakeHdr": 1, "mProjectPP": 4, "mImgtbl-proj": 1, "mOverlaps": 1, "mDiff": 6,
          "mFitplane": 6, "concatFit": 1, "mBgModel": 1, "mBackground": 4, "mImgtbl-corr": 1, "mAdd": 1, "mShrink": 1,
          "mViewer": 1}



def test_tiny_mosaic_under_pwrake_gfarm_mode(sshd_bed, tmp_path):
    bed = sshd_bed
    hosts = bed.hosts[:2]
    src, ref = str(tmp_path / "src"), str(tmp_path / "ref")
    pairs = prepare.prepare(src, "tiny")
    shutil.copytree(src, ref)
    mrun.run_untraced_local(ref)
    top = f"/montage-pw-{os.getpid()}"
    home = mrun.stage_inputs(bed, top, src, hosts)
    logs = mrun.make_logdir(bed)
    db = str(tmp_path / "m.db")
    try:
        res = mrun.run_pwrake(bed, top, hosts, run="pw", db=db, logdir=logs, slots=2, timeout=300)
        assert f"mtcprof: run pw stored in {db}" in res.stderr, res.stderr[-3000:]
        assert "mtcprof: warning" not in res.stderr, res.stderr[-3000:]
        m0 = bed.mounts[hosts[0]] + top
        assert len(pairs) == 6
        con = sqlite3.connect(db)
        rows = con.execute("SELECT t.stage, t.name, h.name, t.attempt, t.exit_status FROM tasks t "
                           "JOIN hosts h ON h.id = t.host_id").fetchall()
        pw = dict(con.execute("SELECT name, exec_host FROM pwrake_tasks WHERE has_action = 1"))
        con.close()
        count = {}
        for stage, *_ in rows:
            count[stage] = count.get(stage, 0) + 1
        assert count == COUNTS
        assert len({r[1] for r in rows}) == len(rows) == sum(COUNTS.values())      # every task once
        assert {r[1]: r[2] for r in rows} == pw                                     # on Pwrake's exec_host
        assert {(r[3], r[4]) for r in rows} == {(1, 0)}
        assert set(pw.values()) <= set(hosts)
        # the mosaic is the untraced plain-Rake run's, pixel for pixel
        _, want = sky.read_fits(os.path.join(ref, "mosaic.fits"))
        _, got = sky.read_fits(m0 + "/mosaic.fits")
        assert want.shape == got.shape and want.size > 0
        assert np.array_equal(want, got, equal_nan=True)
        assert open(m0 + "/mosaic.png", "rb").read(8) == b"\x89PNG\r\n\x1a\n"
        # outputs are stored on the host that ran the task (Pwrake's workers write to their own mounts)
        for t in home:
            assert bed.where(f"{top}/proj/{t}") == [pw[f"proj/{t}"]], t
        with open("/proc/mounts") as fh:
            assert [m for m in fh if "/pwrake_" in m] == []                         # Pwrake unmounted its own
    finally:
        shutil.rmtree(logs, ignore_errors=True)
        bed.exec(hosts[0], ["rm", "-rf", bed.mounts[hosts[0]] + top], check=False)
