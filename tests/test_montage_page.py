"""The demo page's stage table: the prediction made before the runs against both measured runs (error against
their mean, their spread beside it), the whole workflow's summed I/O time, the same-configuration baseline."""
import json

from montage_example import page

RUNS = ("m25", "m25-2")
INFO = {"preset": "demo", "small": {"m4": 4, "m9": 9}, "large": 25, "overlaps": {4: 6, 9: 20, 25: 72}, "hosts": 4,
        "slots": 2, "walls_s": {"m4": 3.9, "m9": 6.7, "m25": 18.0, "m25-2": 18.7}, "predicted_at_s": 173.2,
        "launched_at_s": 174.6}


def _loc(stage, tasks=9):
    return {"stage": stage, "tasks": tasks, "hosts": 4, "alpha": 0.5, "alpha_all": 0.5, "bytes_read": 10**6,
            "bytes_written": 2 * 10**6, "span_s": 1.0, "t_io_s": 0.5}


def _predicted(out, rows):
    """OUT/predicted/prediction.json as mtcpredict --at writes it before the runs: no measurement."""
    (out / page.PREDICTED).mkdir()
    preds = [{"stage": st, "variant": "refined", "N": n, "total_s": s} for st, n, s in rows]
    (out / page.PREDICTED / "prediction.json").write_text(json.dumps(
        {"predictions": preds, "measured": {}, "validated_runs": [],
         "at": {"size": 25, "hosts": 4, "procs": 2, "notes": ["graph: 1 task of no traced stage left out (default)"]}}))


def _validated(out, folder, measured, predicted=None):
    """mtcpredict --validate's prediction.json: per stage the runs' times (repeats) and their mean."""
    (out / folder).mkdir()
    m = {st: {"measured_s": sum(xs) / len(xs), "repeats": xs} for st, xs in measured.items()}
    preds = [{"stage": st, "variant": "refined", "total_s": s, "measured_s": m[st]["measured_s"],
              "error_pct": 100 * (s - m[st]["measured_s"]) / m[st]["measured_s"]}
             for st, s in (predicted or {}).items()]
    (out / folder / "prediction.json").write_text(json.dumps({"predictions": preds, "measured": m}))


def _rows(tmp_path):
    _predicted(tmp_path, [("mDiff", 72, 0.6), ("mAdd", 1, 0.1)])
    _validated(tmp_path, page.VALIDATED, {"mDiff": [0.5, 0.3], "mAdd": [0.2, 0.2]})
    # the baseline: the first run's own model predicting the second
    _validated(tmp_path, page.BASELINE, {"mDiff": [0.3], "mAdd": [0.2]}, {"mDiff": 0.45, "mAdd": 0.15})
    return page.stage_rows([_loc("mDiff", 72), _loc("mAdd", 1), _loc("mShrink", 1)],
                           page.predictions(str(tmp_path), page.PREDICTED), page.repeats(str(tmp_path), page.VALIDATED),
                           page.predictions(str(tmp_path), page.BASELINE))


def test_spread_is_max_minus_min_over_mean():
    assert page.spread(0.1, 0.3) == 100.0
    assert page.spread(0.2, 0.2) == 0.0
    assert page.spread(None, 0.2) is None and page.spread(0.0, 0.0) is None
    assert page.error(0.75, 0.5) == 50.0 and page.error(0.6, 0) is None and page.error(None, 0.4) is None


def test_p90_is_the_benchmarks_nearest_rank():
    assert page.p90(list(range(1, 15))) == 13        # 14 stages: the 13th smallest
    assert page.p90([5.0]) == 5.0 and page.p90([]) is None


