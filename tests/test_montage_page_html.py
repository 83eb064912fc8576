"""The demo's page built from stored outputs (no testbed): a real traced run in a real db, a real `mtcpredict --out`
and `mtcprof report` beside synthetic prediction files.  Self-contained (its figures embedded, no frames), 0600,
units in every cell, the paper's α only where the paper gives one (with its footnote), every dash explained."""
import json
import os
import re
import stat
import subprocess
import sys

import pytest

from helpers.cli import MONTAGE, predict
from helpers.tracing import traced

from montage_example import page

BIN = os.path.dirname(sys.executable)
RUNS = ("R", "R-2")
INFO = {"preset": "tiny", "small": {"m4": 4, "m9": 9}, "large": 16, "overlaps": {16: 42}, "hosts": 4, "slots": 2,
        "walls_s": {"m4": 3.9, "m9": 6.7, "R": 18.0, "R-2": 18.7}, "predicted_at_s": 173.2, "launched_at_s": 174.6,
        "steps": {"the demo page": 0.1}}


def built(out):
    """OUT as the demo leaves it, the runs replaced by a small traced run R of stages mProjectPP and mShrink."""
    logs, d = out / "logs", out / "d"
    d.mkdir(), logs.mkdir()
    (d / "in").write_bytes(os.urandom(300_000))
    assert traced(logs, ["sh", "-c", f"cat {d}/in > {d}/p1"], "t1", "mProjectPP", "R").returncode == 0
    assert traced(logs, ["sh", "-c", f"cat {d}/p1 > {d}/s"], "t2", "mShrink", "R").returncode == 0
    db = out / "t.db"
    r = subprocess.run([os.path.join(BIN, "mtcprof"), "ingest", str(logs), "--db", str(db), "--gfwhere-cmd", "none"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([os.path.join(BIN, "mtcprof"), "report", "--db", str(db), "--run", "R", "-o",
                        str(out / "profile")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert predict(MONTAGE, "--out", out / page.VALIDATED, "--bootstrap", "0").returncode == 0
    # the validated folder's measurements: mProjectPP measured in both runs, mShrink in one
    res = json.loads((out / page.VALIDATED / "prediction.json").read_text())
    res["measured"] = {"mProjectPP": {"measured_s": 0.25, "repeats": [0.2, 0.3]},
                       "mShrink": {"measured_s": 0.01, "repeats": [0.01]}}
    (out / page.VALIDATED / "prediction.json").write_text(json.dumps(res))
    (out / page.PREDICTED).mkdir()
    (out / page.PREDICTED / "prediction.json").write_text(json.dumps(
        {"predictions": [{"stage": "mProjectPP", "variant": "refined", "N": 1, "total_s": 0.2015}], "measured": {},
         "at": {"notes": ["graph: every stage's task count from rake -P"]}}))
    return db


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    db = built(out)
    path, summary = page.write(str(out), str(db), RUNS, INFO)
    return out, open(path).read()


def _rows(html):
    return [re.findall(r"<td[^>]*>(.*?)</td>", tr) for tr in re.findall(r"<tr><td>.*?</tr>", html)]


def test_page_is_private_and_self_contained(demo):
    out, html = demo
    assert stat.S_IMODE(os.stat(out / "index.html").st_mode) == 0o600
    assert "<iframe" not in html
    srcs = re.findall(r"src='([^']*)'", html)
    # maps, stage times, the timeline: every image in the page itself (no parity: the report was not validated)
    assert len(srcs) == 3 and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert [a for a in re.findall(r"alt='([^']*)'", html)] == ["validated/maps.png", "validated/stage_time.png",
                                                                "profile/timeline.png"]
    assert "chmod -R go+rX" in html          # how to serve the linked reports


def test_stage_rows_have_units_and_the_paper_only_where_it_gives_a_value(demo):
    _, html = demo
    rows = {r[0]: r for r in _rows(html)}
    assert sorted(rows) == ["mProjectPP", "mShrink"]
    p = rows["mProjectPP"]
    assert (p[1], p[5], p[6], p[7], p[8], p[9], p[10], p[11]) == (
        "1", "293.0 KiB", "293.0 KiB", "0.20 s", "0.20 s", "0.30 s", "<b>-19 %</b>", "40 %")
    assert p[3] == "– <small>(paper 94 %<sup>*</sup>)</small>"     # no 1-to-1 Gfarm read here: no α of ours
    assert "paper" not in rows["mShrink"][3]
    assert html.count("<sup>*</sup>") == 2 and "<th>paper</th>" not in html      # the row's and the footnote's


def test_every_dash_is_explained(demo):
    _, html = demo
    dashed = {page.COLUMNS[i] for r in _rows(html) for i, c in enumerate(r) if c.split(" <small>")[0] == "–"}
    assert {"predicted tasks", "predicted", "run", "error", "spread", "baseline", "α"} <= dashed
    explained = set(re.findall(r"<li><b>–</b> in <i>([^<]*)</i>", html))
    assert explained == dashed
