"""Trace small, predict large on stored runs (no testbed): the model of a 16-tile run on 2 hosts, told its size,
predicts 64 tiles on 4 hosts. Multiplying the task counts (`--what-if hosts=4 tasks=x4`) left every one-task stage
reading what it read at 16 tiles (the old way, checked to fail here). The model that scales gives them their
gathered inputs: none of them (of 50 ms or more) is predicted more than 30 % under what the 64-tile run's own
model predicts with the same envelope (the scaling's share of the error), and together they are not more than
30 % under the measured I/O time.
"""
import gzip
import json
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "fixtures", "scale", "montage-16x2-64x4.db.gz")
BIN = os.path.dirname(sys.executable)


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "m.db"
    with gzip.open(FIXTURE) as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return str(path)


def run(*argv):
    r = subprocess.run([os.path.join(BIN, argv[0]), *argv[1:]], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r


def predictions(r, key="predictions"):
    return {p["stage"]: p for p in json.loads(r.stdout)[key] if p.get("variant", "refined") == "refined"}


def test_16_tiles_predict_64_without_under_predicting_the_one_task_stages(db, tmp_path):
    envs = ["--envelope", f"{db}:bed4", "--envelope", f"{db}:bed4-8k"]
    one = str(tmp_path / "one.yaml")
    run("mtcprof", "model", "--db", db, "--run", "m16x2", "--size", "m16x2=16", "-o", one)
    r = run("mtcpredict", one, "--at", "size=64", "hosts=4", *envs, "--validate", f"{db}:m64x4", "--variant",
            "refined", "--bootstrap", "0", "--json", "--out", str(tmp_path / "p"))
    assert "task counts extrapolated from the fits differ from the run's: compared anyway" in r.stderr
    new = predictions(r)
    page = (tmp_path / "p" / "report.html").read_text()
    assert "<b>Predicted at size 64 on 4 hosts x 2 slots</b>, from a model fitted over traced runs" in page
    assert "<li>one size traced: fan-out stages&#x27; task counts and gathered inputs taken proportional" in page
    single = [s for s, p in new.items() if p["N"] == 1]
    assert len(single) == 10 and {new[s]["N"] for s in ("mProjectPP", "mBackground")} == {64}
    measured = {s: new[s]["measured_s"] for s in new}
    from mtcio.db.workflow_model import load
    at = load(str(tmp_path / "p" / "model-at.yaml"))
    big = str(tmp_path / "big.yaml")            # the 64-tile run's own model: what its gathers really read
    run("mtcprof", "model", "--db", db, "--run", "m64x4", "-o", big)
    real = load(big)
    gathers = ("mImgtbl-raw", "mImgtbl-proj", "mImgtbl-corr", "mAdd")
    assert [at.stage(s).read.files_per_task for s in gathers] == [real.stage(s).read.files_per_task
                                                                  for s in gathers] == [64, 64, 64, 130]
    own = predictions(run("mtcpredict", big, *envs, "--variant", "refined", "--bootstrap", "0", "--json"))
    for s in single:
        if measured[s] >= 0.05:
            assert new[s]["total_s"] >= 0.7 * own[s]["total_s"], (s, new[s]["total_s"], own[s]["total_s"])
    total = sum(new[s]["total_s"] for s in single) / sum(measured[s] for s in single)
    assert total >= 0.7, total

    plain = str(tmp_path / "plain.yaml")       # the old way: the 16-tile model with 4x the tasks of every stage
    run("mtcprof", "model", "--db", db, "--run", "m16x2", "-o", plain)
    old = predictions(run("mtcpredict", plain, *envs, "--variant", "refined", "--bootstrap", "0", "--json",
                          "--what-if", "hosts=4", "tasks=x4"), "what_if")
    assert sum(old[s]["total_s"] for s in single) / sum(measured[s] for s in single) < 0.5
    assert old["mAdd"]["total_s"] < 0.3 * own["mAdd"]["total_s"]


def test_refusals_on_stored_runs(db, tmp_path):
    out = tmp_path / "m.yaml"
    r = subprocess.run([os.path.join(BIN, "mtcprof"), "model", "--db", db, "--run", "m16x2,m64x4", "--size",
                        "m16x2=64,m64x4=16", "-o", str(out)], capture_output=True, text=True)
    assert (r.returncode, r.stderr) == (2, "mtcprof model: --size: run 'm16x2' is given the larger size (64 > 16) "
                                           "but has fewer tasks than 'm64x4' (126 < 558): sizes must grow with the "
                                           "runs\n")
    assert not out.exists()
    run("mtcprof", "model", "--db", db, "--run", "m16x2", "--size", "m16x2=16", "-o", str(out))
    for argv, said in ((["--at", "size=129"], "size 129 is more than 8x outside the traced sizes (16); --force to "
                                               "predict it anyway"),
                       (["--what-if", "size=1.9"], "size 1.9 is more than 8x outside the traced sizes (16); --force "
                                                   "to predict it anyway"),
                       (["--at", "size=64", "hosts=0"], "--at 'hosts=0': hosts takes a whole number >= 1"),
                       (["--at", "size=64", "--tasks-from", str(tmp_path / "none.txt")],
                        f"{tmp_path / 'none.txt'}: cannot read (No such file or directory)")):
        r = subprocess.run([os.path.join(BIN, "mtcpredict"), str(out), *argv, "--out", str(tmp_path / "o")],
                           capture_output=True, text=True)
        assert (r.returncode, r.stderr) == (2, f"mtcpredict: {said}\n"), argv
        assert not (tmp_path / "o").exists()
    r = subprocess.run([os.path.join(BIN, "mtcpredict"), str(out), "--at", "size=129", "--force", "--bootstrap", "0",
                        "--envelope", f"{db}:bed4", "--json"], capture_output=True, text=True)
    assert r.returncode == 0 and json.loads(r.stdout)["at"]["size"] == 129
