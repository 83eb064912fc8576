"""Write tests/fixtures/predictor/golden.json.gz: what the predictor predicts now, to hold a refactoring to it.

    .venv/bin/python tests/helpers/golden_capture.py [--out FILE]

Cases:
- every stage and envelope surface the predictor's tests predict in process (tests/test_predictor_*.py,
  tests/test_db_scaling.py, tests/test_scaling_fixture.py, run here under pytest with the model's entry points
  recorded): the faithful prediction, the default refined one and the refined one with the test's own set of
  refinements (less the refuted opt-in ones, which issue 52 deleted);
- the shipped Montage model (montage_example/montage.yaml) with the shipped envelope, and the models of the two
  traced runs of tests/fixtures/scale (16 tiles on 2 hosts, 64 on 4) with that db's two envelopes (1 MiB and
  8 KiB calls) and with the shipped one: faithful, default refined, none, and the default less each refinement.
Each case keeps the stage, the surface's points and conditions, and the outcome (total, terms, bounds, k, R, notes,
look-ups). Run it on the code before a change to the model, commit the file, then change the model.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
ROOT = os.path.dirname(TESTS)
sys.path.insert(0, TESTS)

from helpers.golden import (outcome, plain, rows_to_plain, stage_from_plain, surface_from_plain,  # noqa: E402
                            surface_to_plain)

OUT = os.path.join(TESTS, "fixtures", "predictor", "golden.json.gz")
TEST_FILES = ["test_predictor_model.py", "test_predictor_calibrate.py", "test_predictor_cli.py",
              "test_predictor_cli_input.py", "test_predictor_cli_names.py", "test_db_scaling.py",
              "test_scaling_fixture.py"]
SCALE_DB = os.path.join(TESTS, "fixtures", "scale", "montage-16x2-64x4.db.gz")


def _key(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


class Recorder:
    def __init__(self):
        self.rows, self.surfaces, self.stages = {}, {}, {}
        self.calls = {}           # (stage, surface, variant, refine, io_concurrency) -> (where, outcome in the test)

    def surface_key(self, s):
        rows = getattr(s, "_golden_rows", None)
        if rows is None:
            return None           # a bootstrap replicate (or a surface not fitted from points)
        others = [self.surface_key(o) for o in s.others]
        if None in others:
            return None
        rk = getattr(s, "_golden_rows_key", None)
        if rk is None:
            rk = s._golden_rows_key = _key(rows)
            self.rows.setdefault(rk, rows)
        d = surface_to_plain(None, s)
        d.pop("rows")
        d.update(rows=rk, others=others)
        k = _key(d)
        self.surfaces.setdefault(k, d)
        return k

    def stage_key(self, st):
        d = plain(st)
        k = _key(d)
        self.stages.setdefault(k, d)
        return k

    def record(self, stage, surface, variant, on, io_concurrency, p):
        sk = self.surface_key(surface)
        if sk is None:
            return
        key = (self.stage_key(stage), sk, variant, tuple(sorted(on)) if on is not None else None, io_concurrency)
        where = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
        self.calls.setdefault(key, (where, outcome(p)))

    def rebuild(self, key, memo):
        if key not in memo:
            d = self.surfaces[key]
            memo[key] = surface_from_plain({**d, "rows": self.rows[d["rows"]]},
                                           [self.rebuild(o, memo) for o in d["others"]])
        return memo[key]


def install(rec: Recorder):
    from mtcio.predictor import model
    from mtcio.predictor.surface import EnvelopeSurface
    fit = EnvelopeSurface.fit

    def recording_fit(self, points):
        self._golden_rows = rows_to_plain(points)
        return fit(self, points)
    EnvelopeSurface.fit = recording_fit
    refined, faithful = model._refined, model._faithful

    def rec_refined(stage, surface, on, io_concurrency):
        p = refined(stage, surface, on, io_concurrency)
        rec.record(stage, surface, "refined", on, io_concurrency, p)
        return p

    def rec_faithful(stage, surface):
        p = faithful(stage, surface)
        rec.record(stage, surface, "faithful", None, None, p)
        return p
    model._refined, model._faithful = rec_refined, rec_faithful
    return lambda: (setattr(EnvelopeSurface, "fit", fit), setattr(model, "_refined", refined),
                    setattr(model, "_faithful", faithful))


def surface_of(points, meta_source):
    """A surface as mtcpredict builds it from one envelope (predictor/cli.py)."""
    from mtcio.predictor.surface import EnvelopeSurface
    e = meta_source
    sf = EnvelopeSurface().fit(points)
    sf.block, sf.cold, sf.ops_per_proc, sf.hogs, sf.gap_us = e.block, e.cold, e.ops_per_proc, e.hogs, e.call_gap_us
    sf.young = e.young
    return sf


def explicit_cases(rec: Recorder, tmp: str) -> list:
    """(where, stage key, surface key, io_concurrency) of the Montage models with their envelopes."""
    from mtcio.db.workflow_model import load
    from mtcio.predictor import envelope_source
    out = []
    shipped = envelope_source.load(None)
    ship = surface_of(shipped.points, shipped)
    for st in load(os.path.join(ROOT, "montage_example", "montage.yaml")).stages:
        out.append(("montage.yaml, shipped envelope", rec.stage_key(st), rec.surface_key(ship), None))
    db = os.path.join(tmp, "scale.db")
    with gzip.open(SCALE_DB) as src, open(db, "wb") as dst:
        shutil.copyfileobj(src, dst)
    main, eight = (envelope_source.load(f"{db}:{n}") for n in ("bed4", "bed4-8k"))
    both = surface_of(main.points, main)
    both.others = [surface_of(eight.points, eight)]
    for run in ("m16x2", "m64x4"):
        path = os.path.join(tmp, f"{run}.yaml")
        r = subprocess.run([sys.executable, "-c", "import sys; from mtcio.cli import mtcprof; sys.exit(mtcprof())",
                            "model", "--db", db, "--run", run, "-o", path], capture_output=True, text=True)
        if r.returncode:
            raise SystemExit(f"mtcprof model {run}: {r.stderr.strip()}")
        for st in load(path).stages:
            out.append((f"scale fixture {run}, envelopes bed4 + bed4-8k", rec.stage_key(st), rec.surface_key(both),
                        None))
            out.append((f"scale fixture {run}, shipped envelope", rec.stage_key(st), rec.surface_key(ship), None))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=OUT)
    a = ap.parse_args()
    import pytest

    from mtcio.predictor import model
    rec = Recorder()
    undo = install(rec)
    os.chdir(ROOT)
    rc = pytest.main(["-q", "-m", "not testbed", "-p", "no:cacheprovider",
                      *(os.path.join(TESTS, f) for f in TEST_FILES)])
    if rc != 0:
        raise SystemExit(f"the tests failed (pytest exit {rc}): golden values are taken from passing code only")
    with tempfile.TemporaryDirectory() as tmp:
        extra = explicit_cases(rec, tmp)
    undo()
    opt_in = set(model.OPT_IN)
    default = tuple(sorted(model.DEFAULT))
    wanted = {}               # (stage, surface, variant, refine, io_concurrency) -> where
    for (stk, suk, variant, on, kio), (where, _) in rec.calls.items():
        wanted.setdefault((stk, suk, "faithful", None, None), where)
        wanted.setdefault((stk, suk, "refined", default, kio), where)
        if on is not None:
            wanted.setdefault((stk, suk, "refined", tuple(x for x in on if x not in opt_in), kio), where)
    for where, stk, suk, kio in extra:
        wanted.setdefault((stk, suk, "faithful", None, None), where)
        for on in [default, ()] + [tuple(x for x in default if x != drop) for drop in default]:
            wanted.setdefault((stk, suk, "refined", on, kio), where)
    memo, cases, checked = {}, [], 0
    for (stk, suk, variant, on, kio), where in wanted.items():
        st, sf = stage_from_plain(rec.stages[stk]), rec.rebuild(suk, memo)
        try:
            got = outcome(model.predict_stage(st, sf, variant, None if on is None else set(on), kio))
        except Exception as e:        # a stage the envelope cannot answer: the error is the outcome
            got = {"error": f"{type(e).__name__}: {e}"}
        seen = rec.calls.get((stk, suk, variant, on, kio))
        if seen is not None:          # the rebuilt stage and surface predict what the test's own did
            from helpers.golden import differences
            diff = differences(seen[1], got)
            if diff:
                raise SystemExit(f"{where}: rebuilt from JSON, the prediction differs: {diff[:3]}")
            checked += 1
        cases.append({"from": where, "stage": stk, "surface": suk, "variant": variant,
                      "refine": None if on is None else list(on), "io_concurrency": kio, "outcome": got})
    used_s = {c["surface"] for c in cases}
    todo = list(used_s)
    while todo:
        todo += [o for o in rec.surfaces[todo.pop()]["others"] if o not in used_s]
        used_s |= set(todo)
    surfaces = {k: rec.surfaces[k] for k in sorted(used_s)}
    doc = {"about": "predictions of the refined model as a sum of terms, after the ablation removed seven of its "
                    "refinements (issue 52, docs/experiments/ablation.md); "
                    "written by tests/helpers/golden_capture.py, checked by tests/test_predictor_golden.py",
           "rows": {k: rec.rows[k] for k in sorted({s["rows"] for s in surfaces.values()})},
           "surfaces": surfaces,
           "stages": {k: rec.stages[k] for k in sorted({c["stage"] for c in cases})},
           "cases": cases}
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as fh:   # the same bytes twice
        fh.write(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode() + b"\n")
    print(f"{a.out}: {len(cases)} cases ({checked} checked against the tests' own predictions), "
          f"{len(doc['stages'])} stages, {len(surfaces)} surfaces", file=sys.stderr)


if __name__ == "__main__":
    main()
