"""montage_example/RESULTS.md is what its results file renders; the generator's input errors; a bench's update."""
import json
import subprocess
import sys
from pathlib import Path

from montage_example import results

ROOT = Path(__file__).resolve().parents[1]
GEN = [sys.executable, "-m", "montage_example.results"]


def test_committed_page_is_what_the_committed_results_render():
    page = (ROOT / "montage_example" / "RESULTS.md").read_text(encoding="utf-8")
    assert results.render(results.load(str(ROOT / "montage_example" / "results.json"))) == page
    cp = subprocess.run(GEN + ["--check"], cwd=ROOT, capture_output=True, text=True)
    assert (cp.returncode, cp.stderr) == (0, "")


def test_check_says_when_the_page_differs(tmp_path):
    page = tmp_path / "R.md"
    page.write_text("# old\n")
    cp = subprocess.run(GEN + ["--check", "-o", str(page)], cwd=ROOT, capture_output=True, text=True)
    assert cp.returncode == 1
    assert cp.stderr == f"montage_example.results: {page} is not what {results.RESULTS} renders (run without --check)\n"
    assert page.read_text() == "# old\n"


def test_bad_results_files_are_one_line_errors(tmp_path):
    bad = tmp_path / "r.json"
    bad.write_text("{not json")
    cp = subprocess.run(GEN + ["--results", str(bad), "-o", "-"], cwd=ROOT, capture_output=True, text=True)
    assert (cp.returncode, cp.stdout) == (2, "")
    assert cp.stderr == f"montage_example.results: {bad}: not JSON (Expecting property name enclosed in double " \
                        "quotes, line 1)\n"
    data = json.loads((ROOT / "montage_example" / "results.json").read_text())
    del data["scale"]["passes"][0]["commit"]
    bad.write_text(json.dumps(data))
    cp = subprocess.run(GEN + ["--results", str(bad), "-o", "-"], cwd=ROOT, capture_output=True, text=True)
    assert (cp.returncode, cp.stdout) == (2, "")
    assert cp.stderr == f"montage_example.results: {bad}: a field of the wrong shape (KeyError: 'commit')\n"
    cp = subprocess.run(GEN + ["--results", str(tmp_path / "none.json")], cwd=ROOT, capture_output=True, text=True)
    assert (cp.returncode, cp.stderr) == (2, f"montage_example.results: {tmp_path / 'none.json'}: No such file or "
                                             "directory\n")


def test_a_new_pass_puts_the_notes_under_the_pass_they_were_written_on(tmp_path):
    """What a bench's --results does: a new pass first in its section; the page then says the notes are older."""
    path = tmp_path / "r.json"
    path.write_text((ROOT / "montage_example" / "results.json").read_text())
    newest = {"pass": "3", "commit": "abc1234", "when": "2026-12-02 01:00-01:08", "seconds": 480,
              "conditions": "load 2.0-2.4",
              "targets": [{"target": "64 tiles x 4 hosts", "graph": [21, 50, 2.25], "fits": [20, 49, -1.0],
                           "baseline": [19, 40, -3.0], "spread": [7, 22]}]}
    results.update(str(path), "scale", lambda s: s["passes"].insert(0, newest))
    page = results.render(results.load(str(path)))
    assert "| 64 tiles x 4 hosts | 3 | 21 % / 50 % / +2.2 % | 20 / 49 / -1.0 % | 19 / 40 / -3.0 % | 7 / 22 % |\n" \
           "|  | 2 | 19 % / 56 % / +1.5 % |" in page
    assert "Notes written on pass 2, before pass 3's figures:\n- Targets" in page
    assert page.count("| 100 tiles x 3 hosts | 2 |") == 1


def test_an_overhead_row_replaces_the_row_of_its_command(tmp_path):
    path = tmp_path / "r.json"
    path.write_text((ROOT / "montage_example" / "results.json").read_text())
    cmd = "python tests/bench/montage_overhead.py --preset demo --repeat 15"
    results.set_overhead_row(str(path), {"command": cmd, "what": "9 tiles", "ratio": 1.0104, "detail": "rounds x"})
    results.set_overhead_row(str(path), {"command": "python tests/bench/montage_overhead.py", "what": "new",
                                         "ratio": 0.99, "detail": "rounds y"})
    rows = results.load(str(path))["overhead"]["rows"]
    assert [r["command"] for r in rows] == ["python tests/bench/montage_overhead.py --preset paper --repeat 11", cmd,
                                            "BENCH_DISK_REPS=0 BENCH_GFARM_REPS=0 python tests/bench/shim_bench.py",
                                            "python tests/bench/montage_overhead.py"]
    page = results.render(results.load(str(path)))
    assert f"| `{cmd}` | 9 tiles | 1.010 (rounds x) |\n" in page


def test_the_command_shown_names_no_folder():
    assert results.command_line("tests/bench/montage_predict.py", ["--keep", "/var/x", "--results", "r.json",
                                                                   "--pass=AX", "--repeat", "4", "--predict-only=/y",
                                                                   "--", "--bootstrap", "0"]) == \
        "python tests/bench/montage_predict.py --keep DIR --repeat 4 --predict-only=DIR -- --bootstrap 0"


def test_a_demo_entry_is_one_row_of_the_demo_table(tmp_path):
    path = tmp_path / "r.json"
    path.write_text((ROOT / "montage_example" / "results.json").read_text())
    entry = {"when": "2026-12-02 07:00", "preset": "demo", "small": [4, 9], "large": 25, "hosts": 4, "slots": 2,
             "launcher": "rake with placement", "seconds": 186, "walls_s": [4.6, 4.4], "stages": 14, "median": 22.4,
             "p90": 61.0, "spread_median": 20.2, "spread_max": 112.0, "whole_pct": 11.2, "whole_spread_pct": 4.0,
             "baseline_median": 23.0, "baseline_p90": 70.1, "baseline_whole_pct": -3.4, "load": 1.5}
    results.update(str(path), "demo", lambda s: s.update(runs=[entry]))
    page = results.render(results.load(str(path)))
    assert ("| 2026-12-02 07:00 | demo: 4, 9 -> 25 tiles | rake with placement | 186 s | 4.6 s and 4.4 s | 22 % (61 %) "
            "over 14 | +11 % (spread 4 %) | 20 % (112 %) | 23 % (70 %), -3 % | 1.5 |") in page
    assert "No demo recorded yet" not in page
