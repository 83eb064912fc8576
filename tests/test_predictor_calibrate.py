"""`--calibrate`: the calibrated variant and its 90 % interval from held-out errors, on a real SQLite store."""
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


def _history(db, measured: dict):
    """measured: run -> measured seconds of its stages s0, s1, ..; every prediction 1 s of writes with the same
    slots and k, so a ridge fit on any runs predicts their mean log(measured / predicted) for every stage."""
    conn = store.connect(db)
    for run, times in measured.items():
        store.get_or_create_run(conn, run, "trace")
        for i, m in enumerate(times):
            pid = store.add_prediction(conn, stage=f"s{i}", variant="refined", predicted_s=1.0, run=run,
                                       inputs={"envelope": ENV, "slots": 2, "k": 2}, terms={"write": 1.0})
            store.add_validation(conn, pid, m)
    conn.close()


@pytest.fixture(scope="module")
def refined():
    surface = EnvelopeSurface().fit(load_envelope(None).points)
    return [p for p in predict_workflow(load(MONTAGE), surface, ("refined",), bootstrap=0)]


def test_interval_is_the_held_out_errors_percentiles(tmp_path, refined):
    runs = {"r1": [1.0, 1.2, 0.9, 1.1, 1.0, 1.3, 0.8],
            "r2": [1.5, 1.4, 1.6, 1.2, 1.5, 1.7, 1.3],
            "r3": [0.7, 0.9, 0.6, 0.8, 1.0, 0.7, 0.9]}
    db = str(tmp_path / "h.db")
    _history(db, runs)
    logs = {r: [math.log(m) for m in ms] for r, ms in runs.items()}
    # each run's errors against the mean log ratio of the two others (the fit that left it out)
    held = [y - sum(sum(logs[o]) for o in logs if o != r) / 14 for r in logs for y in logs[r]]
    want = (math.exp(min(held)), math.exp(max(held)))      # 21 errors: the 1st and the 21st
    out = calibrate.run(db, ["now"], ENV, refined)
    assert out["band"] == pytest.approx(want)
    assert len(out["rows"]) == len(refined) == 4
    for d, p in zip(out["rows"], refined):
        f = math.exp(sum(sum(v) for v in logs.values()) / 21)   # the fit on all three runs: their mean
        assert d["variant"] == "calibrated" and d["total_s"] == pytest.approx(p.total_s * f, rel=1e-3)
        assert d["interval"] == pytest.approx([d["total_s"] * want[0], d["total_s"] * want[1]], rel=1e-3)
    assert "its 90 % interval: x" in out["summary"] and "of its 21 held-out stage errors" in out["summary"]
    # the run validated now is never part of its own calibration
    assert calibrate.run(db, ["r3"], ENV, refined)["band"] is None


def test_too_few_held_out_errors_give_no_interval(tmp_path, refined):
    db = str(tmp_path / "h.db")
    _history(db, {"r1": [1.0] * 7, "r2": [2.0] * 7})
    out = calibrate.run(db, ["now"], ENV, refined)
    assert out["band"] is None and all(d["interval"] is None for d in out["rows"]) and len(out["rows"]) == 4
    assert "no 90 % interval: 14 held-out stage errors, 19 needed" in out["summary"]
    one = str(tmp_path / "one.db")
    _history(one, {"r1": [1.0] * 7})
    out = calibrate.run(one, ["now"], ENV, refined)
    assert out["band"] is None and "0 held-out stage errors" in out["summary"]
    # another envelope's validations are not this one's history
    assert calibrate.run(db, ["now"], "other-env", refined)["rows"] == []
