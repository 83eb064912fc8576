"""The Gaussian process that extrapolates an envelope grid, fitted once and answered without scikit-learn.

    gp = regression(means)              # means: {(size, k): value} of one (metric, hosts) grid
    mu, sd = gp.posterior((log_size, log_k))  # one point, plain Python: log value and its posterior sd
    mu, sd = gp.predict(X, return_std=True)   # X: rows of (log size, log k), with numpy (a heatmap's grid)

The model is scikit-learn's GaussianProcessRegressor (ConstantKernel x RBF(2 length scales) + WhiteKernel,
normalize_y): fitting it means optimising the kernel's hyperparameters, which needs scikit-learn (~1 s to import
and fit). Answering needs only the fit: the training inputs, the Cholesky factor L of the kernel matrix, alpha =
K^-1 y, the kernel's parameters and the normalisation. Those are kept per grid in a fits file beside the shipped
envelope (data/envelope-testbed4.cache.json, keyed by a digest of the grid's means), so predicting with the
shipped envelope never imports scikit-learn; any other envelope is fitted as before, once per grid and run. The
same file holds the shipped envelope's points as read from its YAML (json reads them ~20x faster), used only while
the YAML's sha256 is the one recorded. `python -m mtcio.predictor.gp` writes the file again from the YAML.

predict() is scikit-learn's formula: mean = k(X, X_train) alpha, var = k(x, x) - |L^-1 k(X_train, x)|^2 (the
white noise counted in k(x, x)), both scaled back by the normalisation. The mean is the same product as
scikit-learn's; the sd's triangular solve is numpy's forward substitution, equal to LAPACK's to rounding.
posterior() is the same formula for one point in Python (a grid has a few dozen training points): a table's
look-ups beyond the measured concurrency then cost no numpy import (~70 ms).
"""
from __future__ import annotations

import hashlib
import json
import math
import os

CACHE = os.path.join(os.path.dirname(__file__), "data", "envelope-testbed4.cache.json")
# The kernel on (log size, log k) -> log value and its hyperparameters' starting values and bounds: chosen when the GP
# came (c9b8ea1), not tuned on any pass; the fit optimises each within its bounds. Length scales in natural-log
# units: 3.0 on size (~20x), 1.5 on processes (~4.5x); the default sweep's sizes lie 8-128x apart, its process
# counts 2x.
CONSTANT, CONSTANT_BOUNDS = 1.0, (1e-3, 1e3)
LENGTH_SCALES, LENGTH_BOUNDS = [3.0, 1.5], (1e-1, 1e3)
NOISE, NOISE_BOUNDS = 1e-2, (1e-6, 1.0)
# the same kernel, as the fits file names it: a fit is reused only for this text (changing the numbers above means
# `python -m mtcio.predictor.gp` again)
KERNEL = "ConstantKernel(1.0,(1e-3,1e3))*RBF([3.0,1.5],(1e-1,1e3))+WhiteKernel(1e-2,(1e-6,1.0));normalize_y"
_cache: dict | None = None


class FittedGP:
    """A fitted GP's answers without scikit-learn: one point in plain Python (`posterior`, the terminal table's
    path, which then never imports numpy), many at once with numpy (`predict`)."""

    def __init__(self, x_train, alpha, chol, constant, length_scale, noise, y_mean, y_std):
        self.x_train, self.alpha, self.chol = _floats(x_train), _floats(alpha), _floats(chol)
        self.constant, self.noise = float(constant), float(noise)
        self.length_scale = _floats(length_scale)
        self.y_mean, self.y_std = float(y_mean), float(y_std)
        self._scaled = [[a / s for a, s in zip(row, self.length_scale)] for row in self.x_train]

    @classmethod
    def of_sklearn(cls, gp) -> "FittedGP":
        k = gp.kernel_.get_params()
        return cls(gp.X_train_, gp.alpha_, gp.L_, k["k1__k1__constant_value"], k["k1__k2__length_scale"],
                   k["k2__noise_level"], gp._y_train_mean, gp._y_train_std)

    def to_dict(self) -> dict:
        return {"x_train": self.x_train, "alpha": self.alpha, "chol": self.chol, "constant": self.constant,
                "length_scale": self.length_scale, "noise": self.noise, "y_mean": self.y_mean, "y_std": self.y_std}

    def posterior(self, x) -> tuple:
        """(mean, sd) at one point x = (log size, log k): predict's formula, one point, in Python."""
        a = [v / s for v, s in zip(x, self.length_scale)]
        k_trans = [self.constant * math.exp(-0.5 * sum((p - q) ** 2 for p, q in zip(a, b))) for b in self._scaled]
        mean = self.y_std * sum(kt * al for kt, al in zip(k_trans, self.alpha)) + self.y_mean
        v = []                                  # L^-1 k_trans, forward substitution
        for i, row in enumerate(self.chol):
            v.append((k_trans[i] - sum(row[j] * v[j] for j in range(i))) / row[i])
        var = max((self.constant + self.noise) - sum(t * t for t in v), 0.0)
        return mean, math.sqrt(var * self.y_std ** 2)

    def predict(self, X, return_std: bool = False):
        import numpy as np
        X = np.atleast_2d(np.asarray(X, dtype=float))
        ls = np.asarray(self.length_scale)
        a, b = X / ls, np.asarray(self.x_train) / ls
        d = (a[:, None, :] - b[None, :, :]) ** 2
        k_trans = np.exp(-0.5 * d.sum(axis=2)) * self.constant      # RBF x constant (white noise: 0 off the data)
        mean = self.y_std * (k_trans @ np.asarray(self.alpha)) + self.y_mean
        if not return_std:
            return mean
        v = _forward(np.asarray(self.chol), k_trans.T)
        var = (self.constant + self.noise) - np.einsum("ij,ji->i", v.T, v)
        var[var < 0] = 0.0
        return mean, np.sqrt(var * self.y_std ** 2)


