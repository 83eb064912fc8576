"""Reading an envelope back: from the db or from an exported file (the predictor's input).

``load(path_or_db, name=None)`` returns the points table (one row per repeat) whatever the
source: a SQLite db (run ``name``, default the latest envelope run), a YAML export or a CSV
export (``name`` then must match the file's run, if given). Columns::

    metric, file_size, procs_per_host, hosts, nprocs, repeat, value, unit, ok, error,
    tool, tool_version, config (dict), run

The file formats are described in envelope/README.md ("Export format").
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
from typing import Any

import pandas as pd

FORMAT = "mtcio-envelope"
FORMAT_VERSION = 1
COLUMNS = ["metric", "file_size", "procs_per_host", "hosts", "nprocs", "repeat", "value", "unit",
           "ok", "error", "tool", "tool_version", "config", "run"]
CSV_COLUMNS = ["run", "metric", "file_size", "procs_per_host", "hosts", "nprocs", "repeat",
               "value", "unit", "ok", "error", "tool", "tool_version", "config"]


def _is_sqlite(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def _latest_envelope_run(st) -> str:
    runs = st.runs()
    env = runs[runs["kind"] == "envelope"]
    if env.empty:
        raise LookupError(f"no envelope run in {st.path}")
    return str(env.iloc[-1]["name"])


def runs_table(db: str) -> pd.DataFrame:
    """Envelope runs with their point counts."""
    from mtcio.db.api import Store
    if not os.path.exists(db):
        raise FileNotFoundError(f"no db {db}")
    with Store(db) as st:
        runs = st.runs()
        runs = runs[runs["kind"] == "envelope"]
        pts = st.envelope()
    rows = []
    for _, r in runs.iterrows():
        p = pts[pts["run"] == r["name"]]
        meta = r["meta"] or {}
        rows.append({"name": r["name"],
                     "created": pd.Timestamp(r["created"], unit="s").strftime("%Y-%m-%d %H:%M:%S")
                     if r["created"] else "",
                     "tool": meta.get("tool", ""), "hosts": len(meta.get("hosts", []) or []) or "",
                     "points": len(p), "failed": int((~p["ok"]).sum()) if len(p) else 0,
                     "metrics": ",".join(sorted(set(p["metric"]))) if len(p) else ""})
    return pd.DataFrame(rows, columns=["name", "created", "tool", "hosts", "points", "failed",
                                       "metrics"])


def _normalise(df: pd.DataFrame, run: str | None) -> pd.DataFrame:
    df = df.copy()
    if "run" not in df:
        df["run"] = run
    df["config"] = [c if isinstance(c, dict) else (json.loads(c) if isinstance(c, str) and c
                                                   else {}) for c in df["config"]]
    for c in ("file_size", "procs_per_host", "hosts", "repeat"):
        df[c] = df[c].astype(int)
    df["ok"] = df["ok"].map(lambda v: v if isinstance(v, bool) else
                            str(v).strip().lower() in ("1", "true", "yes"))
    df["value"] = pd.to_numeric(df["value"], errors="coerce").astype(float)
    df["nprocs"] = df["procs_per_host"] * df["hosts"]
    for c in ("error", "tool_version"):
        df[c] = df[c].map(lambda v: None if v is None or (isinstance(v, float) and math.isnan(v))
                          or v == "" else v)
    return df[COLUMNS].reset_index(drop=True)


def load(path_or_db: str | os.PathLike, name: str | None = None) -> pd.DataFrame:
    """The points table of an envelope from a db (run ``name``) or an exported YAML/CSV file."""
    path = os.fspath(path_or_db)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such envelope source: {path}")
    if _is_sqlite(path):
        from mtcio.db.api import Store
        with Store(path) as st:
            run = name or _latest_envelope_run(st)
            df = st.envelope(run)
        if df.empty:
            raise LookupError(f"run {run!r} of {path} has no envelope points")
        return _normalise(df, run)
    with open(path) as f:
        text = f.read()
    if text.lstrip().startswith(("run,", "metric,")):
        df = pd.read_csv(io.StringIO(text), keep_default_na=False, na_values={"value": [""]},
                         float_precision="round_trip",
                         dtype={"error": str, "tool_version": str})
        missing = [c for c in CSV_COLUMNS if c not in df.columns and c not in ("run", "nprocs")]
        if missing:
            raise ValueError(f"{path}: CSV lacks column(s) {', '.join(missing)}")
        runs = set(df["run"]) if "run" in df else {None}
    else:
        import yaml
        doc = yaml.safe_load(text)
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ValueError(f"{path}: not an envelope export (no 'format: {FORMAT}')")
        if int(doc.get("version", 0)) > FORMAT_VERSION:
            raise ValueError(f"{path}: envelope format version {doc['version']} is newer than "
                             f"this reader ({FORMAT_VERSION})")
        rows = []
        for p in doc.get("points") or []:
            rows.append({**p, "run": doc.get("run"),
                         "unit": p.get("unit") or (doc.get("units") or {}).get(p["metric"])})
        df = pd.DataFrame(rows, columns=[c for c in COLUMNS if c != "nprocs"])
        runs = {doc.get("run")}
    if name is not None and name not in runs:
        raise LookupError(f"{path} holds run(s) {sorted(map(str, runs))}, not {name!r}")
    if df.empty:
        raise LookupError(f"{path} holds no envelope points")
    if name is not None and "run" in df:
        df = df[df["run"] == name]
    return _normalise(df, name)


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per metric x size x procs x hosts: n ok, failed, mean, std, min, max."""
    g = df.groupby(["metric", "file_size", "procs_per_host", "hosts", "unit"], sort=False)
    rows = []
    for (m, s, p, h, u), x in g:
        v = x.loc[x["ok"], "value"]
        rows.append({"metric": m, "file_size": s, "ppn": p, "hosts": h, "nprocs": p * h,
                     "unit": u, "n": len(v), "failed": int((~x["ok"]).sum()),
                     "mean": v.mean() if len(v) else math.nan,
                     "std": v.std(ddof=1) if len(v) > 1 else math.nan,
                     "min": v.min() if len(v) else math.nan,
                     "max": v.max() if len(v) else math.nan})
    out = pd.DataFrame(rows)
    order = {m: i for i, m in enumerate(["Tm", "T1L", "B1L", "T1R", "B1R", "TN", "BN", "TL", "BL"])}
    if not out.empty:
        out = out.sort_values(["metric", "file_size", "hosts", "ppn"],
                              key=lambda c: c.map(order) if c.name == "metric" else c)
        for c in ("mean", "std", "min", "max"):
            out[c] = out[c].map(lambda v: f"{v:.4g}")
    return out


