"""Predict every stage of a workflow model under the chosen variants, with 90% intervals.

    preds = predict_workflow(wf, surface, variants=("faithful", "refined"))   # list of StagePrediction

The interval of a stage is the 5th-95th percentile of its prediction over `bootstrap` replicates of
the envelope (each cell's repeats resampled with replacement; extrapolated values drawn from the
regression's posterior). For the refined model a replicate is one run: a cell of a metric one slot does n
ops at, fewer than the cell's repeats, is the mean of n ops drawn from the resampled repeats, so the interval
of a stage of one write spans both its outcomes when the envelope's repeats at that size stalled now and then
(with n at least the repeats, the mean's uncertainty is the larger: each cell the mean of its resampled
repeats, as for the faithful model).
"""
from __future__ import annotations

import random

from .model import DEFAULT, REFINEMENTS, REMOVED, predict_stage, required_metrics
from .surface import EnvelopeError

# the bootstrap interval's quantiles: a 90 % interval, the level every interval in mtcio has (envelope precision,
# --calibrate)
INTERVAL_QUANTILES = (0.05, 0.95)


def check_metrics(wf, surface) -> None:
    """EnvelopeError naming every metric a stage needs that the envelope lacks."""
    have = surface.metrics()
    for st in wf.stages:
        missing = sorted(required_metrics(st) - have)
        if missing:
            raise EnvelopeError(f"stage {st.name}: the envelope has no ok point of {', '.join(missing)} "
                                f"(it has {', '.join(sorted(have)) or 'none'})")


def predict_workflow(wf, surface, variants=("faithful", "refined"), refine=None, io_concurrency=None,
                     bootstrap: int = 100, seed: int = 1) -> list:
    """io_concurrency: stage name -> k measured from a trace (refined model's io_overlap)."""
    check_metrics(wf, surface)
    io_concurrency = io_concurrency or {}
    out = [predict_stage(st, surface, v, refine, io_concurrency.get(st.name)) for st in wf.stages for v in variants]
    add_intervals(out, wf, surface, refine, io_concurrency, bootstrap, seed)
    return out


def add_intervals(preds, wf, surface, refine=None, io_concurrency=None, bootstrap: int = 100, seed: int = 1) -> None:
    """Each prediction's interval from `bootstrap` replicates of the envelope (none when 0): apart from the point
    predictions, which do not depend on it, so `mtcpredict --out` starts drawing before the replicates run."""
    if not bootstrap:
        return
    io_concurrency = io_concurrency or {}
    rng = random.Random(seed)
    reps = [surface.replicate(rng) for _ in range(bootstrap)]
    for p in preds:
        st = wf.stage(p.stage)
        mine = [surface.replicate(rng, p.ops_per_slot) for _ in range(bootstrap)] if p.ops_per_slot else reps
        vals = sorted(predict_stage(st, r, p.variant, refine, io_concurrency.get(st.name)).total_s for r in mine)
        lo, hi = INTERVAL_QUANTILES
        p.interval = (vals[int(lo * (len(vals) - 1))], vals[int(round(hi * (len(vals) - 1)))])


def parse_refine(text: str | None):
    """'default' (every refinement) | 'all' (the same) | 'none' | 'slots,size_lookup' (those) |
    '-io_overlap,+wait_ratio' (the default less and plus those) -> set."""
    if text in (None, "", "default"):
        return set(DEFAULT)
    if text == "all":
        return set(REFINEMENTS)
    if text == "none":
        return set()
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise ValueError(f"--refine {text!r}: no refinement named (for none of them: --refine none)")
    words = [x for x in items if x in ("default", "all", "none")]
    if words:
        raise ValueError(f"--refine: {words[0]!r} stands alone (--refine {words[0]}), not in a list")
    neg = [x[1:] for x in items if x.startswith("-")]
    plus = [x[1:] for x in items if x.startswith("+")]
    pos = [x for x in items if x[0] not in "+-"]
    gone = [x for x in neg + plus + pos if x in REMOVED]
    if gone:
        raise ValueError(f"--refine: refinement {gone[0]!r} was {REMOVED[gone[0]]}")
    bad = [x for x in neg + plus + pos if x not in REFINEMENTS]
    if bad:
        raise ValueError(f"--refine: unknown refinement {bad[0]!r} (known: {', '.join(REFINEMENTS)})")
    if (neg or plus) and pos:
        raise ValueError("--refine: either a list of refinements or changes to the default (-NAME, +NAME), not both")
    return (set(DEFAULT) - set(neg)) | set(plus) if neg or plus else set(pos)
