"""What a traced run measured, per stage, in the terms the formulas predict (`--validate DB:RUN`).

Measured stage I/O time: per host, the sum of its tasks' traced time inside I/O calls (open, read,
write, close, stat/unlink/... on the files the model counts: Gfarm files when the run touched any),
divided by the host's slots (tasks running at once on it; 1 in the published model's one task per node),
so it is the I/O time of one execution slot, as the round formulas count it; the stage's value is the
maximum over hosts (the slowest host ends the stage). The stage's wall span is given for context.

Balance (the formulas assume balanced rounds): max/mean over hosts of their I/O time and of their bytes,
and per round (tasks in start order, `slots` at a time) the slowest task's I/O time over the round's median.

I/O concurrency: each task's I/O is spread over its I/O window (first open to last close of its files)
with density d = its I/O time / the window's length; k = Σ I/O time / ∫ P(any task in I/O) dt with
P = 1 − Π(1 − d_i): the mean number of tasks in I/O at once while any is.
"""
from __future__ import annotations

import math

T_COLS = ["t_open_ns", "t_read_ns", "t_write_ns", "t_close_ns", "t_meta_ns"]


class ValidationError(ValueError):
    pass


def parse_spec(spec: str) -> tuple[str, str | None]:
    """'DB:RUN' -> (db, run); 'DB' -> (db, None: the only or latest trace run)."""
    import os
    if os.path.exists(spec) or ":" not in spec:
        return spec, None
    db, run = spec.rsplit(":", 1)
    return db, run or None


def measure(db: str, run: str | None, scope: str = "auto", slots_per_host: dict | None = None) -> dict:
    """stage name -> {measured_s, span_s, tasks, hosts, per_host_s, balance..., io_concurrency}."""
    import os

    from mtcio.db import store
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
        win = f.groupby("task_id").agg(a=("first_open_ns", "min"), b=("last_close_ns", "max"))
        windows = [(win.loc[i, "a"], win.loc[i, "b"], float(io[i])) for i in win.index
                   if io[i] > 0 and not math.isnan(win.loc[i, "a"])]
        out[stage or "(none)"] = {
            "measured_s": max(per_slot.values()) if per_slot else 0.0,
            "io_s_total": float(io.sum()),
            "span_s": float((t["end_ns"].max() - t["start_ns"].min()) / 1e9),
            "tasks": len(t), "hosts": len(per_host), "slots_per_host": p,
            "per_host_s": per_slot, "tasks_per_host": tasks_host,
            "balance_time": _max_over_mean(per_host.values()),
            "balance_bytes": _max_over_mean(bytes_host.values()),
            "rounds": _rounds(t, io, slots),
            "io_concurrency": io_concurrency(windows),
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


def io_concurrency(windows) -> float | None:
    """Mean number of tasks in I/O at once while any is; windows = [(start_ns, end_ns, io_seconds)]."""
    events = []
    total_io = 0.0
    for a, b, io in windows:
        length = (b - a) / 1e9
        if length <= 0:
            continue
        d = min(1.0, io / length)
        total_io += d * length
        events.append((a, 0, d))
        events.append((b, 1, d))
    if not events:
        return None
    events.sort()
    active: dict = {}
    busy, last = 0.0, events[0][0]
    for tns, kind, d in events:
        if active:
            p_none = 1.0
            for dd, n in active.items():
                p_none *= (1 - dd) ** n
            busy += (tns - last) / 1e9 * (1 - p_none)
        last = tns
        if kind == 0:
            active[d] = active.get(d, 0) + 1
        else:
            active[d] -= 1
            if not active[d]:
                del active[d]
    return total_io / busy if busy > 0 else None