def test_rows_put_the_prediction_beside_both_runs_and_the_baseline(tmp_path):
    d, a, s = _rows(tmp_path)
    assert d["measured_s"] == [0.5, 0.3] and d["predicted_tasks"] == 72 and d["predicted_s"] == 0.6
    assert round(d["error_pct"], 6) == 50.0              # 0.6 against the mean 0.4
    assert d["spread_pct"] == 50.0 and a["spread_pct"] == 0.0
    assert round(a["error_pct"], 6) == -50.0
    assert round(d["baseline_error_pct"], 6) == 50.0     # 0.45 against the second run's 0.3
    assert round(a["baseline_error_pct"], 6) == -25.0
    assert s["measured_s"] == [] and s["error_pct"] is None and s["spread_pct"] is None and s["baseline_s"] is None


def test_the_whole_workflow_sums_the_stages_measured_in_both_runs(tmp_path):
    w = page.workflow_row(_rows(tmp_path))
    assert w["stages"] == 2
    assert round(w["predicted_s"], 6) == 0.7 and [round(x, 6) for x in w["measured_s"]] == [0.7, 0.5]
    assert round(w["error_pct"], 6) == round(100 * (0.7 - 0.6) / 0.6, 6)
    assert round(w["spread_pct"], 6) == round(100 * 0.2 / 0.6, 6)
    assert round(w["baseline_s"], 6) == 0.6 and round(w["baseline_error_pct"], 6) == 20.0   # 0.6 against 0.5


def test_summary_says_medians_spread_and_workflow(tmp_path):
    rows = _rows(tmp_path)
    fig = page.figures(rows)
    # |errors| 50, 50 -> median 50; spreads 50, 0 -> median 25; baseline 50, 25 -> median 37.5
    assert (fig["stages"], round(fig["median"], 6), fig["spread_median"], fig["spread_max"]) == (2, 50.0, 25.0, 50.0)
    assert round(fig["baseline_median"], 6) == 37.5 and round(fig["p90"], 6) == 50.0
    text = page.summary_text(rows, RUNS, INFO)
    assert text.splitlines()[0] == (
        "Montage demo preset, 4 hosts x 2 slots: traced 4 tiles (run m4, 3.9 s wall) and 9 tiles (run m9, 6.7 s "
        "wall); 25 tiles (72 overlaps) predicted (written at t = 173.2 s) before its first run was launched (t = "
        "174.6 s), then run twice (18.0 s, 18.7 s wall)")
    mdiff = next(l for l in text.splitlines() if l.startswith("mDiff"))
    assert mdiff.split() == ["mDiff", "72", "0.600", "0.500", "0.300", "+50", "50", "0.450", "+50"]
    whole = next(l for l in text.splitlines() if l.startswith("workflow"))
    assert whole.split() == ["workflow", "74", "0.700", "0.700", "0.500", "+17", "33", "0.600", "+20"]
    assert ("per-stage |error| median 50 %, p90 50 % over 2 stages, against the mean of the two runs; the two runs' "
            "spread median 25 %, max 50 %") in text
    assert ("whole workflow, I/O time summed over 2 stages: predicted 0.70 s, measured 0.70 s and 0.50 s: error "
            "+17 %, the runs' spread 33 %") in text
    assert ("same-configuration baseline (run m25's own model -> run m25-2): per-stage |error| median 38 %, p90 50 "
            "%; whole workflow +20 %") in text
    assert page.notes(str(tmp_path), page.PREDICTED) == ["graph: 1 task of no traced stage left out (default)"]


def test_missing_predictions_leave_dashes(tmp_path):
    rows = page.stage_rows([_loc("mDiff")], page.predictions(str(tmp_path), page.PREDICTED),
                           page.repeats(str(tmp_path), page.VALIDATED), page.predictions(str(tmp_path), page.BASELINE))
    text = page.summary_text(rows, RUNS, INFO)
    assert text.splitlines()[-1] == "no stage was predicted and measured"
    assert next(l for l in text.splitlines() if l.startswith("mDiff")).split()[2:] == ["–"] * 7
    assert next(l for l in text.splitlines() if l.startswith("workflow")).split()[2:] == ["–"] * 7
