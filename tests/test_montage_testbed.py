"""Montage 6.0 (Debian's build) on the real testbed under Rake with the mtcio plugin: a tiny mosaic (4 tiles, 2
hosts) end to end, traced per task.  Every stage is in the db with its task count (mProjectPP and mBackground
one per tile, mDiff and mFitplane one per overlap mOverlaps found); the mosaic's pixels equal those of an
untraced plain-Rake run; the background offsets between tiles shrink.  Locality: with placement, mProjectPP
reads only local replicas (α = 1.0); placed against the data (each task run on the next host), α = 0.0."""
import os
import shutil
import sqlite3
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from montage_example import prepare, run as mrun, sky  # noqa: E402

pytestmark = [pytest.mark.testbed,
              pytest.mark.skipif(shutil.which("rake") is None or shutil.which("mProjectPP") is None,
                                 reason="needs Debian's rake and montage")]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A prepared 4-tile folder and the mosaic of an untraced plain-Rake run of it."""
    base = tmp_path_factory.mktemp("montage")
    src = str(base / "src")
    pairs = prepare.prepare(src, "tiny")
    ref = str(base / "ref")
    shutil.copytree(src, ref)
    mrun.run_untraced_local(ref)
    return {"src": src, "pairs": pairs, "ref": ref}


def _stage_rows(db, run):
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT t.stage, t.name, h.name FROM tasks t JOIN hosts h ON h.id = t.host_id "
                           "JOIN runs r ON r.id = t.run_id WHERE r.name = ?", (run,)).fetchall()
    finally:
        con.close()


def _tasks(db, run):
    from mtcio.db.api import Store
    with Store(db) as s:
        t = s.tasks(run)
        st = s.stages(run).set_index("stage")
    return t, st


def _diff_offsets(folder, sub, pairs):
    """|median of (plus - minus)| over each overlap, from mDiff run here on the images of `sub`."""
    out = []
    for a, b in pairs:
        dst = os.path.join(folder, f"chk.{sub}.{a}.{b}.fits")
        r = subprocess.run(["mDiff", f"{sub}/{a}.fits", f"{sub}/{b}.fits", dst, "template.hdr"], cwd=folder,
                           capture_output=True, text=True)
        assert 'stat="OK"' in r.stdout, r.stdout + r.stderr
        _, d = sky.read_fits(dst)
        d = d[np.isfinite(d) & (d != 0)]
        out.append(abs(float(np.median(d))))
    return out


def _run(testbed, tiny, tmp_path, placement, run):
    hosts = testbed.hosts[:2]
    top = f"/montage-{os.getpid()}-{run}"
    bed = mrun.Bed(testbed.hosts, {h: testbed.mount(h) for h in testbed.hosts}, testbed.user)
    home = mrun.stage_inputs(bed, top, tiny["src"], hosts)
    for t, h in home.items():
        assert testbed.where(f"{top}/raw/{t}") == [h]
    logs = mrun.make_logdir(bed)
    db = str(tmp_path / "m.db")
    try:
        res = mrun.run_workflow(bed, top, hosts, run=run, db=db, logdir=logs, placement=placement, slots=2)
    finally:
        shutil.rmtree(logs, ignore_errors=True)
    assert f"mtcprof: run {run} stored in {db}" in res.stderr, res.stderr
    return bed, top, home, db


def test_tiny_mosaic_with_placement(testbed, tiny, tmp_path):
    bed, top, home, db = _run(testbed, tiny, tmp_path, "with", "tiny")
    try:
        m0 = testbed.mount(testbed.hosts[0]) + top
        overlaps = [l for l in open(m0 + "/diffs.tbl") if l.strip() and not l.startswith(("|", "\\"))]
        assert len(overlaps) == len(tiny["pairs"]) == 6
        rows = _stage_rows(db, "tiny")
        count = {}
        for stage, _, _ in rows:
            count[stage] = count.get(stage, 0) + 1
        assert count == {"mImgtbl-raw": 1, "mMakeHdr": 1, "mProjectPP": 4, "mImgtbl-proj": 1, "mOverlaps": 1,
                         "mDiff": 6, "mFitplane": 6, "concatFit": 1, "mBgModel": 1, "mBackground": 4,
                         "mImgtbl-corr": 1, "mAdd": 1, "mShrink": 1, "mViewer": 1}
        assert len({t for _, t, _ in rows}) == len(rows)       # every task once
        # the mosaic is the untraced run's, pixel for pixel
        h_ref, ref = sky.read_fits(os.path.join(tiny["ref"], "mosaic.fits"))
        h_got, got = sky.read_fits(m0 + "/mosaic.fits")
        assert ref.shape == got.shape and ref.size > 0
        assert np.array_equal(ref, got, equal_nan=True)
        assert open(m0 + "/mosaic.png", "rb").read(8) == b"\x89PNG\r\n\x1a\n"
        # background offsets between tiles: before (projected) and after (corrected), checked in the reference
        before = _diff_offsets(tiny["ref"], "proj", tiny["pairs"])
        after = _diff_offsets(tiny["ref"], "corr", tiny["pairs"])
        assert np.median(before) > 20 and np.median(after) < np.median(before) / 4, (before, after)
        # locality: every mProjectPP ran where its tile is stored and read only local replicas
        tasks, stages = _tasks(db, "tiny")
        proj = tasks[tasks["stage"] == "mProjectPP"]
        assert {n: h for n, h in zip(proj["name"], proj["host"])} == \
            {f"proj/{t}": h for t, h in home.items()}
        assert stages.loc["mProjectPP", "alpha"] == 1.0
        assert stages.loc["mProjectPP", "read_1to1_files"] == 4
    finally:
        testbed.exec(testbed.hosts[0], ["rm", "-rf", testbed.mount(testbed.hosts[0]) + top], check=False)


def test_placement_against_the_data(testbed, tiny, tmp_path):
    bed, top, home, db = _run(testbed, tiny, tmp_path, "against", "against")
    try:
        hosts = testbed.hosts[:2]
        tasks, stages = _tasks(db, "against")
        proj = tasks[tasks["stage"] == "mProjectPP"]
        other = {h: hosts[(hosts.index(h) + 1) % 2] for h in hosts}
        assert {n: h for n, h in zip(proj["name"], proj["host"])} == \
            {f"proj/{t}": other[h] for t, h in home.items()}
        assert stages.loc["mProjectPP", "alpha"] == 0.0
        assert stages.loc["mProjectPP", "read_1to1_files"] == 4
        assert int(stages.loc["mBackground", "tasks"]) == 4 and int(stages.loc["mDiff", "tasks"]) == 6
    finally:
        testbed.exec(testbed.hosts[0], ["rm", "-rf", testbed.mount(testbed.hosts[0]) + top], check=False)
