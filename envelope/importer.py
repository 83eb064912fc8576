"""`mtcenvelope import`: benchmark outputs (IOR, mdtest, fio, iozone) and envelope exports
(YAML/CSV, export.py) into one run, each file's points once.

* Every file is parsed before anything is stored: one bad file stores nothing.
* A tool output's points carry ``imported_from`` and ``source_sha256`` in their config; a
  file whose content is already in the run (or given twice) is refused, so its points are
  never doubled. Another output of the same configuration gets the next free repeat numbers.
* An export's points are stored as they were exported (same repeats, values, configs), so
  export -> import -> export gives the same points; an export already in the run is refused.
* A run that exists already is added to only with ``append`` (as `measure --append`), and only
  when it is an import run: a measured run's points are never mixed with imported ones.
* ``hosts``/``procs_per_host`` say what fio and iozone outputs cannot; IOR and mdtest outputs
  and exports record their own counts, so a value that contradicts them is refused. A
  ``read_metric`` that no file has a read phase for is refused too: nothing would be stored
  the way the caller asked.
"""
from __future__ import annotations

import hashlib
import os
import sqlite3
from typing import Callable, Sequence

from mtcio.db import envelope_rows
from mtcio.db import store as dbstore
from mtcio.exitcodes import printable

from .points import ParseError, Point

# outputs that record how many hosts and processes per host ran (fio and iozone do not)
OWN_COUNTS = {"ior": "IOR", "mdtest": "mdtest"}


class DuplicateImport(ParseError):
    """A file whose points are already in the run."""


def _read(path: str) -> bytes:
    from .drivers import read_output
    return read_output(path)


def _key(p: Point) -> tuple:
    return (p.metric, p.file_size, p.procs_per_host, p.hosts, p.tool)


def parse_files(files: Sequence[str], *, read_metric: str | None = None,
                tool: str | None = None, hosts: int | None = None,
                procs_per_host: int | None = None) -> list[tuple[str, str, str, list[Point]]]:
    """[(file, kind 'export'|'output', sha256, points)] of every file; ParseError on the first
    file that cannot be read or is given twice."""
    from .drivers import parse_text
    from .export import is_export, points_of_export
    for opt, v in (("--hosts", hosts), ("--procs-per-host", procs_per_host)):
        if v is not None and v < 1:
            raise ValueError(f"{opt}: expected a positive integer, got {v}")
    out = []
    seen: dict[str, str] = {}
    for f in files:
        raw = _read(f)
        digest = hashlib.sha256(raw).hexdigest()
        if digest in seen:
            raise DuplicateImport(f, f"same content as {seen[digest]}: each output is "
                                  "imported once")
        seen[digest] = f
        text = raw.decode("utf-8", errors="replace")
        if tool is None and is_export(text):
            out.append((f, "export", digest, points_of_export(f)))
            continue
        ctx: dict = {"source": f, "config": {"imported_from": os.path.abspath(f),
                                             "source_sha256": digest}}
        if read_metric:
            ctx["read_metric"] = read_metric
        if hosts:
            ctx["hosts"] = hosts
        if procs_per_host:
            ctx["procs_per_host"] = procs_per_host
        out.append((f, "output", digest, parse_text(text, ctx, tool)))
    for f, kind, _, pts in out:
        _check_counts(f, kind, pts, hosts, procs_per_host)
    if read_metric:
        _check_read_metric(read_metric, out)
    return out


def _check_counts(f: str, kind: str, pts: list[Point], hosts: int | None,
                  procs_per_host: int | None) -> None:
    """--hosts/--procs-per-host set the counts of fio/iozone points only; IOR, mdtest and exports
    keep the counts they record, so a value that differs from them would be silently dropped."""
    tool = pts[0].tool if pts else ""
    if kind == "output" and tool not in OWN_COUNTS:
        return
    what = "this envelope export" if kind == "export" else f"this {OWN_COUNTS[tool]} output"
    for opt, v, attr, noun in (("--hosts", hosts, "hosts", "host count"),
                               ("--procs-per-host", procs_per_host, "procs_per_host",
                                "processes per host")):
        recorded = sorted({getattr(p, attr) for p in pts})
        if v is not None and recorded != [v]:
            raise ParseError(printable(f), f"{opt} {v}: {what} records its own {noun} "
                             f"({', '.join(map(str, recorded))}); {opt} is for fio and iozone "
                             "outputs, which do not")


