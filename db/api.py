"""Read API over the store: pandas DataFrames for reports, the predictor and notebooks.

    s = Store("mtc.db")
    s.runs(); s.envelope(run=None)
    s.tasks(run); s.processes(run); s.files(run); s.file_access(run)        # rows as stored (+ joins)
    s.task_files(run)                                                        # per task x file, classes, locality
    s.stages(run); s.access_classes(run); s.locality(run, by="stage"|"host")
    s.busiest_files(run, n); s.histograms(run, by="stage"); s.timeline(run); s.ops(run); s.warnings(run)

`run` is a run name or id.  Times are CLOCK_REALTIME ns (*_ns) or seconds (*_s).  A "file" in the analyses is its
Gfarm path when it is on Gfarm (the same file read through two hosts' gfarm2fs mounts is one file), else its path.

Names (paths, cwd, hosts, tasks, stages, commands) are str; a name that is not UTF-8 comes back exactly, with its
undecodable bytes as surrogate escapes (os.fsencode(path) gives the bytes).  Store(path, readable=True) gives the
display form instead (\\xNN for such bytes and for control characters): for pages and traces people read.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd

from mtcio.db import store
from mtcio.db.gfarm import host_match
from mtcio.db import logformat as _lf
from mtcio.db.logformat import HIST_BINS, HIST_EDGES, NBINS, OPS


class Store:
    """Read-only view of one db (opened with mode=ro; an older schema must be migrated by a writer first)."""

    def __init__(self, path: str | os.PathLike, readable: bool = False):
        self.path = os.fspath(path)
        self.conn = store.connect(self.path, readonly=True)
        self._tf_cache: dict = {}
        self._name = store.readable if readable else store.text_of     # db name value -> str
        self.readable = readable

    def close(self) -> None:
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _df(self, sql: str, params=()) -> pd.DataFrame:
        cur = self.conn.execute(sql, params)
        cols = [d[0] for d in cur.description]
        df = pd.DataFrame.from_records(cur.fetchall(), columns=cols)
        for c in df.columns:          # names stored as BLOBs (not UTF-8) -> str; readable: display form
            if df[c].dtype == object and (self.readable or any(isinstance(v, bytes) for v in df[c])):
                df[c] = [self._name(v) for v in df[c]]
        return df

    def _names(self, values: list) -> list:
        """Names parsed from JSON columns (argv, mounts, replica hosts): display form when readable."""
        return [self._name(v) for v in values] if self.readable else values

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

    def trace_run(self, run: str | int) -> pd.Series:
        """The runs row of traced run `run` (name or id); StoreError naming the runs there are otherwise."""
        runs = self.runs()
        row = runs[runs["id"] == run] if isinstance(run, int) else runs[runs["name"] == self._name(run)]
        if not len(row):
            raise store.StoreError(f"no run named {run!r} in {self.path} "
                                   f"(runs: {', '.join(runs['name']) or 'none'})")
        row = row.iloc[0]
        if row["kind"] != "trace":
            traces = ", ".join(runs.loc[runs["kind"] == "trace", "name"]) or "none"
            raise store.StoreError(f"run {row['name']!r} is of kind {row['kind']!r}, not a traced run "
                                   f"(traced runs: {traces})")
        return row

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

    # ---- trace runs --------------------------------------------------------------------------------------------
    def tasks(self, run: str | int) -> pd.DataFrame:
        """One row per task attempt: id, name, attempt, stage, host, command, start_ns, end_ns, duration_s,
        exit_status, signal, n_processes, bytes/files read and written, read locality of ALL reads
        (bytes_read_local/remote/unknown, files_read_local/remote, alpha_all), bytes_written_local, t_io_s,
        alpha / alpha_files: the local fraction of the task's 1-to-1 reads (the model's alpha; NaN if none), and
        files_dropped / ops_dropped: records its processes dropped at the shim's limits (its counts lack them)."""
        rid = self._run_id(run)
        df = self._df("SELECT t.*, h.name AS host FROM tasks t LEFT JOIN hosts h ON h.id = t.host_id "
                      "WHERE t.run_id = ? ORDER BY t.start_ns, t.id", (rid,))
        df = df.drop(columns=["run_id", "host_id"])
        for c in ("exit_status", "signal"):        # NULL throughout (Darshan logs: not recorded): numbers, NaN
            df[c] = pd.to_numeric(df[c])
        drop = self._df("SELECT task_id, sum(files_dropped) AS files_dropped, sum(ops_dropped) AS ops_dropped "
                        "FROM processes WHERE run_id = ? AND task_id IS NOT NULL GROUP BY task_id", (rid,))
        drop = drop.set_index("task_id").reindex(df["id"]).fillna(0).astype(np.int64)
        df["files_dropped"] = drop["files_dropped"].to_numpy()
        df["ops_dropped"] = drop["ops_dropped"].to_numpy()
        df["duration_s"] = (df["end_ns"] - df["start_ns"]) / 1e9
        df["t_io_s"] = df.pop("t_io_ns") / 1e9
        known = df["bytes_read_local"] + df["bytes_read_remote"]
        df["alpha_all"] = (df["bytes_read_local"] / known).where(known > 0)
        tf = self.task_files(rid)
        one = tf[tf["read"] & (tf["read_class"] == "1-1") & tf["local"].notna()]
        if len(one):
            g = one.assign(lb=one["bytes_read"].where(one["local"].astype(bool), 0),
                           lf=one["local"].astype(bool).astype(int)).groupby("task_id")
            a = pd.DataFrame({"alpha": g["lb"].sum() / g["bytes_read"].sum(), "alpha_files": g["lf"].mean()})
            a.loc[g["bytes_read"].sum() == 0, "alpha"] = a["alpha_files"]
            df = df.merge(a, left_on="id", right_index=True, how="left")
        else:
            df["alpha"] = np.nan
            df["alpha_files"] = np.nan
        return df

    def processes(self, run: str | int) -> pd.DataFrame:
        """One row per process image (log): id, task_id, host, pid, ppid, origin, start_ns, end_ns, exit_status,
        ended_by, signal, chain_prev_id, exe, argv (list), cwd, task, stage, ops_traced, log_path, log_complete ...,
        io_s: its time in traced calls on every file it touched (0 when none)."""
        rid = self._run_id(run)
        df = self._df("SELECT p.*, h.name AS host, COALESCE(io.ns, 0) / 1e9 AS io_s FROM processes p "
                      "JOIN hosts h ON h.id = p.host_id LEFT JOIN (SELECT process_id, SUM(t_open_ns + t_read_ns + "
                      "t_write_ns + t_close_ns + t_meta_ns) AS ns FROM file_access GROUP BY process_id) io "
                      "ON io.process_id = p.id WHERE p.run_id = ? ORDER BY p.start_ns, p.id", (rid,))
        df["argv"] = [self._names(json.loads(a)) if a else [] for a in df["argv"]]
        df["gfarm_mounts"] = [self._names(json.loads(a)) if a else [] for a in df["gfarm_mounts"]]
        return df.drop(columns=["run_id", "host_id"])

    def files(self, run: str | int) -> pd.DataFrame:
        """One row per trace path: id, path, gfarm_path, key (Gfarm path, else the path), size, size_source,
        replica_hosts (list or None when unresolved), resolved_at, resolve_error."""
        rid = self._run_id(run)
        df = self._df("SELECT * FROM files WHERE run_id = ? ORDER BY id", (rid,)).drop(columns=["run_id"])
        df["key"] = df["gfarm_path"].where(df["gfarm_path"].notna(), df["path"])
        df["replica_hosts"] = [self._names(json.loads(r)) if r is not None else None for r in df["replica_hosts"]]
        return df

    def file_access(self, run: str | int) -> pd.DataFrame:
        """The shim's per process x file counters (every counter, hr0..hr9 / hw0..hw9 size bins) joined with
        process_id, task_id, task, stage, host, path, gfarm_path, key."""
        rid = self._run_id(run)
        return self._df(
            "SELECT fa.*, p.task_id, t.name AS task, t.stage, h.name AS host, f.path, f.gfarm_path, "
            "COALESCE(f.gfarm_path, f.path) AS key FROM file_access fa JOIN processes p ON p.id = fa.process_id "
            "JOIN hosts h ON h.id = p.host_id JOIN files f ON f.id = fa.file_id "
            "LEFT JOIN tasks t ON t.id = p.task_id WHERE p.run_id = ? ORDER BY fa.process_id, fa.fid", (rid,))

    def task_files(self, run: str | int, scope: str = "auto") -> pd.DataFrame:
        """Per (task, file) aggregates: task_id, task, stage, host, key, on_gfarm, size, replica_hosts, counters
        summed over the task's processes, and:
          read / written (bool), local (replica on the task's host; None when unknown),
          readers (tasks of the stage reading the file), read_class '1-1' | 'N-1' (None if not read),
          reread (bytes_read / size), stdio (used through a stdio stream by some process of the task),
          redirected (bytes written, all through fds the writing processes inherited: a shell's `>`),
          left_open (written through fds the task opened, some of which it never closed: left for exit to close).
        scope: 'gfarm' (Gfarm files only), 'all', or 'auto' (= gfarm when the run touched any Gfarm file)."""
        rid = self._run_id(run)
        if scope not in ("auto", "gfarm", "all"):
            raise ValueError(f"scope must be 'auto', 'gfarm' or 'all', not {scope!r}")
        key = (rid, scope)
        if key not in self._tf_cache:
            full = self._tf_cache.get((rid, "all"))
            if full is None:
                full = self._tf_cache[(rid, "all")] = self._task_files_all(rid)
            sc = scope
            if sc == "auto":
                sc = "gfarm" if len(full) and full["on_gfarm"].any() else "all"
            self._tf_cache[key] = full if sc == "all" else full[full["on_gfarm"]].reset_index(drop=True)
        return self._tf_cache[key]

    def _task_files_all(self, rid: int) -> pd.DataFrame:
        cols = _SUM_COLS + ("max_offset", "flags", "first_open_ns", "last_close_ns")
        rows = self.conn.execute(
            f"SELECT p.task_id, fa.file_id, {', '.join('fa.' + c for c in cols)} FROM file_access fa "
            f"JOIN processes p ON p.id = fa.process_id WHERE p.run_id = ? AND p.task_id IS NOT NULL",
            (rid,)).fetchall()
        raw = pd.DataFrame(np.array(rows, dtype=np.int64).reshape(-1, 2 + len(cols)),
                           columns=["task_id", "file_id", *cols])
        del rows
        files = self._df("SELECT id, COALESCE(gfarm_path, path) AS key, gfarm_path IS NOT NULL AS on_gfarm, size, "
                         "replica_hosts AS replicas, resolved_at FROM files WHERE run_id = ?", (rid,))
        kid, keys = pd.factorize(files["key"])
        files["kid"] = kid
        if files["kid"].is_unique:      # one trace path per file (the usual case): no per-group Python work
            kinfo = files.set_index("kid")[["on_gfarm", "size", "replicas", "resolved_at"]].sort_index()
        else:
            kinfo = files.groupby("kid").agg(on_gfarm=("on_gfarm", "max"), size=("size", "max"),
                                             replicas=("replicas", "max"), resolved_at=("resolved_at", "max"))
        kinfo["key"] = np.asarray(keys, dtype=object)
        raw["kid"] = pd.Series(kid, index=files["id"]).reindex(raw["file_id"]).to_numpy()
        raw["created"] = raw["flags"] & 1
        raw["stdio"] = (raw["flags"] & 4) > 0
        raw["own_written"] = raw["bytes_written"].where((raw["flags"] & 2) == 0, 0)   # through fds it opened
        raw["first_open_ns"] = raw["first_open_ns"].where(raw["first_open_ns"] > 0)
        agg = {c: "sum" for c in _SUM_COLS}
        agg.update(max_offset="max", created="max", stdio="max", first_open_ns="min", last_close_ns="max",
                   own_written="sum")
        df = raw.groupby(["task_id", "kid"], sort=False).agg(agg).reset_index()
        df["redirected"] = (df["bytes_written"] > 0) & (df["own_written"] == 0)
        df["left_open"] = (df["own_written"] > 0) & (df["closes"] < df["opens"] + df["dups"])
        df = df.join(kinfo, on="kid")
        tinfo = self._df("SELECT t.id AS task_id, t.name AS task, t.stage, h.name AS host FROM tasks t "
                         "LEFT JOIN hosts h ON h.id = t.host_id WHERE t.run_id = ?", (rid,)).set_index("task_id")
        df = df.join(tinfo, on="task_id")
        df = df[["task_id", "task", "stage", "host", "key", "on_gfarm", "size", "replicas", "resolved_at",
                 "max_offset", "created", "stdio", "redirected", "left_open", "first_open_ns", "last_close_ns",
                 *_SUM_COLS]]
        df["on_gfarm"] = df["on_gfarm"].astype(bool)
        df["read"] = (df["bytes_read"] > 0) | (df["reads"] > 0)
        df["written"] = (df["bytes_written"] > 0) | (df["writes"] > 0) | (df["creates"] > 0)
        reps, local = [], []
        cache = {}
        for r, res, h in zip(df["replicas"], df["resolved_at"], df["host"]):
            if r is None or res is None or pd.isna(res):
                reps.append(None)
                local.append(None)
                continue
            s = cache.get(r)
            if s is None:
                s = cache[r] = tuple(self._names(json.loads(r)))
            reps.append(list(s))
            local.append(host_match(h or "", s))
        df["replica_hosts"] = reps
        df["local"] = pd.array(local, dtype="boolean")
        df = df.drop(columns=["replicas"])
        rd = df[df["read"]]
        readers = rd.groupby([rd["stage"].fillna(""), "key"])["task_id"].nunique().rename("readers")
        df["readers"] = readers.reindex(pd.MultiIndex.from_arrays([df["stage"].fillna(""), df["key"]])) \
            .fillna(0).astype(int).to_numpy()
        df["read_class"] = np.where(~df["read"], None, np.where(df["readers"] >= 2, "N-1", "1-1"))
        df["reread"] = (df["bytes_read"] / df["size"]).where((df["size"] > 0) & df["read"])
        return df.reset_index(drop=True)

    def stages(self, run: str | int, scope: str = "auto") -> pd.DataFrame:
        """The stage table, one row per stage (in start order):
        stage, tasks (N), hosts (C), start_ns, end_ns, span_s (first start to last end), failed (nonzero exit),
        bytes_read, bytes_written, files_read, files_written (distinct files),
        read_1to1_files/_bytes, read_Nto1_files/_bytes (distinct files / bytes read), shared_size (D_N: summed
        size of the N-to-1 files), alpha / alpha_files (local fraction of 1-to-1 reads by bytes / by task-file
        pairs), alpha_all (all reads, by bytes), alpha_shared (N-to-1 reads), write_local (fraction of written
        bytes that landed on the writer's host), D_mean/D_min/D_max (per-task 1-to-1 bytes read),
        out_mean/out_min/out_max (per-task bytes written), meta_ops and per-counter sums (opens, creates, stats,
        unlinks, renames, mkdirs, rmdirs, truncates, fsyncs), meta_ops_per_task, reread_factor (bytes read /
        size over task-file pairs), read_discont, write_discont, t_io_s (sum of the tasks' time in I/O calls),
        io_s_mean/io_s_max (per task), concurrency (max tasks running at once), per_host_concurrency,
        files_dropped / ops_dropped (file records and ops the shim dropped at its limits: the numbers above lack
        them)."""
        rid = self._run_id(run)
        tasks = self.tasks(rid)
        tf = self.task_files(rid, scope)
        out = []
        for stage, t in tasks.groupby(tasks["stage"].fillna(""), sort=False):
            f = tf[tf["stage"].fillna("") == stage]
            r = f[f["read"]]
            w = f[f["written"]]
            one, shared = r[r["read_class"] == "1-1"], r[r["read_class"] == "N-1"]
            per_task_D = one.groupby("task_id")["bytes_read"].sum().reindex(t["id"], fill_value=0)
            per_task_out = w.groupby("task_id")["bytes_written"].sum().reindex(t["id"], fill_value=0)
            tio = (f[["t_open_ns", "t_read_ns", "t_write_ns", "t_close_ns", "t_meta_ns"]].sum(axis=1)
                   .groupby(f["task_id"]).sum().reindex(t["id"], fill_value=0) / 1e9)
            meta = {c: int(f[c].sum()) for c in META_COLS}
            row = {
                "stage": stage or None, "tasks": len(t), "hosts": t["host"].nunique(),
                "start_ns": int(t["start_ns"].min()), "end_ns": int(t["end_ns"].max()),
                "failed": int((t["exit_status"].fillna(0) != 0).sum()),
                "bytes_read": int(r["bytes_read"].sum()), "bytes_written": int(w["bytes_written"].sum()),
                "files_read": r["key"].nunique(), "files_written": w["key"].nunique(),
                "read_1to1_files": one["key"].nunique(), "read_1to1_bytes": int(one["bytes_read"].sum()),
                "read_Nto1_files": shared["key"].nunique(), "read_Nto1_bytes": int(shared["bytes_read"].sum()),
                "shared_size": int(shared.drop_duplicates("key")["size"].fillna(0).sum()),
                "alpha": _frac(one, "bytes_read"), "alpha_files": _frac_count(one),
                "alpha_all": _frac(r, "bytes_read"), "alpha_shared": _frac(shared, "bytes_read"),
                "write_local": _frac(w, "bytes_written"),
                "D_mean": float(per_task_D.mean()), "D_min": int(per_task_D.min()), "D_max": int(per_task_D.max()),
                "out_mean": float(per_task_out.mean()), "out_min": int(per_task_out.min()),
                "out_max": int(per_task_out.max()),
                **meta, "meta_ops": sum(meta[c] for c in _META_OPS),
                "reread_factor": (float(r["bytes_read"].sum() / r["size"].sum())
                                  if len(r) and r["size"].sum() > 0 else np.nan),
                "read_discont": int(f["read_discont"].sum()), "write_discont": int(f["write_discont"].sum()),
                "t_io_s": float(tio.sum()), "io_s_mean": float(tio.mean()), "io_s_max": float(tio.max()),
                "files_dropped": int(t["files_dropped"].sum()), "ops_dropped": int(t["ops_dropped"].sum()),
                "concurrency": _max_overlap(t["start_ns"], t["end_ns"]),
                "per_host_concurrency": max(_max_overlap(g["start_ns"], g["end_ns"]) for _, g in t.groupby("host"))
                if t["host"].notna().any() else _max_overlap(t["start_ns"], t["end_ns"]),
            }
            row["span_s"] = (row["end_ns"] - row["start_ns"]) / 1e9
            row["meta_ops_per_task"] = row["meta_ops"] / len(t)
            out.append(row)
        df = pd.DataFrame(out)
        return df.sort_values("start_ns").reset_index(drop=True) if len(df) else df

    def access_classes(self, run: str | int, scope: str = "auto") -> pd.DataFrame:
        """Per stage and class ('1-1', 'N-1', 'write'): files, tasks, bytes, local bytes, unknown-locality bytes."""
        tf = self.task_files(run, scope)
        rows = []
        for cls, sel, col in (("1-1", tf["read"] & (tf["read_class"] == "1-1"), "bytes_read"),
                              ("N-1", tf["read"] & (tf["read_class"] == "N-1"), "bytes_read"),
                              ("write", tf["written"], "bytes_written")):
            g = tf[sel]
            for stage, s in g.groupby(g["stage"].fillna(""), sort=False):
                loc = s["local"]
                rows.append({"stage": stage or None, "class": cls, "files": s["key"].nunique(),
                             "tasks": s["task_id"].nunique(), "task_files": len(s), "bytes": int(s[col].sum()),
                             "bytes_local": int(s.loc[loc.fillna(False).astype(bool), col].sum()),
                             "bytes_unknown": int(s.loc[loc.isna(), col].sum())})
        return pd.DataFrame(rows, columns=["stage", "class", "files", "tasks", "task_files", "bytes", "bytes_local",
                                           "bytes_unknown"])

    def locality(self, run: str | int, by: str = "stage", scope: str = "auto") -> pd.DataFrame:
        """Read locality grouped by 'stage', 'host' or ['stage', 'host']: bytes_local, bytes_remote,
        bytes_unknown, files_local, files_remote (task-file pairs), alpha (by bytes), alpha_files."""
        tf = self.task_files(run, scope)
        r = tf[tf["read"]].copy()
        r["stage"] = r["stage"].fillna("")
        isloc = r["local"].fillna(False).astype(bool)
        known = r["local"].notna()
        r["bytes_local"] = r["bytes_read"].where(isloc, 0)
        r["bytes_remote"] = r["bytes_read"].where(known & ~isloc, 0)
        r["bytes_unknown"] = r["bytes_read"].where(~known, 0)
        r["files_local"] = isloc.astype(int)
        r["files_remote"] = (known & ~isloc).astype(int)
        g = r.groupby(by)[["bytes_local", "bytes_remote", "bytes_unknown", "files_local", "files_remote"]].sum()
        g["alpha"] = g["bytes_local"] / (g["bytes_local"] + g["bytes_remote"])
        g["alpha_files"] = g["files_local"] / (g["files_local"] + g["files_remote"])
        return g.reset_index()

    def busiest_files(self, run: str | int, n: int = 20, by: str = "bytes", scope: str = "all") -> pd.DataFrame:
        """Top n files by 'bytes' (read + written), 'ops' (reads + writes + opens + stats) or 'time' (in I/O calls):
        key, size, tasks, readers, writers, bytes_read, bytes_written, reads, writes, opens, stats, t_io_s,
        replica_hosts, stages."""
        tf = self.task_files(run, scope)
        tf = tf.assign(t_io=tf[["t_open_ns", "t_read_ns", "t_write_ns", "t_close_ns", "t_meta_ns"]].sum(axis=1))
        g = tf.groupby("key").agg(size=("size", "max"), tasks=("task_id", "nunique"), readers=("read", "sum"),
                                  writers=("written", "sum"), bytes_read=("bytes_read", "sum"),
                                  bytes_written=("bytes_written", "sum"), reads=("reads", "sum"),
                                  writes=("writes", "sum"), opens=("opens", "sum"), stats=("stats", "sum"),
                                  t_io_ns=("t_io", "sum"),
                                  stages=("stage", lambda s: sorted(set(x for x in s if x))))
        reps = tf.drop_duplicates("key").set_index("key")["replica_hosts"]
        g["replica_hosts"] = reps.reindex(g.index)
        g["t_io_s"] = g.pop("t_io_ns") / 1e9
        key = {"bytes": g["bytes_read"] + g["bytes_written"], "ops": g["reads"] + g["writes"] + g["opens"] +
               g["stats"], "time": g["t_io_s"]}[by]
        return g.assign(_k=key).sort_values("_k", ascending=False).drop(columns="_k").head(n).reset_index()

    def histograms(self, run: str | int, by: str | None = "stage") -> pd.DataFrame:
        """Request-size histograms (Darshan's bins, logformat.HIST_BINS) over all traced files, long form:
        <by>, kind ('read'|'write'), bin (label), lo (lower bound, bytes), count.
        by: 'stage', 'host', 'task' or None (whole run)."""
        rid = self._run_id(run)
        col = {"stage": "t.stage", "host": "h.name", "task": "t.name", None: "NULL"}[by]
        bins = ", ".join(f"sum(fa.hr{i})" for i in range(NBINS)) + ", " + \
            ", ".join(f"sum(fa.hw{i})" for i in range(NBINS))
        rows = self.conn.execute(
            f"SELECT {col} AS g, {bins} FROM file_access fa JOIN processes p ON p.id = fa.process_id "
            f"LEFT JOIN tasks t ON t.id = p.task_id LEFT JOIN hosts h ON h.id = p.host_id "
            f"WHERE p.run_id = ? GROUP BY g ORDER BY min(p.start_ns)", (rid,)).fetchall()
        out = []
        for r in rows:
            g = self._name(r[0])
            for kind, off in (("read", 1), ("write", 1 + NBINS)):
                for i in range(NBINS):
                    row = {by: g} if by else {}
                    row.update(kind=kind, bin=HIST_BINS[i], lo=HIST_EDGES[i], count=int(r[off + i] or 0))
                    out.append(row)
        return pd.DataFrame(out)

    def timeline(self, run: str | int) -> pd.DataFrame:
        """Task timeline (host x time): task_id, name, stage, host, start_s, end_s (seconds from the run's first
        task start), exit_status."""
        t = self.tasks(run)
        t0 = t["start_ns"].min() if len(t) else 0
        return pd.DataFrame({"task_id": t["id"], "name": t["name"], "stage": t["stage"], "host": t["host"],
                             "start_s": (t["start_ns"] - t0) / 1e9, "end_s": (t["end_ns"] - t0) / 1e9,
                             "exit_status": t["exit_status"]})

    def ops(self, run: str | int, process_id: int | None = None, task_id: int | None = None) -> pd.DataFrame:
        """The op trace (empty when the run was traced without MTCPROF_TRACE=ops): process_id, task_id, host, pid,
        tid, op (name), op_code, flags, err, start_ns, dur_ns, offset, length, fid, path, key.  Decoded with one
        numpy.frombuffer per stored chunk."""
        rid = self._run_id(run)
        where, params = "p.run_id = ?", [rid]
        if process_id is not None:
            where += " AND p.id = ?"
            params.append(process_id)
        if task_id is not None:
            where += " AND p.task_id = ?"
            params.append(task_id)
        rows = self.conn.execute(
            f"SELECT o.process_id, p.task_id, p.pid, h.name, o.data FROM ops o JOIN processes p ON p.id = o.process_id "
            f"JOIN hosts h ON h.id = p.host_id WHERE {where} ORDER BY o.process_id, o.chunk", params).fetchall()
        cols = ["process_id", "task_id", "host", "pid", "tid", "op", "op_code", "flags", "err", "start_ns", "dur_ns",
                "offset", "length", "fid", "path", "key"]
        if not rows:
            return pd.DataFrame(columns=cols)
        arrs = [np.frombuffer(r[4], dtype=_lf.OP_DTYPE) for r in rows]   # numpy's dtype built at first use
        n = np.array([len(a) for a in arrs])
        ops = np.concatenate(arrs)
        df = pd.DataFrame({
            "process_id": np.repeat([r[0] for r in rows], n),
            "task_id": np.repeat(np.array([r[1] if r[1] is not None else -1 for r in rows]), n),
            "host": pd.Categorical(np.repeat([self._name(r[3]) for r in rows], n)),
            "pid": np.repeat([r[2] for r in rows], n),
            "tid": ops["tid"], "op_code": ops["op"], "flags": ops["flags"], "err": ops["err"],
            "start_ns": ops["start_ns"], "dur_ns": ops["dur_ns"], "offset": ops["offset"],
            "length": ops["length"], "fid": ops["file"]})
        df["op"] = pd.Categorical.from_codes(df["op_code"].map(_OP_INDEX).fillna(0).astype(int),
                                             categories=_OP_CATS)
        paths = self._df(
            "SELECT fa.process_id, fa.fid, f.path, COALESCE(f.gfarm_path, f.path) AS key FROM file_access fa "
            "JOIN files f ON f.id = fa.file_id JOIN processes p ON p.id = fa.process_id WHERE " + where, params)
        df = df.merge(paths, on=["process_id", "fid"], how="left")
        return df[cols]

    def capture_gaps(self, run: str | int) -> pd.DataFrame:
        """What the capture could not tell (Darshan logs): process_id, task, stage, kind, fid, path (of the file it
        is about, else None), detail.  Empty for shim runs."""
        return self._df(
            "SELECT g.process_id, t.name AS task, t.stage, g.kind, g.fid, f.path, g.detail FROM capture_gaps g "
            "JOIN processes p ON p.id = g.process_id LEFT JOIN tasks t ON t.id = p.task_id "
            "LEFT JOIN file_access fa ON fa.process_id = g.process_id AND fa.fid = g.fid "
            "LEFT JOIN files f ON f.id = fa.file_id WHERE p.run_id = ? ORDER BY g.process_id, g.kind",
            (self._run_id(run),))

    def warnings(self, run: str | int) -> pd.DataFrame:
        """Ingest warnings kept with the run: log_path, offset, message."""
        return self._df("SELECT log_path, offset, message FROM ingest_warnings WHERE run_id = ? ORDER BY id",
                        (self._run_id(run),))


