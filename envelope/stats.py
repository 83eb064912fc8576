"""The 90 % confidence interval of a point's rate, for its precision target (precision.py); how far its repeats swung.

A rate (ops/s, bytes/s) stands for a time per op or byte, and times are what average: a point's value is
the harmonic mean of its repeats (the rate of their mean time), and its interval is the mean time's,
inverted. (gfarm2fs stalls ~45 ms at random: repeats of 140, 21 and 20 ops/s are 28 ops/s, not 60.)

Student's t with n - 1 degrees of freedom: the repeats of a point are few (3 to ~30), where
the normal 1.645 would claim too narrow an interval. No scipy: the two-sided 90 % quantiles
(t_0.95) are tabulated.
"""
from __future__ import annotations

import math
from typing import Sequence

# t_{0.95, df} for df = 1..30; 1.645 (normal) beyond
_T95 = [6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812,
        1.796, 1.782, 1.771, 1.761, 1.753, 1.746, 1.740, 1.734, 1.729, 1.725,
        1.721, 1.717, 1.714, 1.711, 1.708, 1.706, 1.703, 1.701, 1.699, 1.697]


def t95(df: int) -> float:
    if df < 1:
        raise ValueError("a t quantile needs at least 1 degree of freedom")
    return _T95[df - 1] if df <= len(_T95) else 1.645


def hmean(values: Sequence[float]) -> float:
    """The rate of the mean time: n / sum(1/v) (0 when a value is 0)."""
    if any(v <= 0 for v in values):
        return 0.0
    return 1.0 / (sum(1.0 / v for v in values) / len(values))


def ci90(values: Sequence[float]) -> dict | None:
    """{n, mean, low, high, rel_halfwidth} of a rate from its repeats ``values``: mean is their harmonic
    mean, low/high the rates at the ends of the mean time's interval (high inf when that reaches 0),
    rel_halfwidth the half-width over the mean time (None below 2 values; inf with a value <= 0)."""
    n = len(values)
    if n < 2:
        return None
    if any(v <= 0 for v in values):
        return {"n": n, "mean": hmean(values), "low": 0.0, "high": math.inf, "rel_halfwidth": math.inf}
    t = [1.0 / v for v in values]
    mt = sum(t) / n
    sd = math.sqrt(sum((x - mt) ** 2 for x in t) / (n - 1))
    half = t95(n - 1) * sd / math.sqrt(n)
    return {"n": n, "mean": 1.0 / mt, "low": 1.0 / (mt + half),
            "high": 1.0 / (mt - half) if mt > half else math.inf, "rel_halfwidth": half / mt}


def quartiles(values: Sequence[float]) -> tuple:
    """(lower, upper) quartile of ``values``, nearest rank: of 5 the 2nd slowest and 2nd fastest."""
    v = sorted(values)
    return v[round(0.25 * (len(v) - 1))], v[round(0.75 * (len(v) - 1))]


# an envelope whose op-rate points swung in this share or more is said to have been measured on an unsteady machine:
# set between the passes' envelopes when the warning came (2827551): 0-2 of ~300 points swung where the machine was
# steady, 36-39 (12-13 %) where it was slow for minutes (passes AH, AJ, docs/experiments/montage-passes.md); not fitted
SWUNG_SHARE = 0.10
# a point swung when its upper quartile is this many times its lower one (the same commit: a stall in one repeat of
# five does not reach it, minutes of slow repeats do)
SWING = 2.0


def swung(values: Sequence[float], swing: float = SWING) -> bool:
    """Whether a point of 5 or more repeats has its upper quartile more than ``swing`` x its lower one: the machine
    moved between quick and slow minutes while it was measured (a stall in one repeat of five does not count)."""
    if len(values) < 5:
        return False
    lo, hi = quartiles(values)
    return hi > swing * lo
