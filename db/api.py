"""Read API over the store: pandas DataFrames for reports, the predictor and notebooks.

    s = Store("mtc.db")
    s.runs(); s.envelope(run=None)
"""
from __future__ import annotations

import json
import os

import pandas as pd

from mtcio.db import store


class Store:
    """Read-only view of one db (opened with mode=ro; an older schema must be migrated by a writer first)."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self.conn = store.connect(self.path, readonly=True)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _df(self, sql: str, params=()) -> pd.DataFrame:
        cur = self.conn.execute(sql, params)
        cols = [d[0] for d in cur.description]
        return pd.DataFrame.from_records(cur.fetchall(), columns=cols)

    def _run_id(self, run) -> int:
        if isinstance(run, int):
            return run
        return store.run_id(self.conn, run)

    # ---- runs / envelope ---------------------------------------------------------------------------------------
    def runs(self) -> pd.DataFrame:
        """id, name, kind, created, meta (parsed JSON)."""
        df = self._df("SELECT id, name, kind, created, meta FROM runs ORDER BY id")
        df["meta"] = [json.loads(m) if m else None for m in df["meta"]]
        return df

    def envelope(self, run: str | int | None = None) -> pd.DataFrame:
        """Envelope points (all envelope runs, or one): run, metric, file_size, procs_per_host, hosts, value, unit,
        repeat, tool, tool_version, config (JSON text), ok (bool), error, measured_at, id."""
        sql = ("SELECT p.id, r.name AS run, p.metric, p.file_size, p.procs_per_host, p.hosts, p.value, p.unit, "
               "p.repeat, p.tool, p.tool_version, p.config, p.ok, p.error, p.measured_at "
               "FROM envelope_points p JOIN runs r ON r.id = p.run_id")
        params = ()
        if run is not None:
            sql += " WHERE p.run_id = ?"
            params = (self._run_id(run),)
        df = self._df(sql + " ORDER BY p.id", params)
        df["ok"] = df["ok"].astype(bool)
        return df
