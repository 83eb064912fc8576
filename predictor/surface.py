"""The envelope as a surface: a metric's value at any file size and concurrency.

    surf = EnvelopeSurface().fit(points)            # points: dicts or a DataFrame (envelope.load())
    v = surf.value("TL", size=4.2e6, k=8, hosts=8)  # -> Lookup(value, source, note)

Concurrency k is the total number of processes doing I/O at once (hosts x processes per host), the
envelope's `nprocs`. Values of one host count form a grid over (file size, k); the host count used is
the stage's own when measured, else the nearest one (the lookup then says so).

- measured: exactly at a grid point (harmonic mean over ok repeats: a rate stands for the time per op or byte,
  and times average; gfarm2fs stalls ~45 ms now and then: repeats of 140, 21, 20 ops/s are 60 by the arithmetic
  mean, 28 by the time per op; of 5 or more repeats the slowest counts as the next slowest), but a cell whose 5 or
  more repeats swung, their upper quartile more than 2x their lower one, is that upper quartile (cell_rate "swung",
  the default; "mean": the mean everywhere; "quartile": the upper quartile of every cell of 5 or more; _cell_rate);
- interpolated: bilinear in log(size) x log(k) of log(value): exact at grid points and monotone
  between neighbours along each axis; except across a step in size (the op rate changing by more than 3x
  beyond what the roofline's slopes explain), where sizes below the larger point keep the smaller one's op rate;
- clamped: a throughput (T*) below the smallest measured size is taken at that size: an operation on a
  tiny file costs its open/close, it is metadata-bound and no cheaper than the smallest one measured
  (bandwidth then follows as T x size);
- extrapolated, size above the largest measured: bandwidth held at its value at the largest size
  (the roofline's bandwidth ceiling; a regression would invent bandwidth no transfer reached), T = B / size;
- extrapolated, concurrency outside the measured range (or a missing grid cell): a Gaussian-process
  regression on log size x log k -> log value (predictor/gp.py: the shipped envelope's grids come fitted, any
  other grid is fitted with scikit-learn, imported only then).
Every non-measured value carries a note naming the metric and how far out it is.

`wait_share(metric, size, k, hosts)`: the share of the envelope's op time its processes waited for a CPU (the
engine's op_wait_s / op_s of each point, /proc/self/schedstat around the op loop), interpolated linearly in
log(size) x log(k) and held at the grid's edges; None where the points do not have it (envelopes measured before the engine had the clock).
`first_share(metric, size, k, hosts)`: the same of the share of the op time the processes' first ops took (envelopes
of several files per process: their points' first_op_share).

`replicate(rng)` gives a surface whose cells are (harmonic) means of repeats resampled with replacement (and
extrapolated values drawn from the GP posterior): the bootstrap of the mean. `replicate(rng, ops)` gives one run's
outcome instead: a cell of a metric a slot does n ops of, fewer than the cell's repeats, is the mean of n ops drawn
from the resampled repeats, so a stage of one write sees that write stall as often as the envelope's repeats did.
"""
from __future__ import annotations

import bisect
import json
import math
from dataclasses import dataclass

from mtcio.envelope.stats import quartiles, swung
from mtcio.predictor import gp as gp_fit

# files per process of an envelope that does not say: mtcenvelope measure's default (--ops-per-proc)
DEFAULT_OPS_PER_PROC = 16
# repeats from which a cell's slowest one counts as its next slowest (_cell_rate): the same 5 as envelope.stats.swung,
# so one stall in five repeats is trimmed where a quartile is meaningful
TRIM_FROM_REPEATS = 5

THROUGHPUT = ("Tm", "Ts", "Tf", "T1L", "T1R", "TN", "TL")
SIZELESS = ("Tm", "Ts", "Tf")    # creates and stats: one size, 0
METRICS = THROUGHPUT + ("B1L", "B1R", "BN", "BL")
BANDWIDTH_OF = {"T1L": "B1L", "T1R": "B1R", "TN": "BN", "TL": "BL"}
THROUGHPUT_OF = {b: t for t, b in BANDWIDTH_OF.items()}


class EnvelopeError(ValueError):
    """An envelope that cannot answer a lookup (metric missing, no ok point ...)."""


