"""How many tasks of a stage do I/O at once: the I/O concurrency the refined prediction model looks the envelope up at.

Each task's I/O is spread over its I/O window (first open to last close of its files) with density
d = its time inside I/O calls / the window's length; the stage's I/O concurrency is
    k = Σ I/O time / ∫ P(any task in I/O) dt,   P = 1 − Π(1 − d_i)
the mean number of tasks in I/O at once while any is. A stage whose tasks spend little of their run in I/O
has k near 1 even when many tasks run at once.
"""
from __future__ import annotations

import math

T_COLS = ["t_open_ns", "t_read_ns", "t_write_ns", "t_close_ns", "t_meta_ns"]


def io_concurrency(windows) -> float | None:
    """windows = [(start_ns, end_ns, io_seconds)], one per task; None when no task did I/O."""
    events = []
    total_io = 0.0
    for a, b, io in windows:
        length = (b - a) / 1e9
        if length <= 0 or not io > 0:
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


def stage_windows(task_files) -> list:
    """(first open, last close, I/O seconds) per task from api.Store.task_files() rows of one stage."""
    f = task_files.assign(t_io=task_files[T_COLS].sum(axis=1) / 1e9)
    g = f.groupby("task_id").agg(a=("first_open_ns", "min"), b=("last_close_ns", "max"), io=("t_io", "sum"))
    return [(a, b, io) for a, b, io in zip(g["a"], g["b"], g["io"]) if io > 0 and not math.isnan(a)]
