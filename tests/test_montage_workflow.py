"""montage_example without the testbed: the synthetic sky is valid FITS that Montage reads, the Rakefile's task
graph (`rake -P`, what `mtcpredict --tasks-from` reads) has one mDiff task per overlap Montage finds, and the
whole Rakefile runs under plain Rake to a mosaic whose background offsets shrink."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from montage_example import prepare, sky  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("mProjectPP") is None or shutil.which("rake") is None,
                                reason="needs Debian's montage and rake")


def test_sky_tiles_are_fits_montage_reads(tmp_path):
    s = sky.make_sky(str(tmp_path / "raw"), tiles=3, width=40, height=30)
    assert s.tiles == ["tile000.fits", "tile001.fits", "tile002.fits"]
    assert len(set(round(b) for b in s.backgrounds)) == 3
    for t in s.tiles:
        path = tmp_path / "raw" / t
        assert os.path.getsize(path) == 2880 + 2880 * 2           # header block + 4800 B of data, padded
        cards, data = sky.read_fits(str(path))
        assert (cards["CTYPE1"], cards["CTYPE2"], cards["NAXIS1"], cards["NAXIS2"]) == ("RA---TAN", "DEC--TAN",
                                                                                          "40", "30")
        assert data.shape == (30, 40) and data.max() > data.mean() + 10       # stars above the background
    r = subprocess.run(["mImgtbl", str(tmp_path / "raw"), str(tmp_path / "t.tbl")], capture_output=True, text=True)
    assert 'stat="OK"' in r.stdout and "count=3, nfile=3, nhdu=3, badfits=0, badwcs=0" in r.stdout, r.stdout


@pytest.mark.parametrize("tiles,expect", [(4, 6), (6, 11), (9, 20)])
def test_the_task_graph_has_the_overlaps_montage_finds(tmp_path, tiles, expect):
    from mtcio.db import taskgraph
    pairs = prepare.prepare(str(tmp_path), "tiny", tiles=tiles)
    found = prepare.plan_overlaps(str(tmp_path / "raw"))
    r = subprocess.run(["rake", "-P"], cwd=tmp_path, capture_output=True, text=True, check=True)
    graph = taskgraph.parse(r.stdout)
    diffs = sorted(t for t in graph if t.startswith("diffs/diff."))
    assert len(found) == len(pairs) == len(diffs) == expect
    assert sum(1 for t in graph if t.startswith("proj/")) == tiles
    assert graph["mosaic.fits"] == ["corr.tbl", "template.hdr"]


def test_rakefile_under_plain_rake(tmp_path):
    folder = str(tmp_path / "w")
    pairs = prepare.prepare(folder, "tiny")
    r = subprocess.run(["rake", "-m", "-j", "2"], cwd=folder, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(folder, "fits.tbl")) as fh:
        rows = [line for line in fh if not line.startswith("|")]
    assert len(rows) == len(pairs) == 6
    with open(os.path.join(folder, "corrections.tbl")) as fh:
        assert len([line for line in fh if not line.startswith("|")]) == 4
    for sub in ("proj", "corr"):
        assert sorted(f for f in os.listdir(os.path.join(folder, sub)) if not f.endswith("_area.fits")) == \
            [f"tile00{i}.fits" for i in range(4)]
    _, mosaic = sky.read_fits(os.path.join(folder, "mosaic.fits"))
    assert mosaic.shape == (174, 174) and np.isfinite(mosaic).mean() > 0.95
    with open(os.path.join(folder, "mosaic.png"), "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    # concatFit refuses overlaps other than the planned ones
    os.remove(os.path.join(folder, "fits", sorted(os.listdir(os.path.join(folder, "fits")))[0]))
    r = subprocess.run(["python3", "concat_fits.py", "proj.tbl", "diffs.tbl", "fits", "x.tbl"], cwd=folder,
                       capture_output=True, text=True)
    assert r.returncode == 1 and "mOverlaps found 6 overlaps, the workflow planned 5" in r.stderr, r.stderr
