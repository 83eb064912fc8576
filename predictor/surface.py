"""The envelope as a surface: a metric's value at any file size and concurrency.

    surf = EnvelopeSurface().fit(points)            # points: dicts or a DataFrame (envelope.load())
    v = surf.value("TL", size=4.2e6, k=8, hosts=8)  # -> Lookup(value, source, note)

Concurrency k is the total number of processes doing I/O at once (hosts x processes per host), the
envelope's `nprocs`. Values of one host count form a grid over (file size, k); the host count used is
the stage's own when measured, else the nearest one (the lookup then says so).

- measured: exactly at a grid point (mean over ok repeats);
- interpolated: bilinear in log(size) x log(k) of log(value): exact at grid points and monotone
  between neighbours along each axis;
- clamped: a throughput (T*) below the smallest measured size is taken at that size: an operation on a
  tiny file costs its open/close, it is metadata-bound and no cheaper than the smallest one measured
  (bandwidth then follows as T x size);
- extrapolated, size above the largest measured: bandwidth held at its value at the largest size
  (the roofline's bandwidth ceiling; a regression would invent bandwidth no transfer reached), T = B / size;
- extrapolated, concurrency outside the measured range (or a missing grid cell): a Gaussian-process
  regression on log size x log k -> log value (scikit-learn, imported only then).
Every non-measured value carries a note naming the metric and how far out it is.

`replicate(rng)` gives a surface whose cells are means of repeats resampled with replacement (and
extrapolated values drawn from the GP posterior): the bootstrap behind the prediction intervals.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

THROUGHPUT = ("Tm", "T1L", "T1R", "TN", "TL")
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


class EnvelopeSurface:
    def __init__(self):
        self.grids: dict[tuple[str, int], _Grid] = {}
        self._means: dict[tuple[str, int], dict] = {}
        self._gp: dict = {}
        self._rng = None

    # ---- fit ---------------------------------------------------------------------------------------------------------
    def fit(self, points) -> "EnvelopeSurface":
        """Group ok points by (metric, hosts) into grids over (file_size, nprocs)."""
        rows = points.to_dict("records") if hasattr(points, "to_dict") else list(points)
        cells: dict = {}
        for r in rows:
            if not r.get("ok", True) or r.get("value") is None:
                continue
            v = float(r["value"])
            if not math.isfinite(v) or v <= 0:
                continue
            hosts, ppn = int(r["hosts"]), int(r["procs_per_host"])
            key = (r["metric"], hosts)
            cells.setdefault(key, {}).setdefault((int(r["file_size"]), hosts * ppn), []).append(v)
        for key, c in cells.items():
            self.grids[key] = _Grid(sorted({s for s, _ in c}), sorted({k for _, k in c}), c)
            self._means[key] = {ck: sum(v) / len(v) for ck, v in c.items()}
        return self

    def metrics(self) -> set:
        return {m for m, _ in self.grids}

    def host_counts(self, metric: str) -> list:
        return sorted(h for m, h in self.grids if m == metric)

    def grid_for(self, metric: str, hosts: int | None):
        """(host count, grid) of a metric: the stage's own host count when measured, else the nearest."""
        avail = self.host_counts(metric)
        if not avail:
            raise EnvelopeError(f"the envelope has no ok point of metric {metric} "
                                f"(has: {', '.join(sorted(self.metrics())) or 'none'})")
        h = hosts if hosts in avail else min(avail, key=lambda a: (abs(math.log(a / hosts)) if hosts else 0, -a))
        return h, self.grids[(metric, h)]

    def replicate(self, rng) -> "EnvelopeSurface":
        """A bootstrap replicate: every cell's mean over its repeats resampled with replacement."""
        rep = EnvelopeSurface()
        rep.grids, rep._gp, rep._rng = self.grids, self._gp, rng
        for key, g in self.grids.items():
            rep._means[key] = {ck: sum(rng.choice(v) for _ in v) / len(v) for ck, v in g.cells.items()}
        return rep

    # ---- lookup ------------------------------------------------------------------------------------------------------
    def value(self, metric: str, size: float, k: float, hosts: int | None = None, *,
              clamp_small: bool = True) -> Lookup:
        """The metric at file size `size` (bytes) and concurrency `k`, on `hosts` hosts when measured."""
        if metric not in THROUGHPUT and metric not in THROUGHPUT_OF:
            raise EnvelopeError(f"unknown envelope metric {metric!r}")
        h, g = self.grid_for(metric, hosts)
        note = "" if hosts in (None, h) else f"measured on {h} hosts, not {hosts}: taken at the same concurrency"
        key = (metric, h)
        if metric == "Tm":
            size = g.sizes[0]                      # creates of empty files: one size
        k = max(float(k), 1.0)
        if clamp_small and size < g.sizes[0] and metric != "Tm":
            # metadata-bound below the smallest size: the op rate of the smallest size
            t_metric = THROUGHPUT_OF.get(metric, metric)
            lk = self.value(t_metric, g.sizes[0], k, hosts, clamp_small=False)
            v = lk.value * (size if metric in THROUGHPUT_OF else 1.0)
            src = "clamped" if lk.source in ("measured", "interpolated") else lk.source
            why = f"{metric}: {_fmt_size(size)} is below the smallest measured size {_fmt_size(g.sizes[0])}; " \
                  f"op rate taken there (metadata-bound)"
            return Lookup(v, src, "; ".join(x for x in (why, lk.note) if x))
        if size > g.sizes[-1] and metric != "Tm":
            # bandwidth-bound above the largest size: bandwidth held at its value there, ops = bandwidth / size
            b_metric = BANDWIDTH_OF.get(metric, metric)
            top = self.grid_for(b_metric, hosts)[1].sizes[-1]
            lk = self.value(b_metric, top, k, hosts, clamp_small=False)
            v = lk.value / size if metric in BANDWIDTH_OF else lk.value
            why = f"{metric}: size {_fmt_size(size)} is {size / top:.3g}x the largest measured {_fmt_size(top)}; " \
                  f"{b_metric} held at its value there (bandwidth-bound)"
            return Lookup(v, "extrapolated", "; ".join(x for x in (why, lk.note) if x))
        inside = g.sizes[0] <= size <= g.sizes[-1] and g.ks[0] <= k <= g.ks[-1]
        if inside:
            v = self._bilinear(key, g, size, k)
            if v is not None:
                exact = size in g.sizes and k in g.ks
                return Lookup(v, "measured" if exact else "interpolated", note)
        v = self._extrapolate(key, g, size, k)
        return Lookup(v, "extrapolated", "; ".join(x for x in (_how_far(metric, g, size, k), note) if x))

    def _bilinear(self, key, g: _Grid, size, k):
        means = self._means[key]
        s0, s1 = _bracket(g.sizes, size)
        k0, k1 = _bracket(g.ks, k)
        corners = [(s, kk) for s in {s0, s1} for kk in {k0, k1}]
        if any(c not in means for c in corners):
            return None                           # a hole in the grid: regression fills it
        fx = 0.0 if s0 == s1 else (math.log(size) - math.log(s0)) / (math.log(s1) - math.log(s0))
        fy = 0.0 if k0 == k1 else (math.log(k) - math.log(k0)) / (math.log(k1) - math.log(k0))
        lv = lambda s, kk: math.log(means[(s, kk)])  # noqa: E731
        a = lv(s0, k0) * (1 - fx) + lv(s1, k0) * fx
        b = lv(s0, k1) * (1 - fx) + lv(s1, k1) * fx
        return math.exp(a * (1 - fy) + b * fy)

    def _extrapolate(self, key, g: _Grid, size, k):
        memo = self._gp.setdefault(("posterior", key), {})
        post = memo.get((size, k))
        if post is None:
            gp = self._gp.get(key)
            if gp is None:
                gp = self._gp[key] = _fit_gp({ck: sum(v) / len(v) for ck, v in g.cells.items()})
            import numpy as np
            mu, sd = gp.predict(np.array([[math.log(max(size, 1)), math.log(k)]]), return_std=True)
            post = memo[(size, k)] = (float(mu[0]), float(sd[0]))
        mu = post[0] if self._rng is None else self._rng.gauss(*post)   # a replicate draws from the posterior
        return math.exp(mu)


