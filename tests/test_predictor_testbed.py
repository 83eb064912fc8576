"""mtcpredict end to end on the real testbed: an envelope measured there, a synthetic write stage traced by the
shim there, `mtcprof model`, then `mtcpredict --validate` storing predictions and validations."""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

import pytest

import synthstage

pytestmark = pytest.mark.testbed


def cli(name, *args):
    return subprocess.run([sys.executable, "-c", f"import sys; from mtcio.cli import {name}; sys.exit({name}())",
                           *map(str, args)], capture_output=True, text=True)


def test_write_stage_predicted_and_validated(testbed, tmp_path):
    share = tempfile.mkdtemp(prefix="mtcpredict-bed.")
    try:
        lib = synthstage.prepare_share(share)
        logdir = synthstage.make_logdir(testbed, os.path.join(share, "logs"))
        db = tmp_path / "bed.db"
        r = cli("mtcenvelope", "measure", "--db", db, "--name", "env", "--host-counts", "2", "--sizes", "256k,1m",
                "--procs", "1,2", "--metrics", "Tm,TL,BL", "--repeat", "2", "--precision", "0", "--quiet")
        assert r.returncode == 0, r.stderr
        st = synthstage.run_stage(testbed, lib, logdir, kind="write", N=8, C=2, ppn=2, size=1 << 20, run="w1",
                                  stage="write1m")
        synthstage.ingest(testbed, logdir, str(db), "w1")
        wf = tmp_path / "wf.yaml"
        r = cli("mtcprof", "model", "--db", db, "--run", "w1", "-o", wf)
        assert r.returncode == 0, r.stderr
        for _ in range(2):     # predicting again replaces the stored prediction, it does not add one
            r = cli("mtcpredict", wf, "--envelope", f"{db}:env", "--validate", f"{db}:w1", "--json",
                    "--bootstrap", "20")
            assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout)
        rows = {d["variant"]: d for d in res["predictions"]}
        assert set(rows) == {"faithful", "refined"}
        for d in rows.values():
            assert d["stage"] == "write1m" and d["N"] == 8 and d["C"] == 2
            assert d["write_s"] > 0 and d["read_s"] == 0
            assert d["measured_s"] > 0 and d["error_pct"] == pytest.approx(100 * (d["total_s"] / d["measured_s"] - 1))
        assert rows["refined"]["slots"] == 4 and rows["faithful"]["slots"] == 2
        m = res["measured"]["write1m"]
        assert m["tasks"] == 8 and m["hosts"] == 2 and sorted(m["tasks_per_host"].values()) == [4, 4]
        assert m["slots_per_host"] == 2 and 1.0 <= m["io_concurrency"] <= 4.0
        assert set(m["per_host_s"]) == set(testbed.hosts[:2])
        assert m["measured_s"] == pytest.approx(max(m["per_host_s"].values()))
        conn = sqlite3.connect(db)
        got = conn.execute("SELECT p.variant, p.N, p.C, v.measured_s, v.ratio FROM predictions p JOIN validations v "
                           "ON v.prediction_id = p.id ORDER BY p.variant").fetchall()
        assert [(g[0], g[1], g[2]) for g in got] == [("faithful", 8, 2), ("refined", 8, 2)]
        assert got[0][3] == pytest.approx(m["measured_s"]) and got[1][4] == pytest.approx(
            rows["refined"]["total_s"] / m["measured_s"])
        assert conn.execute("SELECT count(*) FROM predictions").fetchone()[0] == 2
        conn.close()
        # the files the stage wrote are where the prediction assumes: on the writer's host
        for t, host in list(st["tasks"].items())[:2]:
            i = int(t.rsplit("t", 1)[1])
            assert testbed.where(f"{st['top']}/out{i}") == [host]
    finally:
        testbed.exec(testbed.hosts[0], ["sh", "-c", f"rm -rf {testbed.mount(testbed.hosts[0])}/synth-{os.getpid()}-*"],
                     check=False)
        shutil.rmtree(share, ignore_errors=True)
