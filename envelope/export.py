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
# the run's status, last CSV column (every row the same): complete | interrupted | failed (the
# sweep stopped on an error) | running (a sweep still going, or killed without a word) | ""
# (made before runs had a status)
CSV_STATUS = "run_status"


def run_status(meta: dict | None) -> str:
    """complete | interrupted | running | '' for a run's meta (imports are complete)."""
    meta = meta or {}
    if meta.get("status"):
        return str(meta["status"])
    return "complete" if meta.get("tool") == "import" else ""


def _is_sqlite(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def _not_ours(path: str, why: str) -> ValueError:
    # a --db and an export are both accepted where this is raised: say it is neither
    from mtcio.exitcodes import printable
    return ValueError(f"{printable(path)}: not an mtcio database (not an SQLite file), and not an "
                      f"envelope export ({why})")


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
    if os.path.isfile(db) and os.path.getsize(db) and not _is_sqlite(db):
        from mtcio.exitcodes import printable
        raise ValueError(f"{printable(db)}: not an mtcio database (not an SQLite file)")
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
                     "status": run_status(meta),
                     "tool": meta.get("tool", ""), "hosts": len(meta.get("hosts", []) or []) or "",
                     "points": len(p), "failed": int((~p["ok"]).sum()) if len(p) else 0,
                     "metrics": ",".join(sorted(set(p["metric"]))) if len(p) else ""})
    return pd.DataFrame(rows, columns=["name", "created", "status", "tool", "hosts", "points",
                                       "failed", "metrics"])


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
            r = st.runs()
            row = r[r["name"] == run]
            meta = (row.iloc[0]["meta"] or {}) if len(row) else {}
        if df.empty:
            raise LookupError(f"run {run!r} of {path} has no envelope points")
        out = _normalise(df, run)
        out.attrs["status"] = run_status(meta)
        return out
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _not_ours(path, "binary content") from None
    if not text.strip():
        raise _not_ours(path, "empty file")
    if text.lstrip().startswith(("run,", "metric,")):
        df = pd.read_csv(io.StringIO(text), keep_default_na=False, na_values={"value": [""]},
                         float_precision="round_trip",
                         dtype={"error": str, "tool_version": str})
        missing = [c for c in CSV_COLUMNS if c not in df.columns and c not in ("run", "nprocs")]
        if missing:
            raise ValueError(f"{path}: CSV lacks column(s) {', '.join(missing)}")
        runs = set(df["run"]) if "run" in df else {None}
        status = str(df[CSV_STATUS].iloc[0]) if CSV_STATUS in df and len(df) else ""
    else:
        import yaml
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError:
            raise _not_ours(path, "neither YAML nor CSV") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise _not_ours(path, f"no 'format: {FORMAT}'")
        if int(doc.get("version", 0)) > FORMAT_VERSION:
            raise ValueError(f"{path}: envelope format version {doc['version']} is newer than "
                             f"this reader ({FORMAT_VERSION})")
        rows = []
        for p in doc.get("points") or []:
            rows.append({**p, "run": doc.get("run"),
                         "unit": p.get("unit") or (doc.get("units") or {}).get(p["metric"])})
        df = pd.DataFrame(rows, columns=[c for c in COLUMNS if c != "nprocs"])
        runs = {doc.get("run")}
        status = str(doc.get("status") or "")
    if name is not None and name not in runs:
        raise LookupError(f"{path} holds run(s) {sorted(map(str, runs))}, not {name!r}")
    if df.empty:
        raise LookupError(f"{path} holds no envelope points")
    if name is not None and "run" in df:
        df = df[df["run"] == name]
    out = _normalise(df, name)
    out.attrs["status"] = status
    return out


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per metric x size x procs x hosts: n ok, failed, mean (harmonic: the rate of the mean time), std, min,
    max, the 90 % interval of the mean time (+-% of it) and the ops the repeats rest on; for people (`show`): sizes
    as '1.0 MiB', bandwidths in MiB/s."""
    from mtcio.units import fmt_bytes
    from .stats import ci90, hmean
    g = df.groupby(["metric", "file_size", "procs_per_host", "hosts", "unit"], sort=False)
    rows = []
    for (m, s, p, h, u), x in g:
        v = x.loc[x["ok"], "value"]
        ci = ci90(list(v))
        ops = [c.get("ops") for c in x["config"]]
        if u == "bytes/s":
            v, u = v / (1 << 20), "MiB/s"
        rows.append({"metric": m, "file_size": fmt_bytes(s), "ppn": p, "hosts": h, "nprocs": p * h,
                     "unit": u, "n": len(v), "failed": int((~x["ok"]).sum()),
                     "mean": hmean(list(v)) if len(v) else math.nan,
                     "std": v.std(ddof=1) if len(v) > 1 else math.nan,
                     "min": v.min() if len(v) else math.nan,
                     "max": v.max() if len(v) else math.nan,
                     "ci90": f"+-{100 * ci['rel_halfwidth']:.1f}%" if ci and
                     math.isfinite(ci["rel_halfwidth"]) else "-",
                     "ops": sum(ops) if all(isinstance(o, int) for o in ops) else "-"})
    out = pd.DataFrame(rows)
    order = {m: i for i, m in enumerate(["Tm", "Ts", "Tf", "T1L", "B1L", "T1R", "B1R", "TN", "BN", "TL", "BL"])}
    if not out.empty:
        out["bytes"] = [s for (_, s, _, _, _), _ in g]
        out = out.sort_values(["metric", "bytes", "hosts", "ppn"],
                              key=lambda c: c.map(order) if c.name == "metric" else c).drop(columns="bytes")
        for c in ("mean", "std", "min", "max"):
            out[c] = out[c].map(lambda v: f"{v:.4g}" if math.isfinite(v) else "-")   # one repeat: no std
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
    status = df.attrs.get("status", "")
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(CSV_COLUMNS + [CSV_STATUS])
        for p in df.to_dict("records"):
            w.writerow([p["run"], p["metric"], p["file_size"], p["procs_per_host"], p["hosts"],
                        p["nprocs"], p["repeat"],
                        "" if not p["ok"] or math.isnan(p["value"]) else repr(float(p["value"])),
                        p["unit"], int(p["ok"]), p["error"] or "", p["tool"],
                        p["tool_version"] or "", json.dumps(p["config"], sort_keys=True),
                        status])
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
    doc = {"format": FORMAT, "version": FORMAT_VERSION, "run": run, "status": status,
           "meta": meta,
           "units": {m: u for m, u in METRICS.items()}, "points": points}
    return yaml.safe_dump(doc, sort_keys=False, width=120)


def is_export(text: str) -> bool:
    """Whether a file's text is one of export()'s formats (YAML or CSV)."""
    head = text.lstrip()[:4096]
    return head.startswith(("run,", "metric,")) or \
        any(ln.strip() == f"format: {FORMAT}" for ln in head.splitlines()[:5])


def points_of_export(path: str) -> list:
    """The points of an exported YAML/CSV file, as stored (same repeat numbers, values,
    configs): what `mtcenvelope import` stores so that export -> import -> export is exact."""
    from .points import ParseError, Point
    try:
        df = load(path)
    except (LookupError, ValueError, KeyError, TypeError) as e:
        raise ParseError(path, f"not a readable envelope export: {e}") from None
    except Exception as e:  # noqa: BLE001 - yaml/csv/pandas errors of a damaged file
        raise ParseError(path, f"not a readable envelope export: {type(e).__name__}: "
                         f"{str(e)[:200]}") from None
    pts = []
    for n, r in enumerate(df.to_dict("records"), 1):
        try:
            ok = bool(r["ok"])
            pts.append(Point(r["metric"], int(r["file_size"]), int(r["procs_per_host"]),
                             int(r["hosts"]), float(r["value"]) if ok else math.nan, r["unit"],
                             int(r["repeat"]), str(r["tool"]), r["tool_version"],
                             dict(r["config"]), ok, r["error"]))
        except (ValueError, TypeError) as e:
            raise ParseError(path, f"point {n}: {e}") from None
        if pts[-1].ok and pts[-1].value == 0:
            from .drivers import zero_rate
            raise ParseError(path, f"point {n}: {zero_rate(pts[-1])}; nothing imported")
    return pts