@dataclass
class Lookup:
    value: float
    source: str            # measured | interpolated | clamped | extrapolated
    note: str = ""         # why not measured, how far out, which host count


@dataclass
class _Grid:
    sizes: list           # sorted distinct file sizes (bytes)
    ks: list              # sorted distinct concurrencies
    cells: dict           # (size, k) -> list of repeat values


CELL_RATES = ("swung", "mean", "quartile")


class EnvelopeSurface:
    def __init__(self, cell_rate: str = "swung"):
        if cell_rate not in CELL_RATES:
            raise ValueError(f"cell_rate {cell_rate!r}: one of {', '.join(CELL_RATES)}")
        self.cell_rate = cell_rate  # how a grid point's repeats make its value (_cell_rate)
        self.grids: dict[tuple[str, int], _Grid] = {}
        self._means: dict[tuple[str, int], dict] = {}
        self._shared: dict = {}   # GP fits, their posteriors, host lists: the same for a surface and its replicates
        self._rng = None
        self._memo: dict = {}     # look-ups already answered by this surface (a prediction repeats many)
        self.block = 1 << 20      # bytes per read/write call of the envelope's ops
        self.others: list = []    # surfaces of the same file system measured with other bytes per call or caches
        self.cold = True          # reads kept from every cache (False: measured with --drop-caches off)
        self.ops_per_proc = None  # files each process opened in turn (None: mtcenvelope's default, up to 16)
        self.hogs = 0             # processes per host that only computed beside its runs (0: idle hosts)
        self.gap_us = 0           # us its processes computed between two calls (0: back to back)
        self.young = False        # reads of files written on the reader's host ~0.2 s before (mtcenvelope --young)
        self._waits: dict = {}    # (T metric, hosts) -> {(size, k): share of its repeats' op time waiting for a CPU}
        self._firsts: dict = {}   # (T metric, hosts) -> {(size, k): share of its op time the processes' first ops took}

    # ---- fit ---------------------------------------------------------------------------------------------------------
    def fit(self, points) -> "EnvelopeSurface":
        """Group ok points by (metric, hosts) into grids over (file_size, nprocs)."""
        rows = points.to_dict("records") if hasattr(points, "to_dict") else list(points)
        cells: dict = {}
        clocks: dict = {}         # (T metric, hosts) -> {(size, k): [seconds waiting for a CPU, seconds of ops]}
        firsts: dict = {}         # (T metric, hosts) -> {(size, k): [first-op shares of its repeats]}
        for r in rows:
            if not r.get("ok", True) or r.get("value") is None or r["metric"] not in METRICS:
                continue          # failed points, and metrics of other definitions (IOR's TNp, mdtest's Tmu)
            v = float(r["value"])
            if not math.isfinite(v) or v <= 0:
                continue
            hosts, ppn = int(r["hosts"]), int(r["procs_per_host"])
            key, ck = (r["metric"], hosts), (int(r["file_size"]), hosts * ppn)
            cells.setdefault(key, {}).setdefault(ck, []).append(v)
            if r["metric"] not in THROUGHPUT:
                continue
            cfg = _parsed(r.get("config"))
            clock = op_clock(cfg)
            if clock:
                acc = clocks.setdefault(key, {}).setdefault(ck, [0.0, 0.0])
                acc[0] += clock[0]
                acc[1] += clock[1]
            share = first_op_share(cfg)
            if share is not None:
                firsts.setdefault(key, {}).setdefault(ck, []).append(share)
        self._waits = {key: {ck: a / t for ck, (a, t) in c.items()} for key, c in clocks.items()}
        self._firsts = {key: {ck: sum(v) / len(v) for ck, v in c.items()} for key, c in firsts.items()}
        for key, c in cells.items():
            self.grids[key] = _Grid(sorted({s for s, _ in c}), sorted({k for _, k in c}), c)
            self._means[key] = {ck: _cell_rate(v, self.cell_rate) for ck, v in c.items()}
        return self

    def metrics(self) -> set:
        return {m for m, _ in self.grids}

    def host_counts(self, metric: str) -> list:
        hc = self._shared.get(("hosts", metric))
        if hc is None:
            hc = self._shared[("hosts", metric)] = sorted(h for m, h in self.grids if m == metric)
        return hc

    def grid_for(self, metric: str, hosts: int | None, k: float | None = None):
        """(host count, grid) of a metric: the stage's own host count when measured (and, given k, covering
        concurrency k), else the nearest host count that covers k, else the nearest one."""
        memo = self._shared.setdefault("grid_for", {})    # the same for every replicate: a bootstrap asks ~10^4 times
        got = memo.get((metric, hosts, k))
        if got is None:
            got = memo[(metric, hosts, k)] = self._grid_for(metric, hosts, k)
        return got

    def _grid_for(self, metric, hosts, k):
        avail = self.host_counts(metric)
        if not avail:
            raise EnvelopeError(f"the envelope has no ok point of metric {metric} "
                                f"(has: {', '.join(sorted(self.metrics())) or 'none'})")

        def near(a):
            return (abs(math.log(a / hosts)) if hosts else 0, -a)
        if k is not None:
            k = max(float(k), 1.0)
            cover = [a for a in avail if self.grids[(metric, a)].ks[0] - 1e-9 <= k <= self.grids[(metric, a)].ks[-1]
                     + 1e-9]
            if cover:
                h = hosts if hosts in cover else min(cover, key=near)
                return h, self.grids[(metric, h)]
        h = hosts if hosts in avail else min(avail, key=near)
        return h, self.grids[(metric, h)]

    def at_calls(self, bytes_per_call: float | None, warm: bool = False, metric: str | None = None,
                 young: bool = False) -> "EnvelopeSurface":
        """This surface or one of `others` that has `metric` (and its bandwidth twin), of the cache state asked
        (warm: reads a cache may serve) when there is one, and of those the one whose bytes per call is nearest
        to bytes_per_call (in log scale; a tie keeps the first). Small calls cost more per byte on a FUSE mount,
        so an op is best looked up in an envelope measured with calls of its own size. young: among the envelopes
        of young reads (mtcenvelope --young), when there is one."""
        need = {metric, BANDWIDTH_OF.get(metric)} - {None}
        every = [s for s in [self, *self.others] if need <= s.metrics() and s.ops_per_proc == self.ops_per_proc
                 and s.hogs == self.hogs and s.gap_us == self.gap_us and s.young == young] or [self]
        pool = every if young else [s for s in every if s.cold != warm] or [s for s in every if s.cold == self.cold]
        if not bytes_per_call or bytes_per_call <= 0:
            return pool[0]
        return min(pool, key=lambda s: abs(math.log(bytes_per_call / s.block)))

    def has_warm(self) -> bool:
        return any(not s.cold and not s.hogs and not s.gap_us and not s.young for s in [self, *self.others])

    def has_young(self, metric: str) -> bool:
        return any(s.young and metric in s.metrics() and s.ops_per_proc == self.ops_per_proc for s in self.others)

    def loaded_twin(self, of: "EnvelopeSurface", metric: str) -> "EnvelopeSurface | None":
        """Of `others`, the one measured beside computing processes (hogs > 0) that stands for `of` under load:
        with `metric`, of its cache state and files per process, and of those the bytes per call nearest."""
        return self._twin(of, metric, lambda s: s.hogs and not s.gap_us)

    def apart_twin(self, of: "EnvelopeSurface", metric: str) -> "EnvelopeSurface | None":
        """Of `others`, the one measured with computing between calls (gap_us > 0, idle hosts) that stands for `of`
        when a task's calls come apart: with `metric`, of its cache state and files per process, the bytes per
        call nearest."""
        return self._twin(of, metric, lambda s: s.gap_us and not s.hogs)

    def _twin(self, of, metric, measured_so):
        pool = [s for s in self.others if measured_so(s) and metric in s.metrics() and s.cold == of.cold
                and s.ops_per_proc == of.ops_per_proc]
        return min(pool, key=lambda s: abs(math.log(s.block / of.block))) if pool else None

    def many_files(self, metric: str, warm: bool = False) -> "EnvelopeSurface | None":
        """Of `others`, one measured with more files per process than this one (cold, or warm if asked, with
        `metric`): the refined model's first_op takes from it what a process's later ops cost next to its first."""
        mine = self.ops_per_proc or DEFAULT_OPS_PER_PROC
        more = [s for s in self.others if s.cold != warm and not s.hogs and not s.gap_us and not s.young
                and metric in s.metrics() and (s.ops_per_proc or DEFAULT_OPS_PER_PROC) > mine]
        return max(more, key=lambda s: s.ops_per_proc or DEFAULT_OPS_PER_PROC) if more else None

    def replicate(self, rng, ops: dict | None = None) -> "EnvelopeSurface":
        """A bootstrap replicate: every cell's (harmonic) mean over its repeats resampled with replacement.
        ops (metric -> ops one slot does at it): a cell of such a metric with more repeats than that is instead
        the mean time per op of that many ops drawn from the resampled repeats: one run's outcome (_Drawn)."""
        rep = EnvelopeSurface(self.cell_rate)
        rep.grids, rep._shared, rep._rng, rep.block = self.grids, self._shared, rng, self.block
        rep.others = [o.replicate(rng, ops) for o in self.others]
        rep.cold, rep.ops_per_proc, rep.hogs, rep.gap_us = self.cold, self.ops_per_proc, self.hogs, self.gap_us
        rep.young, rep._waits, rep._firsts = self.young, self._waits, self._firsts
        for key, g in self.grids.items():
            n = (ops or {}).get(THROUGHPUT_OF.get(key[0], key[0]))
            rep._means[key] = _Drawn(g.cells, rng, n, self.cell_rate)
        return rep

    def unsteady(self) -> tuple:
        """(op-rate points whose repeats swung, mtcio.envelope.stats.swung, those of 5 or more repeats, the widest
        swung point as (metric, size, k, hosts, lowest, highest)): how much the machine moved while the envelope was
        measured. On the kept passes: 0-2 of 302 points of the main envelope where it was steady, 38-40 where it was
        slow for minutes (AH, AJ; docs/experiments/montage-passes.md)."""
        n = bad = 0
        worst, widest = None, 0.0
        for (metric, h), g in self.grids.items():
            for (size, k), v in g.cells.items():
                if len(v) < 5 or metric not in THROUGHPUT:    # a bandwidth point is its T point x size
                    continue
                n += 1
                if swung(v):
                    bad += 1
                    lo, hi = quartiles(v)
                    if hi / lo > widest:
                        widest, worst = hi / lo, (metric, size, k, h, min(v), max(v))
        return bad, n, worst

    # ---- lookup ------------------------------------------------------------------------------------------------------
    def value(self, metric: str, size: float, k: float, hosts: int | None = None, *,
              clamp_small: bool = True) -> Lookup:
        """The metric at file size `size` (bytes) and concurrency `k`, on `hosts` hosts when measured."""
        key = (metric, size, k, hosts, clamp_small)
        lk = self._memo.get(key)
        if lk is None:
            lk = self._memo[key] = self._value(metric, size, k, hosts, clamp_small)
        return lk

    def _value(self, metric, size, k, hosts, clamp_small) -> Lookup:
        if metric not in THROUGHPUT and metric not in THROUGHPUT_OF:
            raise EnvelopeError(f"unknown envelope metric {metric!r}")
        h, g = self.grid_for(metric, hosts, k)
        note = "" if hosts in (None, h) else f"measured on {h} hosts, not {hosts}: taken at the same concurrency"
        key = (metric, h)
        if metric in SIZELESS:
            size = g.sizes[0]                      # creates of empty files: one size
        k = max(float(k), 1.0)
        smin, smax = g.sizes[0], g.sizes[-1]
        if metric not in SIZELESS and ((clamp_small and size < smin) or size > smax):
            # below the smallest size an op costs what the smallest one did (metadata-bound: T held);
            # above the largest, bandwidth stays where the largest transfer put it (B held). B = T x size.
            edge = smin if size < smin else smax
            lk = self.value(metric, edge, k, hosts, clamp_small=False)
            held_t = size < smin
            is_t = metric in BANDWIDTH_OF
            v = lk.value * (1.0 if held_t == is_t else (size / edge if held_t else edge / size))
            if held_t:
                why = f"{metric}: {fmt_size(size)} is below the smallest measured size {fmt_size(smin)}; " \
                      f"op rate taken there (metadata-bound)"
                src = "clamped" if lk.source in ("measured", "interpolated") else lk.source
            else:
                why = f"{metric}: size {fmt_size(size)} is {size / smax:.3g}x the largest measured " \
                      f"{fmt_size(smax)}; bandwidth held at its value there (bandwidth-bound)"
                src = "extrapolated"
            return Lookup(v, src, "; ".join(x for x in (why, lk.note) if x))
        k = _snap(k, g.ks)
        size = size if metric in SIZELESS else _snap(size, g.sizes)
        kc = min(max(k, g.ks[0]), g.ks[-1])
        edge = self._bilinear(key, g, size, kc) if g.sizes[0] <= size <= g.sizes[-1] else None
        if edge is not None and kc == k:
            exact = size in g.sizes and k in g.ks
            return Lookup(edge, "measured" if exact else "interpolated", note)
        if edge is not None:   # beyond the measured concurrency: the regression's trend from the grid's edge
            v = edge * math.exp(self._posterior(key, size, k, draw=True) - self._posterior(key, size, kc))
        else:                  # a hole in the grid
            v = math.exp(self._posterior(key, size, k, draw=True))
        return Lookup(v, "extrapolated", "; ".join(x for x in (_how_far(metric, g, size, k), note) if x))

    def wait_share(self, metric: str, size: float, k: float, hosts: int | None = None) -> float | None:
        """Share of the op time of the points around (size, k) on the host count `value` reads (a bandwidth metric:
        its throughput's points) that their processes waited for a CPU; None when those points have no clock."""
        return self._cell_share(self._waits, metric, size, k, hosts)

    def first_share(self, metric: str, size: float, k: float, hosts: int | None = None) -> float | None:
        """Share of the op time of the points around (size, k) that their processes' first ops took (envelopes of
        several files per process); None when those points do not have it."""
        return self._cell_share(self._firsts, metric, size, k, hosts)

    def _cell_share(self, shares, metric, size, k, hosts):
        """A per-cell share interpolated linearly in log(size) x log(k), held at the grid's edges."""
        metric = THROUGHPUT_OF.get(metric, metric)
        h, _ = self.grid_for(metric, hosts, k)
        w = shares.get((metric, h))
        if not w:
            return None
        sizes, ks = sorted({s for s, _ in w}), sorted({kk for _, kk in w})
        size = sizes[0] if metric in SIZELESS else min(max(size, sizes[0]), sizes[-1])
        k = min(max(float(k), ks[0]), ks[-1])
        s0, s1 = _bracket(sizes, size)
        k0, k1 = _bracket(ks, k)
        fx = 0.0 if s0 == s1 else (math.log(size) - math.log(s0)) / (math.log(s1) - math.log(s0))
        fy = 0.0 if k0 == k1 else (math.log(k) - math.log(k0)) / (math.log(k1) - math.log(k0))
        near = {(s0, k0): (1 - fx) * (1 - fy), (s1, k0): fx * (1 - fy), (s0, k1): (1 - fx) * fy, (s1, k1): fx * fy}
        got = [(f, w[c]) for c, f in near.items() if c in w and f > 0] or [(1.0, w[c]) for c in near if c in w]
        if not got:
            return None       # a hole: no clocked point around it
        return sum(f * v for f, v in got) / sum(f for f, _ in got)

    def _bilinear(self, key, g: _Grid, size, k):
        geo = self._shared.get(("bilinear", key, size, k))
        if geo is None:                           # where (size, k) sits in the grid: the same for every replicate
            geo = self._shared[("bilinear", key, size, k)] = _where(g, size, k)
        if geo is False:
            return None                           # a hole in the grid: regression fills it
        s0, s1, k0, k1, fx, fy, ls0, ls1, lx = geo
        means = self._means[key]
        lv = lambda s, kk: math.log(means[(s, kk)])  # noqa: E731
        bw = key[0] in THROUGHPUT_OF

        def along_size(kk):
            v0, v1 = lv(s0, kk), lv(s1, kk)
            if s0 != s1 and size < s1 and _is_step(v1 - v0 - (ls1 - ls0 if bw else 0.0), ls1 - ls0):
                return v0 + (lx - ls0 if bw else 0.0)     # below a step: the op rate of the smaller size
            return v0 * (1 - fx) + v1 * fx
        a, b = along_size(k0), along_size(k1)
        return math.exp(a * (1 - fy) + b * fy)

    def _regression(self, key):
        """The GP of one (metric, hosts) grid, fit once on the measured means and shared with every replicate."""
        gp = self._shared.get(key)
        if gp is None:
            g = self.grids[key]
            gp = self._shared[key] = gp_fit.regression({ck: sum(v) / len(v) for ck, v in g.cells.items()})
        return gp

    def _posterior(self, key, size, k, draw=False):
        """The regression's log value at (size, k); a bootstrap replicate draws it from the posterior."""
        memo = self._shared.setdefault(("posterior", key), {})
        post = memo.get((size, k))
        if post is None:
            post = memo[(size, k)] = self._regression(key).posterior((math.log(max(size, 1)), math.log(k)))
        return self._rng.gauss(*post) if (draw and self._rng is not None) else post[0]


