"""The 90 % confidence interval of a mean, for a point's precision target (measure.py).

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


def ci90(values: Sequence[float]) -> dict | None:
    """{n, mean, low, high, rel_halfwidth} of the mean of ``values`` (None below 2 values;
    rel_halfwidth is the half-width over the mean, inf for a mean of 0)."""
    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t95(n - 1) * sd / math.sqrt(n)
    return {"n": n, "mean": mean, "low": mean - half, "high": mean + half,
            "rel_halfwidth": half / mean if mean > 0 else math.inf}
