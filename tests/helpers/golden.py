"""Predictions kept as golden values: a stage and an envelope surface as plain JSON, and what the model predicted.

    case = {"stage": stage_to_plain(st), "surface": surface_key, "variant": "refined", "refine": [...], ...}
    got = outcome(predict_stage(stage_from_plain(case["stage"]), surface_from_plain(...), ...))
    assert differences(case["outcome"], got) == []

tests/fixtures/predictor/golden.json.gz holds them (tests/helpers/golden_capture.py writes it from the code before a
change to the model: last after the ablation of issue 52); tests/test_predictor_golden.py asserts the code still
predicts them.
"""
from __future__ import annotations

import math
from dataclasses import fields

from mtcio.db.workflow_model import Dist, Measured, Metadata, Read, Shared, Stage, StageEnvelope, Write
from mtcio.predictor.surface import EnvelopeSurface

# a relative 1e-6: a GP fitted afresh (the scale fixture's envelopes) moves in its 8th digit between scipy and
# scikit-learn releases (1.17 / 1.9: ~1e-7); any change of the model's own moves far more
REL = 1e-6
# a surface's measurement conditions beside its points (predictor/cli.py sets them from the envelope's meta)
SURFACE_ATTRS = ("cell_rate", "block", "cold", "ops_per_proc", "hogs", "gap_us", "young")
ROW_KEYS = ("metric", "file_size", "hosts", "procs_per_host", "value", "ok", "repeat", "config")
_NESTED = {"read": Read, "shared": Shared, "write": Write, "metadata": Metadata, "measured": Measured,
           "envelope": StageEnvelope, "bytes_per_task": Dist, "file_size": Dist}


def _scalar(v):
    return v.item() if hasattr(v, "item") else v          # numpy scalars from a DataFrame's rows


def plain(o):
    if hasattr(o, "__dataclass_fields__"):
        return {f.name: plain(getattr(o, f.name)) for f in fields(o)}
    if isinstance(o, (list, tuple)):
        return [plain(x) for x in o]
    return _scalar(o)


stage_to_plain = plain


def stage_from_plain(d, cls=Stage):
    kw = {}
    for k, v in d.items():
        kw[k] = stage_from_plain(v, _NESTED[k]) if k in _NESTED and isinstance(v, dict) else v
    return cls(**kw)


def rows_to_plain(points) -> list:
    rows = points.to_dict("records") if hasattr(points, "to_dict") else list(points)
    out = []
    for r in rows:
        row = {k: _scalar(r[k]) for k in ROW_KEYS if k in r}
        if isinstance(row.get("value"), float) and math.isnan(row["value"]):
            row["value"] = None
        out.append(row)
    return out


def surface_to_plain(rows: list, surface) -> dict:
    return {"rows": rows, **{a: getattr(surface, a) for a in SURFACE_ATTRS}}


def surface_from_plain(d: dict, others: list = ()) -> EnvelopeSurface:
    s = EnvelopeSurface(d["cell_rate"]).fit(d["rows"])
    for a in SURFACE_ATTRS[1:]:
        setattr(s, a, d[a])
    s.others = list(others)
    return s


def load(path: str) -> dict:
    import gzip
    import json
    with gzip.open(path, "rt") as fh:
        return json.load(fh)


def surfaces_of(doc: dict):
    """surface key -> EnvelopeSurface, built once each (with its others) from a golden document."""
    memo = {}

    def build(key):
        if key not in memo:
            d = doc["surfaces"][key]
            memo[key] = surface_from_plain({**d, "rows": doc["rows"][d["rows"]]}, [build(o) for o in d["others"]])
        return memo[key]
    return build


def outcome(p) -> dict:
    """Everything a StagePrediction says but its interval (not set by predict_stage)."""
    d = p.to_dict()
    d.pop("interval")
    for k in ("read_s", "write_s", "meta_s", "shares", "dominant"):     # derived from the terms
        d.pop(k)
    d["ops_per_slot"] = p.ops_per_slot
    return plain(d)


def differences(want, got, where: str = "", rel: float = REL) -> list:
    """Where two outcomes differ: numbers beyond `rel`, anything else not equal (dicts compared by key)."""
    if isinstance(want, dict) and isinstance(got, dict):
        out = []
        if want.keys() != got.keys():
            out.append(f"{where}: keys {sorted(set(want) ^ set(got))} in one only")
        for k in want.keys() & got.keys():
            out += differences(want[k], got[k], f"{where}.{k}", rel)
        return out
    if isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            return [f"{where}: {len(want)} items, now {len(got)}: {want!r} -> {got!r}"]
        return [d for i, (a, b) in enumerate(zip(want, got)) for d in differences(a, b, f"{where}[{i}]", rel)]
    num = (int, float)
    if isinstance(want, num) and isinstance(got, num) and not isinstance(want, bool) and not isinstance(got, bool):
        if want == got or (math.isfinite(want) and math.isfinite(got)
                           and abs(want - got) <= rel * max(abs(want), abs(got))):
            return []
        return [f"{where}: {want!r} -> {got!r}"]
    return [] if want == got else [f"{where}: {want!r} -> {got!r}"]