def _where(g: _Grid, size, k):
    """(s0, s1, k0, k1, fx, fy, log s0, log s1, log size): the grid cell around (size, k) and the log-scale
    fractions across it; False when one of its corners was not measured."""
    s0, s1 = _bracket(g.sizes, size)
    k0, k1 = _bracket(g.ks, k)
    if any((s, kk) not in g.cells for s in (s0, s1) for kk in (k0, k1)):
        return False
    fx = 0.0 if s0 == s1 else (math.log(size) - math.log(s0)) / (math.log(s1) - math.log(s0))
    fy = 0.0 if k0 == k1 else (math.log(k) - math.log(k0)) / (math.log(k1) - math.log(k0))
    return (s0, s1, k0, k1, fx, fy, *(math.log(max(x, 1)) for x in (s0, s1, size)))


# an op-rate change between neighbouring sizes larger than this factor is a step, not a slope (_is_step): set when
# steps came (ee91288) between the testbed's ~27x jumps (600 -> 22 ops/s) and its ordinary slopes; not fitted
STEP = math.log(3.0)


def _is_step(d_log_t, d_log_size):
    """Whether the op rate changes between two neighbouring sizes by more than any slope explains: rising by
    over 3x, or falling by over 3x more than the size grew (flat op rate to flat bandwidth is the roofline's
    whole range). Such a change is a threshold (a buffer or message size), not a slope: sizes between the two
    take the smaller size's op rate, the threshold being at the larger one (gfarm2fs on the testbed: ~600 ops/s
    at 12 KiB, 22 at 16 KiB; 22 at 48 KiB, 450 at 64 KiB; a 15.7 KB read costs what 12 KiB costs)."""
    return (d_log_t > STEP) | (d_log_t < -(d_log_size + STEP))


