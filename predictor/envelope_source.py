"""Where the predictor's envelope comes from: `--envelope DB[:NAME] | FILE.yaml | FILE.csv`, or the one shipped.

The rows are those of `mtcio.envelope.load()` (envelope/README.md, "Export format"), read here with the
standard library alone so that `mtcpredict`'s terminal table starts without pandas.
"""
from __future__ import annotations

import csv
import json
import math
import os
import sqlite3
from dataclasses import dataclass, field

from mtcio.db import envelope_rows

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
    from_csv: bool = False    # a CSV export: points without the measurement's conditions (meta)

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
    return EnvelopeData(first.name, "+".join(e.origin for e in envs), first.points, first.meta, first.run, first.db,
                        first.from_csv)


def of_model(wf) -> str | None:
    """The envelope a workflow model names (`mtcprof model --envelope-run`) as DB:NAME in the db it was modelled
    from; None (the shipped one) when it names none. EnvelopeSourceError when it names one that is not there."""
    run = (wf.envelope or {}).get("run") if isinstance(wf.envelope, dict) else None
    if not run:
        return None
    db = (wf.source or {}).get("db") if isinstance(wf.source, dict) else None
    if not db or not os.path.isfile(db):
        raise EnvelopeSourceError(f"the workflow model names envelope run {run!r} of db {db or '(none given)'}, "
                                  "which is not there: give --envelope DB:NAME")
    return f"{db}:{run}"


def unusable(points) -> str:
    """Why none of `points` can be used, counted by reason (for 'no usable point')."""
    from .surface import METRICS
    why = {"not ok": 0, "unknown metric": 0, "no value": 0, "value not a number > 0": 0}
    names = set()
    for p in points:
        if not p.get("ok", True):
            why["not ok"] += 1
        elif p.get("metric") not in METRICS:
            why["unknown metric"] += 1
            names.add(str(p.get("metric")))
        elif p.get("value") is None:
            why["no value"] += 1
        else:
            why["value not a number > 0"] += 1
    out = ", ".join(f"{n} {k}" for k, n in why.items() if n) or "no points"
    if names:
        out += f" ({', '.join(sorted(names)[:5])}; known: {', '.join(METRICS)})"
    return f"{len(points)} point(s): {out}"


# meta fields the predictor reads, and what each must be (an export edited by hand, or written by another tool)
_META_INT = ("block", "ops_per_proc", "hogs_per_host", "idle_ms", "call_gap_us")


def _check_meta(meta, origin) -> dict:
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise EnvelopeSourceError(f"envelope {origin}: meta: must be a mapping, not {type(meta).__name__}")
    for where, m in (("meta", meta), ("meta.provenance", meta.get("provenance"))):
        if m is None:
            continue
        if not isinstance(m, dict):
            raise EnvelopeSourceError(f"envelope {origin}: {where}: must be a mapping")
        for k in _META_INT:
            v = m.get(k)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise EnvelopeSourceError(f"envelope {origin}: {where}.{k}: {v!r} is not a whole number >= 0")
        if m.get("young") is not None and not isinstance(m["young"], bool):
            raise EnvelopeSourceError(f"envelope {origin}: {where}.young: {m['young']!r} is not true or false")
        if m.get("machine_before") is not None and not isinstance(m["machine_before"], dict):
            raise EnvelopeSourceError(f"envelope {origin}: {where}.machine_before: must be a mapping")
    return meta


def _is_sqlite(path):
    with open(path, "rb") as f:
        return f.read(16) == b"SQLite format 3\x00"


def load(spec: str | None) -> EnvelopeData:
    if spec is None:
        d = _shipped_cached() or _yaml(SHIPPED)
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
    except UnicodeDecodeError:
        raise EnvelopeSourceError(f"envelope {path}: not a text file (nor an SQLite db)") from None


def _db(path, name):
    try:
        conn = envelope_rows.open_readonly(path)
        runs = envelope_rows.envelope_runs(conn)
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
    try:
        pts = envelope_rows.points_of(conn, rid)
        meta = json.loads(meta) if meta else {}
    except sqlite3.DatabaseError as e:
        raise EnvelopeSourceError(f"envelope {path}:{name}: not a readable mtcio db ({e})") from None
    except ValueError:
        raise EnvelopeSourceError(f"envelope {path}:{name}: the run's meta is not JSON") from None
    finally:
        conn.close()
    for p in pts:
        p["ok"] = bool(p["ok"])
    origin = f"{path}:{name}"
    return EnvelopeData(name, origin, pts, _check_meta(meta, origin), run=name, db=path)


