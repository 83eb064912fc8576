"""`make demo` (montage_example/demo.py), the README's first command, end to end on a real testbed: the tiny sky,
the demo's own sweep, Montage twice under rake, each run predicted from the other's model, the page, the testbed
down after. ~3 minutes, most of it the envelope sweep."""
import json
import os
import sqlite3
import subprocess
import sys

import pytest

pytestmark = pytest.mark.testbed   # brings a testbed up and tears it down

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = [sys.executable, os.path.join(REPO, "montage_example", "demo.py")]
RUNS = ("montage-demo", "montage-demo-2")
# the tiny preset: 4 tiles, 6 overlaps
TASKS = {"mImgtbl-raw": 1, "mMakeHdr": 1, "mProjectPP": 4, "mImgtbl-proj": 1, "mOverlaps": 1, "mDiff": 6,
         "mFitplane": 6, "concatFit": 1, "mBgModel": 1, "mBackground": 4, "mImgtbl-corr": 1, "mAdd": 1,
         "mShrink": 1, "mViewer": 1}


def _demo(out, timeout=900):
    env = {k: v for k, v in os.environ.items() if k not in ("PWRAKE_SRC", "MTCIO_DEBUG")}
    env["PATH"] = ":".join(p for p in env.get("PATH", "").split(":") if not os.path.isfile(os.path.join(p, "pwrake")))
    return subprocess.run(DEMO + ["--preset", "tiny", "--out", str(out)], capture_output=True, text=True,
                          timeout=timeout, env=env)


def _netns():
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()


def test_demo_end_to_end(bare_machine, tmp_path):
    out = tmp_path / "demo"
    r = _demo(out)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    steps = [l for l in r.stdout.splitlines() if l.startswith("[") and "/10] " in l]
    assert len(steps) == 10 and steps[-1].startswith("[10/10] testbed down")
    assert not [n for n in _netns() if n.startswith("mtc-")]            # torn down
    assert "  4 tiles of " in r.stdout and ", 6 overlaps planned" in r.stdout

    with sqlite3.connect(out / "mtc.db") as db:
        for run in RUNS:
            got = dict(db.execute("SELECT stage, COUNT(*) FROM tasks JOIN runs ON runs.id = tasks.run_id "
                                  "WHERE runs.name = ? GROUP BY stage", (run,)).fetchall())
            assert got == TASKS, run
    # each run validated against the other run's model, never its own
    for folder, validated in (("predict", RUNS[1]), ("predict-2", RUNS[0])):
        res = json.loads((out / folder / "prediction.json").read_text())
        assert res["validated_runs"] == [validated]
        refined = {p["stage"]: p for p in res["predictions"] if p["variant"] == "refined"}
        assert set(refined) == set(TASKS)
        assert all(p["measured_s"] > 0 and p["total_s"] > 0 for p in refined.values())

    summary = r.stdout[r.stdout.index("Montage tiny preset"):]
    rows = {l.split()[0]: l.split() for l in summary.splitlines() if l.split() and l.split()[0] in TASKS}
    assert set(rows) == set(TASKS)
    assert all(int(rows[s][1]) == n for s, n in TASKS.items())
    assert "|error| over 28 stage-runs median" in summary and "differ by median" in summary
    page = (out / "index.html").read_text()
    assert all(f"run {run}" in page for run in RUNS) and page.count("<tr><td>") == len(TASKS)
    assert (out / "mosaic.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo_refuses_a_testbed_already_up_and_leaves_it(testbed, tmp_path):
    r = _demo(tmp_path / "demo", timeout=120)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1] == ("make demo: step 1 (testbed up (4 hosts)): a testbed is already up "
                                                 "(another demo or test run?); `mtcbed down` first")
    assert "testbed down" not in r.stdout                                  # not its testbed: left up
    assert [n for n in _netns() if n.startswith("mtc-")]