def _snap(x, xs):
    """A value within 1e-9 (relative) of a measured one is that one (log-spaced grids land on them)."""
    for v in xs:
        if abs(x - v) <= 1e-9 * max(abs(v), 1):
            return v
    return x


def _parsed(config):
    """A point's config as a dict when it may hold a clock or a first-op share (None otherwise): parsed once."""
    if isinstance(config, str):
        if "op_wait_s" not in config and "first_op_share" not in config:
            return None
        try:
            config = json.loads(config)
        except ValueError:
            return None
    return config if isinstance(config, dict) else None


def first_op_share(config) -> float | None:
    """The share of a point's op time its processes' first ops took (mtcenvelope with several ops per process)."""
    config = _parsed(config)
    try:
        v = float(config["first_op_share"])
    except (KeyError, TypeError, ValueError):
        return None
    return v if 0 <= v < 1 else None


def op_clock(config) -> tuple | None:
    """(seconds its processes waited for a CPU during their ops, seconds of ops) from a point's config, or None."""
    config = _parsed(config)
    if not config:
        return None
    try:
        wait, ops = float(config["op_wait_s"]), float(config["op_s"])
    except (KeyError, TypeError, ValueError):
        return None
    return (wait, ops) if ops > 0 and 0 <= wait <= ops else None