def _fit_gp(means: dict):
    """GP on (log size, log k) -> log value: smooth in both axes, a constant-mean prior far away."""
    import numpy as np
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
    X = np.array([[math.log(max(s, 1)), math.log(k)] for s, k in means])   # Tm's size is 0
    y = np.array([math.log(v) for v in means.values()])
    kernel = ConstantKernel(1.0, (1e-3, 1e3)) * RBF([3.0, 1.5], (1e-1, 1e3)) + WhiteKernel(1e-2, (1e-6, 1.0))
    gp = GaussianProcessRegressor(kernel, normalize_y=True, random_state=0)
    return gp.fit(X, y)


def _bracket(xs, x):
    i = bisect.bisect_left(xs, x)
    if i < len(xs) and xs[i] == x:
        return x, x
    return xs[max(i - 1, 0)], xs[min(i, len(xs) - 1)]


def _how_far(metric, g: _Grid, size, k) -> str:
    parts = []
    if size > g.sizes[-1]:
        parts.append(f"size {_fmt_size(size)} is {size / g.sizes[-1]:.3g}x the largest measured {_fmt_size(g.sizes[-1])}")
    elif size < g.sizes[0]:
        parts.append(f"size {_fmt_size(size)} is 1/{g.sizes[0] / size:.3g} of the smallest measured "
                     f"{_fmt_size(g.sizes[0])}")
    if k > g.ks[-1]:
        parts.append(f"concurrency {k:g} is {k / g.ks[-1]:.3g}x the largest measured {g.ks[-1]}")
    elif k < g.ks[0]:
        parts.append(f"concurrency {k:g} is below the smallest measured {g.ks[0]}")
    return f"{metric} extrapolated: " + (", ".join(parts) if parts else "grid cell not measured")


def _fmt_size(n) -> str:
    n = float(n)
    for unit, f in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= f:
            return f"{n / f:.3g} {unit}"
    return f"{n:.0f} B"
