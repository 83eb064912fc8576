"""`--calibrate`: a learned correction of the refined model from the validations already in the db.

The refined model's errors repeat where they come from: a stage the model gets wrong by +80 % in one run of a
workflow it gets wrong by about as much in the next, and a fan-out's error leans with the host count. So the
correction of a stage is its own past error, log(measured / predicted) over the runs validated with this
envelope: the mean over its runs on the same number of hosts, shrunk toward the mean over all its runs, shrunk
toward the mean over every stage, shrunk toward none, each by LAMBDA runs' worth (a stage seen once moves half
way to its error; one never seen takes every stage's). It is judged only by leave-one-run-out
cross-validation: for every validated trace run, a fit on the other runs predicts that run's stages. The
`calibrated` rows of this prediction come from a fit on every validated run except the one(s) being validated now
(at least one), so it is never scored on data it was fit to; the cross-validation over those runs is reported
when there are two or more.

Its 90 % interval is the model's own held-out error, not the envelope's spread: the calibrated prediction times
the 5th and 95th percentiles of log(measured / calibrated) over the stages of those leave-one-run-out fits (a
cross-validated conformal interval: about 90 % of a new run's stages fall inside when runs are alike).
It needs two or more other runs and at least 19 held-out stage errors (fewer cannot place a 95th percentile).
"""
from __future__ import annotations

import json
import math

from mtcio.db import store

MIN_RUNS = 1
LAMBDA = 1.0           # runs' worth of weight a group's mean gives the one above it
LEVEL = 0.90
# the least n with ceil((n + 1) (1 + LEVEL) / 2) <= n: 19 at 90 %
MIN_HELD_OUT = math.ceil((1 + LEVEL) / (1 - LEVEL) - 1e-9)


def history(db: str, envelope: str) -> list[dict]:
    """Validated refined predictions made with `envelope` (its origin as stored in inputs):
    {run, stage, C, y (log measured/predicted), predicted, measured}."""
    conn = store.connect(db, readonly=True)
    try:
        rows = store.validated_predictions(conn, "refined")
    finally:
        conn.close()
    out = []
    for run, stage, C, inputs, pred, meas in rows:
        if json.loads(inputs or "{}").get("envelope") != envelope:
            continue
        out.append({"run": run, "stage": stage, "C": C, "predicted": pred, "measured": meas,
                    "y": math.log(meas / pred)})
    return out


class StageMemory:
    """fit(rows) / predict(rows): log(measured / predicted) expected of a stage on C hosts from past rows
    ({stage, C, y}), by the shrunk means of the module's docstring."""

    def fit(self, rows):
        self.every = _shrunk([r["y"] for r in rows], 0.0)
        self.by_stage, self.by_hosts = {}, {}
        for r in rows:
            self.by_stage.setdefault(r["stage"], []).append(r["y"])
            self.by_hosts.setdefault((r["stage"], r["C"]), []).append(r["y"])
        return self

    def predict(self, rows) -> list[float]:
        return [_shrunk(self.by_hosts.get((r["stage"], r["C"]), []),
                        _shrunk(self.by_stage.get(r["stage"], []), self.every)) for r in rows]


def _shrunk(ys, prior):
    return (sum(ys) + LAMBDA * prior) / (len(ys) + LAMBDA)


def held_out(rows) -> list[tuple[dict, float]]:
    """Leave-one-run-out: (row, its correction from a fit on the other runs) for every row."""
    out = []
    for held in sorted({r["run"] for r in rows}):
        test = [r for r in rows if r["run"] == held]
        m = StageMemory().fit([r for r in rows if r["run"] != held])
        out += list(zip(test, m.predict(test)))
    return out


def cross_validate(pairs) -> dict:
    """|error| % of the refined and of the calibrated prediction over the held-out (row, correction) pairs."""
    raw = [abs(r["predicted"] / r["measured"] - 1) * 100 for r, _ in pairs]
    cal = [abs(r["predicted"] * math.exp(c) / r["measured"] - 1) * 100 for r, c in pairs]
    return {"runs": len({r["run"] for r, _ in pairs}), "stages": len(raw), "refined_median_abs_err_pct": _median(raw),
            "calibrated_median_abs_err_pct": _median(cal)}


def conformal_factors(errors: list[float], level: float = LEVEL) -> tuple[float, float] | None:
    """(low, high) factors on a prediction from held-out log errors log(measured / predicted): exp of the
    floor((n + 1) a)-th and the ceil((n + 1) (1 - a))-th smallest, a = (1 - level) / 2. None when n is too few
    for the second (n < MIN_HELD_OUT at the 90 % level)."""
    e = sorted(errors)
    n = len(e)
    a = (1.0 - level) / 2
    hi = math.ceil((n + 1) * (1.0 - a) - 1e-9)     # (1 - 0.9) / 2 is not 0.05 in binary: keep 40 x .95 at 38
    if hi > n:
        return None
    lo = max(1, math.floor((n + 1) * a + 1e-9))
    return math.exp(e[lo - 1]), math.exp(e[hi - 1])


def _median(v):
    v = sorted(v)
    n = len(v)
    return None if not n else (v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2)


def run(db: str, current_runs: list, envelope: str, preds) -> dict:
    rows = [r for r in history(db, envelope) if r["run"] not in set(current_runs)]
    runs = sorted({r["run"] for r in rows})
    if len(runs) < MIN_RUNS:
        return {"summary": f"not enough history: {len(runs)} other validated run(s) with this envelope in {db}, "
                           f"{MIN_RUNS} needed "
                           "(validate more runs with mtcpredict --validate first); no calibrated variant",
                "rows": []}
    pairs = held_out(rows) if len(runs) >= 2 else []
    cv = cross_validate(pairs) if pairs else None
    band = conformal_factors([r["y"] - c for r, c in pairs])
    model = StageMemory().fit(rows)
    out = []
    for p in preds:
        if p.variant != "refined":
            continue
        f = math.exp(model.predict([{"stage": p.stage, "C": p.C}])[0])
        seen = (len(model.by_hosts.get((p.stage, p.C), [])), len(model.by_stage.get(p.stage, [])))
        d = p.to_dict()
        d.update(variant="calibrated", total_s=p.total_s * f, terms={t: v * f for t, v in p.terms.items()},
                 read_s=p.read_s * f, write_s=p.write_s * f, meta_s=p.meta_s * f,
                 interval=[p.total_s * f * x for x in band] if band else None,
                 notes=p.notes + [f"calibrated: refined x {f:.3g}, the stage's past error ({seen[0]} of its runs on "
                                  f"{p.C} hosts, {seen[1]} on any) among {len(rows)} stages of {len(runs)} other "
                                  "runs"])
        out.append(d)
    summary = (f"each stage's past error over {len(rows)} validated stages of {len(runs)} other run(s), not the "
               "one(s) validated now")
    if cv:
        summary += (f"; leave-one-run-out median |error| over them: refined {cv['refined_median_abs_err_pct']:.1f} %, "
                    f"calibrated {cv['calibrated_median_abs_err_pct']:.1f} %")
    if band:
        summary += (f"; its 90 % interval: x{band[0]:.2f} to x{band[1]:.2f}, the 5th-95th percentile of its "
                    f"{len(pairs)} held-out stage errors")
    else:
        summary += (f"; no 90 % interval: {len(pairs)} held-out stage errors, {MIN_HELD_OUT} needed (two or more "
                    "other validated runs)")
    return {"summary": summary, "cv": cv, "band": list(band) if band else None, "rows": out}