def _cell_rate(v, how: str) -> float:
    """The rate of the repeats' mean time per op, the slowest repeat taken as the next slowest when there are 5 or
    more: one stalled repeat in five says little of how often an op stalls (tcp_nodelay testbed, one kept pass: a
    cell's 829, 28, 984, 997, 588 ops/s averaged to 124 and tripled two stages' predictions); two stay counted.
    how="swung" (the default): where the repeats swung (mtcio.envelope.stats.swung) their upper quartile instead
    (nearest rank, the 2nd fastest of 5): a one-process cell's repeats swing 5-20x while other work on the machine
    writes to its disk, and the quick repeats stand for the machine the runs had
    (docs/experiments/montage-passes.md, pass AL). how="quartile": the upper quartile of every cell of 5 or more
    repeats; "mean": the mean everywhere."""
    if (how == "quartile" and len(v) >= TRIM_FROM_REPEATS) or (how == "swung" and swung(v)):
        return quartiles(v)[1]
    t = sorted(1.0 / x for x in v)
    if len(t) >= TRIM_FROM_REPEATS:
        t[-1] = t[-2]
    return len(t) / sum(t)


class _Drawn(dict):
    """A replicate's cell values, drawn when first looked up (a stage reads a few dozen of the thousands of cells).
    n ops at a cell of r repeats: with n < r, the mean time per op of n ops drawn from the resampled repeats (one
    run's outcome: a stage of one write stalls as often as the repeats did); with n >= r, the resampled repeats'
    mean as the point estimate takes it (n ops average out at least as well as the repeats do)."""

    def __init__(self, cells, rng, n, how):
        super().__init__()
        self.cells, self.rng, self.n, self.how = cells, rng, n, how

    def __contains__(self, ck):
        return ck in self.cells

    def __missing__(self, ck):
        v = self.cells[ck]
        boot = [self.rng.choice(v) for _ in v]
        if self.n is None or round(self.n) >= len(v):
            rate = _cell_rate(boot, self.how)
        else:
            n = max(1, round(self.n))
            rate = n / sum(1.0 / self.rng.choice(boot) for _ in range(n))
        self[ck] = rate
        return rate


