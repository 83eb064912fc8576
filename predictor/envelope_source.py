"""Where the predictor's envelope comes from: `--envelope DB[:NAME] | FILE.yaml | FILE.csv`, or the one shipped.

The rows are those of `mtcio.envelope.load()` (envelope/README.md, "Export format"), read here with the
standard library alone so that `mtcpredict`'s terminal table starts without pandas.
"""
from __future__ import annotations

import csv
import json
import os
import sqlite3
from dataclasses import dataclass, field

SHIPPED = os.path.join(os.path.dirname(__file__), "data", "envelope-testbed4.yaml")
FORMAT = "mtcio-envelope"


class EnvelopeSourceError(ValueError):
    """The envelope named on the command line cannot be read."""


@dataclass
class EnvelopeData:
    name: str
    origin: str               # what to show: the db/file it came from, or "shipped"
    points: list
    meta: dict = field(default_factory=dict)
    run: str | None = None    # envelope run name in a db (for predictions rows)
    db: str | None = None

    def _said(self, key):
        """What the envelope's meta says of `key`, or its provenance (an exported envelope's)."""
        return self.meta.get(key) or (self.meta.get("provenance") or {}).get(key)

    @property
    def machine_before(self) -> dict:
        """The machine's load `mtcenvelope measure --look` saw before the sweep ({} if it did not look)."""
        return self._said("machine_before") or {}

    @property
    def block(self) -> int:
        """Bytes per read/write call the envelope was measured with (mtcenvelope's default, 1 MiB, if unsaid)."""
        b = self._said("block")
        return int(b) if b else 1 << 20

    @property
    def ops_per_proc(self) -> int | None:
        """Files each process of a point opened in turn (--ops-per-proc); None: mtcenvelope's default, up to 16."""
        v = self._said("ops_per_proc")
        return int(v) if v else None

    @property
    def cold(self) -> bool:
        """Whether reads were kept from every cache (mtcenvelope's default); False: `--drop-caches off`, or young
        reads (`--young`: none dropped between the writes and the reads)."""
        return self._said("drop_caches") != "off" and not self.young

    @property
    def hogs(self) -> int:
        """Processes per host that only computed beside every measured run (--hogs-per-host; 0: an idle host)."""
        v = self._said("hogs_per_host")
        return int(v) if v else 0

    @property
    def young(self) -> bool:
        """Whether its reads came at once after their write run, on the writer's host (--young)."""
        return bool(self._said("young"))

    @property
    def idle_ms(self) -> int:
        """Milliseconds every reader slept before each op after its first (--idle-ms; 0: back to back)."""
        v = self._said("idle_ms")
        return int(v) if v else 0

    @property
    def call_gap_us(self) -> int:
        """Microseconds every process computed between two calls (--call-gap-us; 0: back to back)."""
        v = self._said("call_gap_us")
        return int(v) if v else 0


def combined(envs: list) -> EnvelopeData:
    """One name for envelopes used together (one per call size): the first, with the others' origins joined by
    '+' so that stored predictions name every envelope they read."""
    if len(envs) == 1:
        return envs[0]
    first = envs[0]
    return EnvelopeData(first.name, "+".join(e.origin for e in envs), first.points, first.meta, first.run, first.db)


def _is_sqlite(path):
    with open(path, "rb") as f:
        return f.read(16) == b"SQLite format 3\x00"


def load(spec: str | None) -> EnvelopeData:
    if spec is None:
        d = _yaml(SHIPPED)
        d.origin = "shipped"
        return d
    path, name = spec, None
    if not os.path.exists(path) and ":" in spec:
        path, name = spec.rsplit(":", 1)
    if not os.path.exists(path):
        raise EnvelopeSourceError(f"envelope {spec}: no such file")
    if os.path.isdir(path):
        raise EnvelopeSourceError(f"envelope {path}: is a directory")
    try:
        if _is_sqlite(path):
            return _db(path, name)
        if name:
            raise EnvelopeSourceError(f"envelope {spec}: a run name can follow only a db (DB:NAME)")
        if path.lower().endswith(".csv"):
            return _csv(path)
        return _yaml(path)
    except OSError as e:
        raise EnvelopeSourceError(f"envelope {path}: cannot read ({e.strerror})") from None