def _check_read_metric(read_metric: str, parsed: list) -> None:
    """Refuse a --metric that no file has a read phase for (write/create-only outputs, exports,
    IOR shared-file reads, which are N-to-1 whatever the caller says)."""
    t = read_metric.replace("B", "T", 1)
    wanted = {t, "B" + t[1:]} | ({"TNp", "BNp"} if t == "TN" else set())
    if any(kind == "output" and any(p.metric in wanted for p in pts)
           for _, kind, _, pts in parsed):
        return
    if len(parsed) == 1:
        f, kind, _, pts = parsed[0]
        held = sorted({p.metric for p in pts})
        shared = "; shared-file reads are N-to-1 whatever it says" if "TNp" in held else ""
        where = (f"{printable(f)} is an envelope export (its points keep their metrics: "
                 f"{', '.join(held)})" if kind == "export" else
                 f"{printable(f)} has no read phase it applies to (its points: "
                 f"{', '.join(held)}{shared})")
    else:
        where = f"none of the {len(parsed)} files has a read phase it applies to"
    raise ValueError(f"--metric {read_metric}: {where}; leave --metric out")


def _existing(conn: sqlite3.Connection, name: str) -> tuple[int | None, set, dict]:
    """(run id, sha256 of the outputs in the run, {point key: max repeat})."""
    kind = envelope_rows.kind_of(conn, name)
    if kind is None:
        return None, set(), {}
    if kind != "envelope":
        raise ParseError(name, f"run {name!r} is a {kind} run, not an envelope run")
    rid = dbstore.run_id(conn, name)
    return rid, envelope_rows.source_shas(conn, rid), envelope_rows.max_repeats(conn, rid)


def _same_points(conn: sqlite3.Connection, rid: int, pts: list[Point]) -> int:
    """How many of ``pts`` the run already holds (same key, repeat, value and config)."""
    return sum(envelope_rows.holds_point(conn, rid, p.to_row()) for p in pts)


def _run_tool(conn: sqlite3.Connection, rid: int) -> str:
    """What made a run: 'import', or the tool `mtcenvelope measure` ran (native, ior, ...)."""
    import json
    meta = envelope_rows.meta_of_id(conn, rid)
    try:
        tool = (json.loads(meta) or {}).get("tool") if meta else None
    except (ValueError, AttributeError):
        tool = None
    return str(tool) if tool else "unknown"


def import_files(files: Sequence[str], db: str, name: str, *, read_metric: str | None = None,
                 tool: str | None = None, hosts: int | None = None,
                 procs_per_host: int | None = None, append: bool = False,
                 log: Callable[[str], None] = print) -> int:
    """Store the points of ``files`` into envelope run ``name`` of ``db``; returns the count.
    Raises ParseError (DuplicateImport) before storing anything when a file cannot be used, and
    ValueError when run ``name`` exists and ``append`` is not given or it is not an import run."""
    parsed = parse_files(files, read_metric=read_metric, tool=tool, hosts=hosts,
                         procs_per_host=procs_per_host)
    conn = dbstore.connect(db)
    try:
        rid, shas, reps = _existing(conn, name)
        plans = []
        for f, kind, digest, pts in parsed:
            if kind == "output" and digest in shas:
                raise DuplicateImport(f, f"already imported into run {name!r} (same content, "
                                      f"sha256 {digest[:12]}); nothing stored")
            if kind == "export" and rid is not None:
                same = _same_points(conn, rid, pts)
                if same:
                    raise DuplicateImport(f, f"{same} of its {len(pts)} points are already in "
                                          f"run {name!r}; nothing stored")
            note = ""
            if kind == "output":
                # another output of a configuration the run has: continue its repeat numbers
                clash = [reps[_key(p)] for p in pts if _key(p) in reps]
                if clash:
                    base = max(clash) + 1
                    for p in pts:
                        p.repeat += base
                    note = f"; repeats numbered from {base} (the run has this configuration)"
            for p in pts:
                reps[_key(p)] = max(reps.get(_key(p), -1), p.repeat)
            plans.append((f, kind, pts, note))
        # after the duplicate checks: "already imported" says more than "give --append"
        if rid is not None:
            made_by = _run_tool(conn, rid)
            if made_by != "import":
                what = (f"points measured with {made_by}" if made_by != "unknown" else
                        "points not made by mtcenvelope import")
                raise ValueError(f"run {name!r} in {printable(db)} holds {what}; imported points "
                                 "are not mixed into it: pick another --name")
            if not append:
                raise ValueError(f"run {name!r} already exists in {printable(db)}; pick another "
                                 "--name or give --append")
        total = 0
        meta = {"tool": "import", "status": "complete",
                "files": [os.path.abspath(x) for x in files]}
        for f, kind, pts, note in plans:
            total += dbstore.add_envelope_points(conn, name, pts, meta=meta)
            log(f"{f}: {len(pts)} points ({', '.join(sorted({p.metric for p in pts}))})"
                + (" from an envelope export" if kind == "export" else "") + note)
    finally:
        conn.close()
    log(f"imported {total} points into run {name!r} of {db}")
    return total


__all__ = ["import_files", "parse_files", "DuplicateImport"]