_SUM_COLS = ("opens", "creates", "closes", "reads", "writes", "bytes_read", "bytes_written", "seeks", "seeks_end",
             "read_discont", "write_discont", "stats", "fsyncs", "unlinks", "renames", "mkdirs", "rmdirs", "truncates",
             "mmaps", "mmap_bytes", "dups", "errors", "t_open_ns", "t_read_ns", "t_write_ns", "t_close_ns", "t_meta_ns")
META_COLS = ("opens", "creates", "stats", "unlinks", "renames", "mkdirs", "rmdirs", "truncates", "fsyncs")
# operations that are a metadata-server request on Gfarm (creates are opens too, so not added twice)
_META_OPS = ("opens", "stats", "unlinks", "renames", "mkdirs", "rmdirs", "truncates")
_OP_CATS = ["?"] + [OPS[k] for k in sorted(OPS)]
_OP_INDEX = {k: i + 1 for i, k in enumerate(sorted(OPS))}


def _frac(df: pd.DataFrame, col: str) -> float:
    """Local fraction of `col` over rows whose locality is known (NaN if none; by count when all bytes are 0)."""
    known = df[df["local"].notna()]
    if not len(known):
        return float("nan")
    tot = known[col].sum()
    if tot == 0:
        return float(known["local"].astype(bool).mean())
    return float(known.loc[known["local"].astype(bool), col].sum() / tot)


def _frac_count(df: pd.DataFrame) -> float:
    known = df["local"].dropna()
    return float(known.astype(bool).mean()) if len(known) else float("nan")


def _max_overlap(starts, ends) -> int:
    ev = sorted([(int(s), 1) for s in starts] + [(int(e), -1) for e in ends], key=lambda x: (x[0], x[1]))
    cur = best = 0
    for _, d in ev:
        cur += d
        best = max(best, cur)
    return best