def _floats(x):
    """numpy arrays (a fit just made) and JSON lists (the fits file) alike as nested lists of float"""
    x = x.tolist() if hasattr(x, "tolist") else x
    return [_floats(v) for v in x] if isinstance(x, (list, tuple)) else float(x)


def _forward(L, B):
    """L^-1 B for lower-triangular L (forward substitution, one row at a time over all columns)."""
    import numpy as np
    out = np.empty_like(B, dtype=float)
    for i in range(L.shape[0]):
        out[i] = (B[i] - L[i, :i] @ out[:i]) / L[i, i]
    return out


def digest(means: dict) -> str:
    """Names a grid's training data and the kernel: a fit is reused only for exactly these means."""
    rows = sorted((int(s), int(k), repr(float(v))) for (s, k), v in means.items())
    return hashlib.sha256(json.dumps([KERNEL, rows]).encode()).hexdigest()[:32]


def training(means: dict):
    """(X, y) of a grid: log size (Tm's size is 0: log 1), log k -> log value."""
    import numpy as np
    X = np.array([[math.log(max(s, 1)), math.log(k)] for s, k in means])
    y = np.array([math.log(v) for v in means.values()])
    return X, y


def fit_sklearn(means: dict) -> FittedGP:
    """GP on (log size, log k) -> log value: smooth in both axes, a constant-mean prior far away."""
    import warnings

    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
    X, y = training(means)
    kernel = ConstantKernel(CONSTANT, CONSTANT_BOUNDS) * RBF(LENGTH_SCALES, LENGTH_BOUNDS) + \
        WhiteKernel(NOISE, NOISE_BOUNDS)
    gp = GaussianProcessRegressor(kernel, normalize_y=True, random_state=0)
    with warnings.catch_warnings():      # hyperparameters at a bound on small grids: the fit is still usable
        warnings.simplefilter("ignore")
        return FittedGP.of_sklearn(gp.fit(X, y))


def regression(means: dict) -> FittedGP:
    """The grid's GP: from the shipped fits when they hold this grid, else fitted now (scikit-learn)."""
    got = shipped().get(digest(means))
    if got is None:
        return fit_sklearn(means)
    return FittedGP(**{k: v for k, v in got.items() if k != "grid"})


def shipped_cache() -> dict:
    """The cache file's content ({} when it is missing or unreadable: everything is then read and fitted)."""
    global _cache
    if _cache is None:
        try:
            with open(CACHE) as f:
                _cache = json.load(f)
        except (OSError, ValueError):
            _cache = {}
    return _cache


def shipped() -> dict:
    """digest -> fit of the shipped envelope's grids."""
    return shipped_cache().get("fits") or {}


def source_sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def write_shipped(path: str = CACHE) -> int:
    """Read the shipped envelope's YAML, fit every grid, write the cache file; returns how many grids."""
    from mtcio.predictor import envelope_source
    from mtcio.predictor.surface import EnvelopeSurface
    env = envelope_source.load_yaml(envelope_source.SHIPPED)
    surf = EnvelopeSurface().fit(env.points)
    fits = {}
    for key, g in sorted(surf.grids.items()):
        means = {ck: sum(v) / len(v) for ck, v in g.cells.items()}
        fits[digest(means)] = {"grid": f"{key[0]} on {key[1]} hosts", **fit_sklearn(means).to_dict()}
    doc = {"about": "the shipped envelope (envelope-testbed4.yaml) as read, and the GP fits of its grids "
                    "(predictor/gp.py; python -m mtcio.predictor.gp writes this again)",
           "source_sha256": source_sha256(envelope_source.SHIPPED),
           "envelope": {"name": env.name, "meta": env.meta, "points": env.points}, "kernel": KERNEL, "fits": fits}
    with open(path, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    return len(fits)


if __name__ == "__main__":
    print(f"{write_shipped()} grid fits and the envelope's points written to {CACHE}")