def export(db: str, name: str | None, fmt: str) -> str:
    df = load(db, name)
    run = str(df["run"].iloc[0])
    meta: dict[str, Any] = {}
    if _is_sqlite(db):
        from mtcio.db.api import Store
        with Store(db) as st:
            r = st.runs()
            row = r[r["name"] == run]
            meta = (row.iloc[0]["meta"] or {}) if len(row) else {}
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(CSV_COLUMNS)
        for p in df.to_dict("records"):
            w.writerow([p["run"], p["metric"], p["file_size"], p["procs_per_host"], p["hosts"],
                        p["nprocs"], p["repeat"],
                        "" if not p["ok"] or math.isnan(p["value"]) else repr(float(p["value"])),
                        p["unit"], int(p["ok"]), p["error"] or "", p["tool"],
                        p["tool_version"] or "", json.dumps(p["config"], sort_keys=True)])
        return buf.getvalue()
    if fmt != "yaml":
        raise ValueError(f"unknown format {fmt!r}: yaml or csv")
    import yaml
    from .points import METRICS
    points = []
    for p in df.to_dict("records"):
        d = {"metric": p["metric"], "file_size": int(p["file_size"]),
             "procs_per_host": int(p["procs_per_host"]), "hosts": int(p["hosts"]),
             "repeat": int(p["repeat"]), "value": None if not p["ok"] or math.isnan(p["value"])
             else float(p["value"]), "unit": p["unit"], "ok": bool(p["ok"])}
        if p["error"]:
            d["error"] = p["error"]
        d.update({"tool": p["tool"], "tool_version": p["tool_version"], "config": p["config"]})
        points.append(d)
    doc = {"format": FORMAT, "version": FORMAT_VERSION, "run": run, "meta": meta,
           "units": {m: u for m, u in METRICS.items()}, "points": points}
    return yaml.safe_dump(doc, sort_keys=False, width=120)