def _shipped_cached() -> EnvelopeData | None:
    """The shipped envelope from predictor/gp.py's cache file, when that was written from this very YAML."""
    from mtcio.predictor import gp
    env = gp.shipped_cache().get("envelope")
    try:
        if not env or gp.shipped_cache().get("source_sha256") != gp.source_sha256(SHIPPED):
            return None
    except OSError:
        return None
    return EnvelopeData(env["name"], SHIPPED, env["points"], env["meta"])


def load_yaml(path) -> EnvelopeData:
    """An envelope YAML file, read and checked (never the cache)."""
    return _yaml(path)


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
                                                                              enumerate(pts)],
                        _check_meta(doc.get("meta"), path))


def _csv(path):
    with open(path, newline="") as fh:
        rd = csv.DictReader(fh)
        lack = [c for c in _REQUIRED if c not in (rd.fieldnames or [])]
        if lack:
            raise EnvelopeSourceError(f"envelope {path}: no column {', '.join(lack)} in its header (an `mtcenvelope "
                                      f"export --format csv` has {', '.join(_REQUIRED)}, value, ok, ...)")
        pts = []
        for i, r in enumerate(rd):
            try:
                r["value"] = float(r["value"]) if r.get("value") not in (None, "") else None
                r["ok"] = _flag(r.get("ok"), True)
            except (ValueError, AttributeError):
                raise EnvelopeSourceError(f"envelope {path}: row {i + 2}: value {r.get('value')!r} is not a "
                                          f"number") from None
            pts.append(_check(r, path, i + 2))
    if not pts:
        raise EnvelopeSourceError(f"envelope {path}: no points")
    return EnvelopeData(os.path.basename(path), path, pts, from_csv=True)


_REQUIRED = ("metric", "file_size", "hosts", "procs_per_host")


def _flag(v, default):
    """A point's ok as written by YAML (true/false), CSV ("True"/"False", 1/0) or a hand: anything else is None."""
    if v is None or v == "":
        return default
    if isinstance(v, bool):
        return v
    t = str(v).strip().lower()
    return True if t in ("1", "true", "yes") else False if t in ("0", "false", "no") else None


def _check(p, path, i):
    if not isinstance(p, dict):
        raise EnvelopeSourceError(f"envelope {path}: point {i}: must be a mapping")
    lack = [c for c in _REQUIRED if p.get(c) in (None, "")]
    if lack:
        raise EnvelopeSourceError(f"envelope {path}: point {i}: no {', '.join(lack)}")
    ok = _flag(p.get("ok"), True)
    if ok is None:
        raise EnvelopeSourceError(f"envelope {path}: point {i}: ok: {p.get('ok')!r} is not true or false")
    try:
        out = {"metric": str(p["metric"]), "file_size": int(p["file_size"]), "hosts": int(p["hosts"]),
               "procs_per_host": int(p["procs_per_host"]), "value": p.get("value"), "ok": ok,
               "repeat": int(p.get("repeat") or 0), "tool": p.get("tool"), "config": p.get("config")}
    except (TypeError, ValueError) as e:
        raise EnvelopeSourceError(f"envelope {path}: point {i}: {e}") from None
    if out["hosts"] < 1 or out["procs_per_host"] < 1 or out["file_size"] < 0:
        raise EnvelopeSourceError(f"envelope {path}: point {i}: hosts/procs must be >= 1, size >= 0")
    if out["value"] is not None:
        try:
            out["value"] = float(out["value"])
        except (TypeError, ValueError):
            raise EnvelopeSourceError(f"envelope {path}: point {i}: value {out['value']!r} is not a number") from None
        if out["ok"] and not (math.isfinite(out["value"]) and out["value"] > 0):
            raise EnvelopeSourceError(f"envelope {path}: point {i}: value {out['value']!r}: an ok point's rate must be "
                                      "a number > 0")
    return out
