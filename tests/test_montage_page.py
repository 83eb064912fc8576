"""The demo page's stage table: each run's errors from the other run's model, and the two runs' spread."""
import json

from montage_example import page


def _loc(stage):
    return {"stage": stage, "tasks": 9, "hosts": 4, "alpha": 0.5, "alpha_all": 0.5, "bytes_read": 10**6,
            "bytes_written": 2 * 10**6, "span_s": 1.0, "t_io_s": 0.5}


def _write(out, folder, rows):
    (out / folder).mkdir()
    preds = [{"stage": st, "variant": v, "total_s": pred, "measured_s": meas,
              "error_pct": 100 * (pred - meas) / meas}
             for st, meas, by in rows for v, pred in by.items()]
    (out / folder / "prediction.json").write_text(json.dumps({"predictions": preds}))


def test_spread_is_max_minus_min_over_mean():
    assert page.spread(0.1, 0.3) == 100.0
    assert page.spread(0.2, 0.2) == 0.0
    assert page.spread(None, 0.2) is None and page.spread(0.0, 0.0) is None


def test_rows_pair_each_run_with_the_other_runs_model(tmp_path):
    # predict/: run 2 measured, predicted from run 1's model; predict-2/: run 1 from run 2's
    _write(tmp_path, "predict", [("mDiff", 0.5, {"faithful": 0.4, "refined": 0.6}),
                                 ("mAdd", 0.2, {"refined": 0.1})])
    _write(tmp_path, "predict-2", [("mDiff", 0.3, {"refined": 0.45}),
                                   ("mAdd", 0.2, {"refined": 0.3})])
    rows = page.stage_rows([_loc("mDiff"), _loc("mAdd"), _loc("mShrink")],
                           [page.predictions(str(tmp_path), f) for f in page.PREDICTIONS])
    d, a, s = rows
    assert [x["measured_s"] for x in d["runs"]] == [0.5, 0.3]
    assert round(d["runs"][0]["refined"]["error_pct"], 6) == 20.0
    assert round(d["runs"][1]["refined"]["error_pct"], 6) == 50.0
    assert round(d["runs"][0]["faithful"]["error_pct"], 6) == -20.0 and d["runs"][1]["faithful"] == {}
    assert d["spread_pct"] == 50.0 and a["spread_pct"] == 0.0
    assert s["spread_pct"] is None and [x["measured_s"] for x in s["runs"]] == [None, None]
    # |errors| 20, 50, 50, 50 -> median 50, max 50; spreads 50, 0 -> median 25
    line = page.summary_line(rows)
    assert "over 4 stage-runs median 50 %, max 50 %" in line
    assert "differ by median 25 %, max 50 %" in line
    text = page.summary_text(rows, ("r1", "r2"), {"preset": "demo", "tiles": 9, "overlaps": 20, "hosts": 4,
                                                  "slots": 2, "walls_s": [4.6, 4.4]})
    assert "wall time 4.6 s, 4.4 s" in text and "run r2" in text and "run r1" in text
    mdiff = next(l for l in text.splitlines() if l.startswith("mDiff"))
    assert mdiff.split()[-7:] == ["0.500", "0.600", "+20", "0.300", "0.450", "+50", "50"]


def test_missing_predictions_leave_dashes(tmp_path):
    rows = page.stage_rows([_loc("mDiff")], [page.predictions(str(tmp_path), f) for f in page.PREDICTIONS])
    assert page.summary_line(rows) == "no stage was predicted and measured"
    text = page.summary_text(rows, ("r1", "r2"), {"preset": "demo", "tiles": 9, "overlaps": 20, "hosts": 4,
                                                  "slots": 2, "walls_s": [4.6, 4.4]})
    assert next(l for l in text.splitlines() if l.startswith("mDiff")).split()[-7:] == ["–"] * 7
