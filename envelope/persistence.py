"""An envelope run in the db, through db/ only: refuse a run that exists (unless appended to, and only an envelope
run), store points as soon as they exist, write a point's precision into its repeats, keep the run's status."""
from __future__ import annotations

from typing import Any

from mtcio.db import envelope_rows
from mtcio.db import store as dbstore

from .points import Point
from .sweep import MeasureError


class EnvelopeRun:
    """Run ``name`` of ``db``, open for writing. ``repeat_base``: the first repeat number of this sweep's points (the
    next one of the run appended to, else 0). ``exists``: whether the run held points before."""

    def __init__(self, db: str, name: str, append: bool):
        self.db, self.name = db, name
        self.conn = dbstore.connect(db)
        kind = envelope_rows.kind_of(self.conn, name)
        self.exists = kind is not None
        self.repeat_base = 0
        self.meta: dict[str, Any] = {}
        if kind is not None:
            if not append:
                raise MeasureError(f"run {name!r} already exists in {db}; pick another --name or "
                                   "give --append")
            if kind != "envelope":
                raise MeasureError(f"run {name!r} is a {kind} run, not an envelope run")
            self.repeat_base = envelope_rows.next_repeat(self.conn, name)

    def store(self, points: list[Point]) -> None:
        dbstore.add_envelope_points(self.conn, self.name, points, meta=self.meta)

    def annotate(self, metrics, size, ppn, h, rep_lo, rep_hi, precision) -> None:
        """The point's precision into the config of each of its repeats."""
        envelope_rows.set_precision(self.conn, self.name, metrics, size, ppn, h, rep_lo, rep_hi, precision)

    def set_status(self, status: str) -> None:
        set_status(self.conn, self.name, status)

    def close(self) -> None:
        self.conn.close()


def set_status(conn, name: str, status: str) -> None:
    """Mark run ``name`` complete | interrupted | failed (stopped by an error) | running in
    its meta (list and export show it); nothing when the run has no point yet."""
    meta = envelope_rows.meta_of(conn, name)
    if meta is None:
        return
    meta["status"] = status
    envelope_rows.set_meta(conn, name, meta)
