"""What a traced run measured, per stage, in the terms the formulas predict (`--validate DB:RUN`).

Measured stage I/O time: per host, the sum of its tasks' traced time inside I/O calls (open, read,
write, close, stat/unlink/... on the files the model counts: Gfarm files when the run touched any),
divided by the host's slots (tasks running at once on it; 1 in the published model's one task per node),
so it is the I/O time of one execution slot, as the round formulas count it; the stage's value is the
maximum over hosts (the slowest host ends the stage). The stage's wall span is given for context.

Balance (the formulas assume balanced rounds): max/mean over hosts of their I/O time and of their bytes,
and per round (tasks in start order, `slots` at a time) the slowest task's I/O time over the round's median.

I/O concurrency: the mean number of tasks in I/O at once while any is (db/overlap.py).
"""
from __future__ import annotations

from mtcio.db.overlap import T_COLS


class ValidationError(ValueError):
    pass


def parse_spec(spec: str) -> tuple[str, str | None]:
    """'DB:RUN' -> (db, run); 'DB' -> (db, None: the only or latest trace run)."""
    import os
    if os.path.exists(spec) or ":" not in spec:
        return spec, None
    db, run = spec.rsplit(":", 1)
    return db, run or None


def own_run(db: str, run: str | None) -> str | None:
    """`run` (the model's own) if `db` holds a trace run of that name, else None (the db's latest trace run)."""
    import sqlite3

    from mtcio.db import envelope_rows
    if not run:
        return None
    try:
        conn = envelope_rows.open_readonly(db)
        try:
            kind = envelope_rows.kind_of(conn, run)
        finally:
            conn.close()
    except sqlite3.Error:
        return None            # measure() says what is wrong with the db
    return run if kind == "trace" else None


def measure(db: str, run: str | None, scope: str = "auto", slots_per_host: dict | None = None) -> dict:
    """stage name -> {measured_s, span_s, tasks, hosts, per_host_s, balance..., io_concurrency}."""
    import os

    from mtcio.db import overlap, store
    from mtcio.db.api import Store
    if not os.path.isfile(db):
        raise ValidationError(f"--validate {db}: no such db file")
    try:
        s = Store(db)
    except (store.StoreError, OSError, ValueError) as e:
        raise ValidationError(f"--validate {db}: {e}") from None
    with s:
        runs = s.runs()
        trace = runs[runs["kind"] == "trace"]
        if run is None:
            if trace.empty:
                raise ValidationError(f"--validate {db}: no trace run in this db")
            run = str(trace.iloc[-1]["name"])
        elif run not in set(trace["name"]):
            raise ValidationError(f"--validate {db}:{run}: no trace run {run!r} (trace runs: "
                                  f"{', '.join(map(str, trace['name'])) or 'none'})")
        tasks = s.tasks(run)
        tf = s.task_files(run, scope)
    out = {"_run": run}
    tf = tf.assign(t_io=tf[T_COLS].sum(axis=1) / 1e9, nbytes=tf["bytes_read"] + tf["bytes_written"])
    for stage, t in tasks.groupby(tasks["stage"].fillna(""), sort=False):
        f = tf[tf["task_id"].isin(t["id"])]
        io = f.groupby("task_id")["t_io"].sum().reindex(t["id"], fill_value=0.0)
        nb = f.groupby("task_id")["nbytes"].sum().reindex(t["id"], fill_value=0)
        hosts = t["host"].fillna("?").to_numpy()
        per_host, bytes_host, tasks_host = {}, {}, {}
        for h, v, b in zip(hosts, io.to_numpy(), nb.to_numpy()):
            per_host[h] = per_host.get(h, 0.0) + float(v)
            bytes_host[h] = bytes_host.get(h, 0) + int(b)
            tasks_host[h] = tasks_host.get(h, 0) + 1
        p = (slots_per_host or {}).get(stage or "(none)") or 1
        per_slot = {h: v / p for h, v in per_host.items()}
        slots = max(1, len(per_host) * p)
        out[stage or "(none)"] = {
            "measured_s": max(per_slot.values()) if per_slot else 0.0,
            "io_s_total": float(io.sum()),
            "span_s": float((t["end_ns"].max() - t["start_ns"].min()) / 1e9),
            "tasks": len(t), "hosts": len(per_host), "slots_per_host": p,
            "per_host_s": per_slot, "tasks_per_host": tasks_host,
            "balance_time": _max_over_mean(per_host.values()),
            "balance_bytes": _max_over_mean(bytes_host.values()),
            "rounds": _rounds(t, io, slots),
            "io_concurrency": overlap.io_concurrency(overlap.stage_windows(f)),
        }
    return out


def _max_over_mean(vals):
    vals = list(vals)
    m = sum(vals) / len(vals) if vals else 0
    return max(vals) / m if m else None


def _rounds(t, io, slots):
    """Per round of `slots` tasks (start order): slowest task's I/O time / the round's median."""
    order = t.sort_values("start_ns")["id"].to_list()
    ratios = []
    for i in range(0, len(order), slots):
        v = sorted(float(io[x]) for x in order[i:i + slots])
        med = v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
        if med > 0:
            ratios.append(v[-1] / med)
    if not ratios:
        return {"n": 0, "slowest_over_median_mean": None, "slowest_over_median_max": None}
    return {"n": len(ratios), "slowest_over_median_mean": sum(ratios) / len(ratios),
            "slowest_over_median_max": max(ratios)}
