"""The model predicts the golden values, captured after the ablation removed seven refinements (issue 52,
docs/experiments/ablation.md): every stage
and envelope of the predictor's tests, the shipped Montage model with the shipped envelope, and the scale
fixture's two traced runs with their envelopes; faithful, default refined, the tests' own refinement sets and the
default less each refinement. Values within a relative 1e-6 (tests/helpers/golden.py: REL); notes, bounds and
look-up sources exactly.
The values are in tests/fixtures/predictor/golden.json.gz (tests/helpers/golden_capture.py wrote them)."""
import os

from helpers.golden import differences, load, outcome, stage_from_plain, surfaces_of

from mtcio.predictor.model import predict_stage

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "predictor", "golden.json.gz")


def test_every_golden_prediction_is_reproduced():
    doc = load(GOLDEN)
    surface = surfaces_of(doc)
    assert len(doc["cases"]) == 1341
    bad = []
    for c in doc["cases"]:
        st = stage_from_plain(doc["stages"][c["stage"]])
        try:
            got = outcome(predict_stage(st, surface(c["surface"]), c["variant"],
                                        None if c["refine"] is None else set(c["refine"]), c["io_concurrency"]))
        except Exception as e:
            got = {"error": f"{type(e).__name__}: {e}"}
        diff = differences(c["outcome"], got)
        if diff:
            bad.append(f"{c['from']} {st.name} {c['variant']} {c['refine']}: {diff[:3]}")
    assert not bad, f"{len(bad)} of {len(doc['cases'])} predictions changed:\n" + "\n".join(bad[:20])
