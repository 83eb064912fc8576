"""predictor/gp.py: the shipped envelope's GP fits are the ones scikit-learn makes, answer as scikit-learn does, and
spare the prediction scikit-learn's import."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from mtcio.predictor import envelope_source, gp
from mtcio.predictor.surface import EnvelopeSurface

ROOT = os.path.join(os.path.dirname(__file__), "..")


def _grids():
    surf = EnvelopeSurface().fit(envelope_source.load(None).points)
    return {key: {ck: sum(v) / len(v) for ck, v in g.cells.items()} for key, g in surf.grids.items()}


def test_every_shipped_grid_has_its_fit():
    grids = _grids()
    assert len(grids) == len(gp.shipped()) == 34
    assert {gp.digest(m) for m in grids.values()} == set(gp.shipped())


@pytest.mark.parametrize("key", [("T1R", 2), ("TL", 2), ("Tm", 4)])
def test_shipped_fit_is_scikit_learns(key):
    means = _grids()[key]
    fresh = gp.fit_sklearn(means)
    kept = gp.regression(means)
    # within a relative 1e-6: the optimiser's last digits move between scipy and scikit-learn releases (~5e-8
    # with 1.17 / 1.9); a fit of other data or another kernel moves far more
    for name in ("x_train", "alpha", "chol", "length_scale"):
        np.testing.assert_allclose(getattr(kept, name), getattr(fresh, name), rtol=1e-6, atol=0)
    for name in ("constant", "noise", "y_mean", "y_std"):
        assert getattr(kept, name) == pytest.approx(getattr(fresh, name), rel=1e-6)


def test_answers_as_scikit_learn():
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
    means = _grids()[("T1R", 2)]
    X, y = gp.training(means)
    kernel = ConstantKernel(1.0, (1e-3, 1e3)) * RBF([3.0, 1.5], (1e-1, 1e3)) + WhiteKernel(1e-2, (1e-6, 1.0))
    ref = GaussianProcessRegressor(kernel, normalize_y=True, random_state=0).fit(X, y)
    mine = gp.FittedGP.of_sklearn(ref)
    q = np.array([[math.log(s), math.log(k)] for s in (512, 1024, 5e5, 4.2e6, 3e7) for k in (1, 1.5, 2, 64)])
    mu, sd = ref.predict(q, return_std=True)
    mu2, sd2 = mine.predict(q, return_std=True)
    np.testing.assert_allclose(mu2, mu, rtol=1e-13, atol=0)
    np.testing.assert_allclose(sd2, sd, rtol=1e-10, atol=1e-14)
    assert 0 < sd2[6] < sd2[7]                   # 1 KiB: at a measured k (2) surer than far beyond it (64)
    one = [mine.posterior(x) for x in q.tolist()]     # one point in Python: the same numbers
    np.testing.assert_allclose([m for m, _ in one], mu, rtol=1e-12, atol=0)
    np.testing.assert_allclose([s for _, s in one], sd, rtol=1e-9, atol=1e-14)


def test_posterior_of_every_shipped_fit_is_predicts():
    for fit in gp.shipped().values():
        g = gp.FittedGP(**{k: v for k, v in fit.items() if k != "grid"})
        q = [[math.log(s), math.log(k)] for s in (1, 1024, 4.2e6, 1e9) for k in (1, 3, 8, 32, 128)]
        mu, sd = g.predict(q, return_std=True)
        one = [g.posterior(x) for x in q]
        np.testing.assert_allclose([m for m, _ in one], mu, rtol=1e-12, atol=0)
        np.testing.assert_allclose([s for _, s in one], sd, rtol=1e-9, atol=1e-12)


def test_prediction_with_the_shipped_envelope_imports_no_scikit_learn_nor_numpy():
    code = ("import sys, io, contextlib\n"
            "from mtcio.cli import mtcpredict\n"
            "sys.argv = ['mtcpredict', 'montage_example/montage.yaml']\n"
            "out = io.StringIO()\n"
            "with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):\n"
            "    try:\n        mtcpredict()\n    except SystemExit as e:\n        assert e.code in (0, None), e.code\n"
            "print('extrapolated' in out.getvalue() or 'mProjectPP' in out.getvalue(), "
            "'sklearn' in sys.modules, 'scipy' in sys.modules, 'numpy' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "False", "False", "False"]


def test_another_envelope_is_fitted_with_scikit_learn():
    means = {k: v * 1.5 for k, v in _grids()[("T1R", 2)].items()}
    assert gp.digest(means) not in gp.shipped()
    fit = gp.regression(means)
    base = gp.regression(_grids()[("T1R", 2)])
    x = [[math.log(4.2e6), math.log(1)]]
    assert fit.predict(x)[0] == pytest.approx(base.predict(x)[0] + math.log(1.5), abs=1e-3)   # the same shape


def test_cached_shipped_envelope_is_its_yaml():
    cached = envelope_source.load(None)
    read = envelope_source.load_yaml(envelope_source.SHIPPED)
    assert gp.shipped_cache()["source_sha256"] == gp.source_sha256(envelope_source.SHIPPED)
    assert (cached.name, cached.meta, cached.points) == (read.name, read.meta, read.points)
    assert len(cached.points) == 1510 and cached.origin == "shipped"


def test_a_changed_yaml_is_read_not_the_cache(tmp_path, monkeypatch):
    changed = tmp_path / "env.yaml"
    text = open(envelope_source.SHIPPED).read().replace("run: testbed4", "run: testbed4-edited", 1)
    changed.write_text(text)
    monkeypatch.setattr(envelope_source, "SHIPPED", str(changed))
    d = envelope_source.load(None)
    assert d.name == "testbed4-edited" and len(d.points) == 1510
