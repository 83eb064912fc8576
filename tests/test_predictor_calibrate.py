"""`--calibrate`: the calibrated variant (each stage's past error) and its 90 % interval from held-out errors, on
a real SQLite store."""
import math
import os

import pytest

from mtcio.db import store
from mtcio.db.workflow_model import load
from mtcio.predictor import calibrate
from mtcio.predictor.envelope_source import load as load_envelope
from mtcio.predictor.predict import predict_workflow
from mtcio.predictor.surface import EnvelopeSurface

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MONTAGE = os.path.join(ROOT, "montage_example", "montage.yaml")
ENV = "testbed-env"


def test_conformal_factors_take_the_order_statistics():
    e = [math.log(1 + i / 100) for i in range(19)]          # 19 errors: the 1st and the 19th smallest
    assert calibrate.conformal_factors(e) == pytest.approx((1.0, 1.18))
    e = [math.log(1 + i / 100) for i in range(39)]          # 39: floor(40 x .05) = 2nd, ceil(40 x .95) = 38th
    assert calibrate.conformal_factors(e[::-1]) == pytest.approx((1.01, 1.37))
    assert calibrate.conformal_factors(e[:18]) is None       # ceil(19 x .95) = 19 > 18: no 95th percentile


def _history(db, runs: dict):
    """runs: run -> [(stage, C, measured seconds)], each predicted 1 s (of writes)."""
    conn = store.connect(db)
    for run, rows in runs.items():
        store.get_or_create_run(conn, run, "trace")
        for stage, C, m in rows:
            pid = store.add_prediction(conn, stage=stage, variant="refined", predicted_s=1.0, run=run, C=C,
                                       inputs={"envelope": ENV, "slots": 2 * C, "k": 2}, terms={"write": 1.0})
            store.add_validation(conn, pid, m)
    conn.close()


@pytest.fixture(scope="module")
def refined():
    surface = EnvelopeSurface().fit(load_envelope(None).points)
    return predict_workflow(load(MONTAGE), surface, ("refined",), bootstrap=0)


def test_each_stage_takes_its_own_past_error_shrunk(tmp_path, refined):
    s0, s1 = refined[0], refined[1]
    db = str(tmp_path / "h.db")
    # stage 0 twice 2x slower than predicted on its own host count, stage 1 twice as predicted on another
    _history(db, {r: [(s0.stage, s0.C, 2.0), (s1.stage, s1.C + 1, 1.0)] for r in ("r1", "r2")})
    out = calibrate.run(db, ["now"], ENV, refined)
    f = {d["stage"]: d["total_s"] / p.total_s for d, p in zip(out["rows"], refined)}
    # every stage: 2 ln2 over 4 + 1 = 0.4 ln2; stage 0: (2 ln2 + 0.4 ln2) / 3 = 0.8 ln2; on its hosts:
    # (2 ln2 + 0.8 ln2) / 3; stage 1: (0 + 0.4 ln2) / 3, on hosts it was never seen on the same; the others 0.4 ln2
    assert f[s0.stage] == pytest.approx(2 ** (2.8 / 3), rel=1e-9)
    assert f[s1.stage] == pytest.approx(2 ** (0.4 / 3), rel=1e-9)
    assert [f[p.stage] for p in refined[2:]] == pytest.approx([2 ** 0.4] * (len(refined) - 2), rel=1e-9)
    d0 = out["rows"][0]
    assert d0["variant"] == "calibrated" and d0["read_s"] + d0["write_s"] + d0["meta_s"] == pytest.approx(
        d0["total_s"])
    assert f"2 of its runs on {s0.C} hosts, 2 on any) among 4 stages of 2 other runs" in d0["notes"][-1]
    # 4 held-out errors: too few for an interval
    assert out["band"] is None and d0["interval"] is None
    assert "no 90 % interval: 4 held-out stage errors, 19 needed" in out["summary"]


def test_interval_is_the_held_out_errors_percentiles(tmp_path, refined):
    times = {"r1": [1.0, 1.2, 0.9, 1.1, 1.0, 1.3, 0.8],
             "r2": [1.5, 1.4, 1.6, 1.2, 1.5, 1.7, 1.3],
             "r3": [0.7, 0.9, 0.6, 0.8, 1.0, 0.7, 0.9]}
    db = str(tmp_path / "h.db")
    _history(db, {r: [(f"s{i}", 2, m) for i, m in enumerate(ts)] for r, ts in times.items()})
    y = {r: [math.log(m) for m in ts] for r, ts in times.items()}

    def left_out(r, i):      # stage i of run r from the fit on the two other runs, by the three shrunk means
        o = [v for q, v in y.items() if q != r]
        every = sum(map(sum, o)) / 15
        stage = (o[0][i] + o[1][i] + every) / 3
        return (o[0][i] + o[1][i] + stage) / 3
    held = sorted(y[r][i] - left_out(r, i) for r in y for i in range(7))
    out = calibrate.run(db, ["now"], ENV, refined)
    assert out["band"] == pytest.approx([math.exp(held[0]), math.exp(held[-1])])   # 21 errors: 1st and 21st
    assert out["cv"]["stages"] == 21 and out["cv"]["runs"] == 3
    f = math.exp(sum(map(sum, y.values())) / 22)   # montage's stages were never validated: every stage's mean
    for d, p in zip(out["rows"], refined):
        assert d["total_s"] == pytest.approx(p.total_s * f, rel=1e-9)
        assert d["interval"] == pytest.approx([d["total_s"] * x for x in out["band"]])
    assert "its 90 % interval: x" in out["summary"] and "of its 21 held-out stage errors" in out["summary"]
    # the run validated now is never part of its own calibration
    assert calibrate.run(db, ["r3"], ENV, refined)["band"] is None


def test_no_history_no_calibrated_rows(tmp_path, refined):
    db = str(tmp_path / "h.db")
    _history(db, {"r1": [("s0", 2, 1.0)]})
    assert calibrate.run(db, ["r1"], ENV, refined)["rows"] == []          # its own validation is not history
    assert calibrate.run(db, ["now"], "other-env", refined)["rows"] == []  # nor another envelope's
    out = calibrate.run(db, ["now"], ENV, refined)
    assert len(out["rows"]) == len(refined) and out["cv"] is None and out["band"] is None
