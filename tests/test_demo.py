"""`make demo` (montage_example/demo.py), the README's first command, end to end on a real testbed: the tiny
preset's skies (4 and 9 tiles traced, 16 predicted before it runs, then run twice), the demo's own sweep, Montage
under rake, the page, the testbed down after. ~4 minutes, most of it the envelope sweep."""
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.testbed   # brings a testbed up and tears it down

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = [sys.executable, os.path.join(REPO, "montage_example", "demo.py")]
# the tiny preset: tiles -> overlaps of its square grids (4n - 6 sqrt(n) + 2)
OVERLAPS = {4: 6, 9: 20, 16: 42}
RUNS = {"montage-4": 4, "montage-9": 9, "montage-16": 16, "montage-16-2": 16}
LARGE = ("montage-16", "montage-16-2")


def tasks(tiles):
    n = OVERLAPS[tiles]
    return {"mImgtbl-raw": 1, "mMakeHdr": 1, "mProjectPP": tiles, "mImgtbl-proj": 1, "mOverlaps": 1, "mDiff": n,
            "mFitplane": n, "concatFit": 1, "mBgModel": 1, "mBackground": tiles, "mImgtbl-corr": 1, "mAdd": 1,
            "mShrink": 1, "mViewer": 1}


def _demo(out, *extra, timeout=900):
    env = {k: v for k, v in os.environ.items() if k not in ("PWRAKE_SRC", "MTCIO_DEBUG")}
    env["PATH"] = ":".join(p for p in env.get("PATH", "").split(":") if not os.path.isfile(os.path.join(p, "pwrake")))
    return subprocess.run(DEMO + ["--preset", "tiny", "--out", str(out), *extra], capture_output=True, text=True,
                          timeout=timeout, env=env)


def _netns():
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()


def _json(path):
    return json.loads(path.read_text())