def _bracket(xs, x):
    i = bisect.bisect_left(xs, x)
    if i < len(xs) and xs[i] == x:
        return x, x
    return xs[max(i - 1, 0)], xs[min(i, len(xs) - 1)]


def _how_far(metric, g: _Grid, size, k) -> str:
    parts = []
    if size > g.sizes[-1]:
        parts.append(f"size {fmt_size(size)} is {size / g.sizes[-1]:.3g}x the largest measured {fmt_size(g.sizes[-1])}")
    elif size < g.sizes[0]:
        parts.append(f"size {fmt_size(size)} is 1/{g.sizes[0] / size:.3g} of the smallest measured "
                     f"{fmt_size(g.sizes[0])}")
    if k > g.ks[-1]:
        parts.append(f"concurrency {k:g} is {k / g.ks[-1]:.3g}x the largest measured {g.ks[-1]}")
    elif k < g.ks[0]:
        parts.append(f"concurrency {k:g} is below the smallest measured {g.ks[0]}")
    return f"{metric} extrapolated: " + (", ".join(parts) if parts else "grid cell not measured")


def fmt_size(n, sep: str = " ", short: bool = False) -> str:
    """Bytes for people: '4.2 MiB', '300 B'; sep='' gives '4.2MiB'; short gives '4.2M' and bare bytes '300'."""
    n = float(n or 0)
    for unit, f in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= f:
            return f"{n / f:.3g}{sep}{unit}{'' if short else 'iB'}"
    return f"{n:.0f}" if short else f"{n:.0f}{sep}B"