def _db(path, name):
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        runs = conn.execute("SELECT id, name, meta FROM runs WHERE kind = 'envelope' ORDER BY id").fetchall()
    except sqlite3.DatabaseError as e:
        raise EnvelopeSourceError(f"envelope {path}: not a readable mtcio db ({e})") from None
    if not runs:
        raise EnvelopeSourceError(f"envelope {path}: no envelope run in this db")
    if name is None:
        rid, name, meta = runs[-1]
    else:
        match = [r for r in runs if r[1] == name]
        if not match:
            raise EnvelopeSourceError(f"envelope {path}: no envelope run {name!r} (runs: "
                                      f"{', '.join(r[1] for r in runs)})")
        rid, name, meta = match[0]
    cols = ("metric", "file_size", "procs_per_host", "hosts", "value", "unit", "repeat", "tool", "config", "ok",
            "error")
    rows = conn.execute(f"SELECT {', '.join(cols)} FROM envelope_points WHERE run_id = ?", (rid,)).fetchall()
    conn.close()
    pts = [dict(zip(cols, r)) for r in rows]
    for p in pts:
        p["ok"] = bool(p["ok"])
    return EnvelopeData(name, f"{path}:{name}", pts, json.loads(meta) if meta else {}, run=name, db=path)


def _yaml(path):
    import yaml
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        with open(path) as fh:
            doc = yaml.load(fh, Loader=loader)
    except yaml.YAMLError as e:
        raise EnvelopeSourceError(f"envelope {path}: not valid YAML ({str(e).splitlines()[0]})") from None
    except UnicodeDecodeError:
        raise EnvelopeSourceError(f"envelope {path}: not a text file") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise EnvelopeSourceError(f"envelope {path}: not an mtcio envelope export (format: {FORMAT} missing)")
    pts = doc.get("points")
    if not isinstance(pts, list):
        raise EnvelopeSourceError(f"envelope {path}: points: must be a list")
    return EnvelopeData(str(doc.get("run") or os.path.basename(path)), path, [_check(p, path, i) for i, p in
                                                                              enumerate(pts)], doc.get("meta") or {})


def _csv(path):
    with open(path, newline="") as fh:
        rd = csv.DictReader(fh)
        pts = []
        for i, r in enumerate(rd):
            try:
                r["value"] = float(r["value"]) if r.get("value") not in (None, "") else None
                r["ok"] = str(r.get("ok", "")).strip().lower() in ("1", "true", "yes")
            except (ValueError, AttributeError):
                raise EnvelopeSourceError(f"envelope {path}: row {i + 2}: value {r.get('value')!r} is not a "
                                          f"number") from None
            pts.append(_check(r, path, i + 2))
    if not pts:
        raise EnvelopeSourceError(f"envelope {path}: no points")
    return EnvelopeData(str(pts[0].get("run") or os.path.basename(path)), path, pts)


def _check(p, path, i):
    if not isinstance(p, dict):
        raise EnvelopeSourceError(f"envelope {path}: point {i}: must be a mapping")
    try:
        out = {"metric": str(p["metric"]), "file_size": int(p["file_size"]), "hosts": int(p["hosts"]),
               "procs_per_host": int(p["procs_per_host"]), "value": p.get("value"), "ok": bool(p.get("ok", True)),
               "repeat": int(p.get("repeat") or 0), "tool": p.get("tool"), "config": p.get("config")}
    except (KeyError, TypeError, ValueError) as e:
        raise EnvelopeSourceError(f"envelope {path}: point {i}: {type(e).__name__}: {e}") from None
    if out["hosts"] < 1 or out["procs_per_host"] < 1 or out["file_size"] < 0:
        raise EnvelopeSourceError(f"envelope {path}: point {i}: hosts/procs must be >= 1, size >= 0")
    if out["value"] is not None:
        try:
            out["value"] = float(out["value"])
        except (TypeError, ValueError):
            raise EnvelopeSourceError(f"envelope {path}: point {i}: value {out['value']!r} is not a number") from None
    return out
