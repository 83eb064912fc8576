"""The precision loop (IOR's stonewalling idea applied to repeats): a point is repeated at least ``repeat`` times,
then until the 90 % interval of each of its metrics' mean is within +-``precision`` of it, its time budget is spent,
or ``max_repeat`` repeats were made; the interval, the repeats and why it stopped go into every repeat's config.

A point's budget for extra repeats is ``budget_factor - 1`` times what its minimum repeats took, and at most its share
(by planned cost) of what the sweep's ``time_budget`` has left over the minimum repeats of the points left.
"""
from __future__ import annotations

import math
import time
from typing import Callable, Sequence

from .metric_run import MetricRunner
from .stats import ci90, hmean
from .sweep import DATA_KINDS, KIND_METRICS, Step, Sweep, point_groups

CONFIDENCE = 0.9        # the interval ci90 computes (envelope/stats.py)


def finite(x):
    """JSON has no infinity (the db's JSON functions refuse it): an unbounded end is null."""
    return x if x is None or math.isfinite(x) else None


class PrecisionLoop:
    """``annotate(metrics, size, ppn, h, rep_lo, rep_hi, precision)`` writes a point's precision into the config of
    each of its repeats (None: not recorded)."""

    def __init__(self, runner: MetricRunner, sweep: Sweep,
                 annotate: Callable[[list[str], int, int, int, int, int, dict], None] | None = None):
        self.r = runner
        self.sw = sweep
        self.annotate = annotate

    def run(self, steps: Sequence[Step]) -> None:
        self.r.start(steps)
        t0 = time.monotonic()
        deadline = t0 + self.sw.time_budget if self.sw.time_budget else math.inf
        groups = point_groups(steps)
        cost_left = sum(s.cost for g in groups for s in g)
        planned_s = planned_cost = 0.0      # real seconds and planned cost of the minimum
        for g in groups:
            cost = sum(s.cost for s in g)
            if g[0].kind == "create" or g[0].kind in DATA_KINDS:
                # time for extra repeats: what is left once the minimum repeats of every
                # point left are paid (at the pace seen so far), shared by planned cost
                pace = planned_s / planned_cost if planned_cost > 0 else 1.0
                spare = deadline - time.monotonic() - pace * cost_left
                share = max(0.0, spare) * cost / cost_left if math.isfinite(spare) and \
                    cost_left > 0 else math.inf
                planned_s += self.run_point(g, share)
                planned_cost += cost
            else:
                for st in g:
                    self.r.do(st)
            cost_left -= cost
        if not self.sw.keep_files:
            self.r.place.remove([self.r.place.root])

    def run_point(self, steps: Sequence[Step], budget: float) -> float:
        """The planned repeats of one point (Tm of a P x h, or TL/T1L/T1R/TN of a size x P x
        h), then more until each metric's 90 % interval is within the precision target, the
        point's time budget for extra repeats is spent or max_repeat repeats were made.
        Returns the seconds the planned repeats took."""
        t0 = time.monotonic()
        planned_s = 0.0
        first = steps[0]
        kinds = [s.kind for s in steps if s.rep == first.rep]      # one repeat, in order
        planned = max(s.rep for s in steps) + 1
        self.r.sink = {}
        stopped: dict[str, str] = {}
        rep = 0
        todo = list(kinds)
        try:
            while True:
                if rep < planned:
                    batch = [s for s in steps if s.rep == rep]
                else:
                    batch = [Step(k, first.h, first.size, first.ppn, rep,
                                  next(s.cost for s in steps if s.kind == k))
                             for k in kinds if k in todo]
                    self.r.place.make_extra(batch)
                    if self.r.progress:
                        self.r.progress.add(batch)
                for st in batch:
                    self.r.do(st)
                rep += 1
                if rep < planned:
                    continue
                if rep == planned:
                    planned_s = time.monotonic() - t0
                if self.sw.precision <= 0:
                    stopped = {k: "fixed count (--precision 0)" for k in kinds}
                    break
                open_kinds = []
                for k in kinds:
                    if k in stopped:
                        continue
                    why = self.stop_reason(k)
                    if why:
                        stopped[k] = why
                    else:
                        open_kinds.append(k)
                if not open_kinds:
                    break
                if rep == planned:
                    budget = min(budget, (self.sw.budget_factor - 1) * planned_s)
                spent = time.monotonic() - t0 - planned_s      # on extra repeats
                if rep >= self.sw.max_repeat or spent >= budget:
                    why = (f"max repeats ({self.sw.max_repeat})" if rep >= self.sw.max_repeat
                           else f"time budget spent ({spent:.1f} s of extra repeats, "
                           f"budget {budget:.1f} s)")
                    stopped.update({k: why for k in open_kinds})
                    break
                # reads of 1-to-1 inputs need this repeat's write run
                todo = open_kinds + (["write"] if {"local", "remote"} & set(open_kinds)
                                     and "write" not in open_kinds else [])
            for k, why in stopped.items():     # a write that went on for its reads' sake
                if why == "target met" and self.stop_reason(k) != "target met":
                    stopped[k] = "target met, then repeated as the inputs of reads"
            self.record_precision(first, kinds, stopped, time.monotonic() - t0, budget)
        finally:
            self.r.sink = None
        return planned_s

    def stop_reason(self, kind: str) -> str | None:
        """Why a kind's point needs no more repeats, or None."""
        t = KIND_METRICS[kind][0]
        pts = (self.r.sink or {}).get(t, [])
        ok = [p.value for p in pts if p.ok]
        if len(ok) < 2 and len(pts) - len(ok) >= 2:
            return "failed repeats (more would not help)"
        ci = ci90(ok)
        if ci and ci["rel_halfwidth"] <= self.sw.precision:
            return "target met"
        return None

    def record_precision(self, first: Step, kinds: Sequence[str], stopped: dict[str, str],
                         seconds: float, budget: float) -> None:
        if not self.annotate:
            return
        for k in kinds:
            for m in KIND_METRICS[k]:
                pts = (self.r.sink or {}).get(m, [])
                if not pts or m not in self.sw.metrics:
                    continue
                ok = [p.value for p in pts if p.ok]
                ci = ci90(ok)
                prec = {"target": self.sw.precision, "confidence": CONFIDENCE,
                        "repeats": len(pts), "repeats_ok": len(ok),
                        "mean": hmean(ok) if ok else None,
                        "ci90": [finite(ci["low"]), finite(ci["high"])] if ci else None,
                        "rel_halfwidth": finite(ci["rel_halfwidth"]) if ci else None,
                        "met": bool(ci and ci["rel_halfwidth"] <= self.sw.precision),
                        "stopped": stopped.get(k, "?"),
                        "ops": sum(int(p.config.get("ops", 0)) for p in pts),
                        "seconds": round(seconds, 3),
                        "extra_budget_s": round(budget, 3) if math.isfinite(budget) else None}
                self.annotate([m], pts[0].file_size, first.ppn, first.h,
                              min(p.repeat for p in pts), max(p.repeat for p in pts), prec)