def test_demo_end_to_end(bare_machine, tmp_path):
    out = tmp_path / "demo"
    res = tmp_path / "results.json"
    res.write_text((Path(REPO) / "montage_example" / "results.json").read_text())
    r = _demo(out, "--results", str(res))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    steps = [l for l in r.stdout.splitlines() if l.startswith("[") and "/13] " in l]
    assert len(steps) == 13 and steps[-1].startswith("[13/13] testbed down")
    # predicted (step 8) before either 16-tile run (steps 9, 10)
    assert steps[7].startswith("[8/13] rake -P at 16 tiles, mtcpredict --at size=16: predicted before it runs")
    assert [s.split("  (t =")[0] for s in steps[8:10]] == [
        f"[{i}/13] Montage at 16 tiles, run {run}, under rake with the mtcio plugin and placement"
        for i, run in ((9, LARGE[0]), (10, LARGE[1]))]
    assert not [n for n in _netns() if n.startswith("mtc-")]            # torn down
    for k, n in OVERLAPS.items():
        assert f"  {k} tiles of " in r.stdout and f", {n} overlaps planned" in r.stdout

    with sqlite3.connect(out / "mtc.db") as db:
        for run, k in RUNS.items():
            got = dict(db.execute("SELECT stage, COUNT(*) FROM tasks JOIN runs ON runs.id = tasks.run_id "
                                  "WHERE runs.name = ? GROUP BY stage", (run,)).fetchall())
            assert got == tasks(k), run
        first_start = db.execute("SELECT MIN(start_ns) FROM tasks JOIN runs ON runs.id = tasks.run_id WHERE "
                                 "runs.name IN (?, ?)", LARGE).fetchone()[0] / 1e9
    graph = (out / "graph-16.txt").read_text().splitlines()
    assert len([l for l in graph if l[:1] not in " \t"]) == sum(tasks(16).values()) + 1     # + rake's default

    # the prediction, on disk before any 16-tile task started, knew no measurement
    pred_path = out / "predicted" / "prediction.json"
    assert os.path.getmtime(pred_path) < first_start
    pred = _json(pred_path)
    assert pred["validated_runs"] == [] and pred["measured"] == {}
    assert {k: pred["at"][k] for k in ("size", "hosts", "procs")} == {"size": 16, "hosts": 4, "procs": 2}
    predicted = {p["stage"]: p for p in pred["predictions"]}
    assert {st: p["N"] for st, p in predicted.items()} == tasks(16)
    assert all(p["total_s"] > 0 for p in predicted.values())
    assert "mDiff" in (out / "predicted" / "table.txt").read_text()

    # the same prediction validated against both runs; the baseline: the first run's own model -> the second
    val = _json(out / "validated" / "prediction.json")
    assert val["validated_runs"] == list(LARGE)
    assert {p["stage"]: p["total_s"] for p in val["predictions"]} == {st: p["total_s"] for st, p in predicted.items()}
    reps = {st: m["repeats"] for st, m in val["measured"].items()}
    assert set(reps) == set(tasks(16)) and all(len(x) == 2 and min(x) > 0 for x in reps.values())
    base = _json(out / "baseline" / "prediction.json")
    assert base["validated_runs"] == [LARGE[1]] and "at" not in base
    assert f"\nrun: {LARGE[0]}\n" in (out / "baseline.yaml").read_text()
    baseline = {p["stage"]: p["total_s"] for p in base["predictions"]}

    summary = r.stdout[r.stdout.index("Montage tiny preset"):]
    rows = {l.split()[0]: l.split() for l in summary.splitlines() if l.split() and l.split()[0] in tasks(16)}
    assert set(rows) == set(tasks(16))
    for st, n in tasks(16).items():
        assert rows[st][1:5] == [str(n), f"{predicted[st]['total_s']:.3f}", f"{reps[st][0]:.3f}",
                                 f"{reps[st][1]:.3f}"], st
        assert rows[st][7] == f"{baseline[st]:.3f}", st
    total = sum(p["total_s"] for p in predicted.values())
    assert (f"whole workflow, I/O time summed over 14 stages: predicted {total:.2f} s, measured "
            f"{sum(x[0] for x in reps.values()):.2f} s and {sum(x[1] for x in reps.values()):.2f} s") in summary
    assert "per-stage |error| median " in summary and " over 14 stages, against the mean of the two runs" in summary
    assert f"same-configuration baseline (run {LARGE[0]}'s own model -> run {LARGE[1]}): per-stage" in summary
    page = (out / "index.html").read_text()
    assert page.count("<tr><td>") == len(tasks(16)) and page.count("<td>whole workflow</td>") == 1
    assert all(f"<code>{run}</code>" in page for run in RUNS)
    assert (out / "mosaic.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # --results: this demo first in the results file's demo section, its figures those of the summary
    demo = _json(res)["demo"]
    assert demo["command"] == "python montage_example/demo.py --preset tiny"
    entry = demo["runs"][0]
    assert {k: entry[k] for k in ("preset", "small", "large", "hosts", "slots", "launcher", "stages")} == {
        "preset": "tiny", "small": [4, 9], "large": 16, "hosts": 4, "slots": 2, "launcher": "rake with placement",
        "stages": 14}
    # the entry holds the summary's figures to 0.1 (the summary prints them whole)
    said = re.search(r"per-stage \|error\| median (\d+) %, p90 (\d+) % over 14 stages", summary).groups()
    whole = re.search(r"error ([+-]\d+) %, the runs' spread (\d+) %", summary).groups()
    for key, text in zip(("median", "p90", "whole_pct", "whole_spread_pct"), said + whole):
        assert entry[key] == round(entry[key], 1) and abs(entry[key] - int(text)) <= 0.55, (key, entry[key], text)
    assert len(entry["walls_s"]) == 2
    assert f"the demo's figures written into {res}" in r.stdout


def test_demo_refuses_a_testbed_already_up_and_leaves_it(testbed, tmp_path):
    r = _demo(tmp_path / "demo", timeout=120)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1] == ("make demo: step 1 (testbed up (4 hosts)): a testbed is already up "
                                                 "(another demo or test run?); `mtcbed down` first")
    assert "testbed down" not in r.stdout                                  # not its testbed: left up
    assert [n for n in _netns() if n.startswith("mtc-")]