def grid_values(surface: EnvelopeSurface, metric: str, sizes, ks, hosts=None, clamp_small=True):
    """`surface.value` over a whole grid at once (numpy): array [len(ks), len(sizes)] of values.

    Same rules as the scalar look-up (each concurrency in the host count's grid that covers it), done with
    arrays so a 64x64 heatmap costs milliseconds; extrapolated cells go to the regression in one batch."""
    import numpy as np
    ks = np.asarray(ks, dtype=float)
    out = np.empty((len(ks), len(sizes)))
    rows: dict = {}
    for i, k in enumerate(ks):
        rows.setdefault(surface.grid_for(metric, hosts, k)[0], []).append(i)
    for h, idx in rows.items():
        out[idx] = _grid_values(surface, metric, sizes, ks[idx], h, clamp_small)
    return out


def _grid_values(surface, metric, sizes, ks, h, clamp_small):
    import numpy as np
    g = surface.grids[(metric, h)]
    key = (metric, h)
    means = surface._means[key]
    S = np.asarray(sizes, dtype=float)
    K = np.maximum(np.asarray(ks, dtype=float), 1.0)
    if metric in SIZELESS:
        S = np.full_like(S, g.sizes[0], dtype=float)
    smin, smax = g.sizes[0], g.sizes[-1]
    Sc = np.clip(S, smin, smax) if metric not in SIZELESS else S
    # scale from the clamped size back to the asked one: T held below smin, B held above smax
    if metric in SIZELESS:
        scale = np.ones_like(S)
    elif metric in BANDWIDTH_OF:        # throughput: T(smax) * smax / size above the largest size
        scale = np.where(S > smax, smax / S, 1.0)
        if not clamp_small:
            scale = np.where(S < smin, np.nan, scale)
    else:                               # bandwidth: B(smin) * size / smin below the smallest size
        scale = np.where(S < smin, S / smin, 1.0)
        if not clamp_small:
            scale = np.where(S < smin, np.nan, scale)
    ls, lk = np.log(np.maximum(np.array(g.sizes, float), 1)), np.log(np.array(g.ks, float))
    M = np.full((len(g.ks), len(g.sizes)), np.nan)
    for (s, k), v in means.items():
        M[g.ks.index(k), g.sizes.index(s)] = math.log(v)
    x, y = np.log(np.maximum(Sc, 1)), np.log(K)
    if len(g.sizes) > 1:
        i = np.clip(np.searchsorted(ls, x, side="right") - 1, 0, len(ls) - 2)
        fx = np.clip((x - ls[i]) / (ls[i + 1] - ls[i]), 0, 1)
    else:
        i, fx = np.zeros(len(x), int), np.zeros(len(x))
    inside_k = (y >= lk[0] - 1e-9) & (y <= lk[-1] + 1e-9)
    if len(g.ks) > 1:
        j = np.clip(np.searchsorted(lk, y, side="right") - 1, 0, len(lk) - 2)
        fy = np.clip((y - lk[j]) / (lk[j + 1] - lk[j]), 0, 1)
    else:
        j, fy = np.zeros(len(y), int), np.zeros(len(y))
    i1 = np.minimum(i + 1, len(ls) - 1)
    j1 = np.minimum(j + 1, len(lk) - 1)
    J, I = np.meshgrid(j, i, indexing="ij")
    J1, I1 = np.meshgrid(j1, i1, indexing="ij")
    FY, FX = np.meshgrid(fy, fx, indexing="ij")
    bw = metric in THROUGHPUT_OF
    LS, LS1 = ls[I], ls[I1]
    X = np.broadcast_to(x[None, :], FX.shape)

    def along_size(JJ):
        v0, v1 = M[JJ, I], M[JJ, I1]
        with np.errstate(invalid="ignore"):
            step = _is_step(v1 - v0 - ((LS1 - LS) if bw else 0.0), LS1 - LS) & (X < LS1) & (I1 != I)
        return np.where(step, v0 + ((X - LS) if bw else 0.0), v0 * (1 - FX) + v1 * FX)
    a, b = along_size(J), along_size(J1)
    out = a * (1 - FY) + b * FY
    # out holds the grid's value at the clamped concurrency (edge); beyond it, the regression's trend
    hole = ~np.isfinite(out)
    outside = ~inside_k[:, None] & ~hole
    if hole.any() or outside.any():
        gp = surface._regression(key)
        yc = np.clip(y, lk[0], lk[-1])
        XX = np.broadcast_to(np.log(np.maximum(Sc, 1))[None, :], out.shape)
        YY = np.broadcast_to(y[:, None], out.shape)
        YC = np.broadcast_to(yc[:, None], out.shape)
        if outside.any():
            mu = gp.predict(np.column_stack([XX[outside], YY[outside]]))
            mu_edge = gp.predict(np.column_stack([XX[outside], YC[outside]]))
            out[outside] = out[outside] + mu - mu_edge
        if hole.any():
            out[hole] = gp.predict(np.column_stack([XX[hole], YY[hole]]))
    return np.exp(out) * scale[None, :]
