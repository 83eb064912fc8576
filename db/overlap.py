"""How many tasks of a stage do I/O at once: the I/O concurrency the refined prediction model looks the envelope up at;
and how many tasks compute beside a stage's I/O on its hosts: the CPU load it sees (cpu_load).

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


class CpuLoad:
    """What computes beside a task's I/O on its host. A task's window (start to end) is busy with I/O at density
    d = its traced I/O time / the window and computes (or waits for a CPU) the rest, 1 − d; on a host the load is
    f(t) = Σ (1 − d_j) over the windows open at t, of every task of the run (all stages share the hosts' CPUs).
    A task's I/O sees the others' load: L_i = ∫_{W_i} f dt / |W_i| − (1 − d_i). A stage's cpu_load is the mean
    of L_i weighted by the tasks' I/O time: the computing tasks per host its I/O ran beside. Client and server
    daemons (gfarm2fs, gfsd) need a CPU for every call; where tasks take them all, calls wait."""

    def __init__(self, tasks):
        """tasks = [(host, start_ns, end_ns, io_seconds)], every task of the run."""
        by_host: dict = {}
        for h, a, b, io in tasks:
            if b > a:
                by_host.setdefault(h, []).append((a, b, 1.0 - min(1.0, max(0.0, io) / ((b - a) / 1e9))))
        self.hosts = {}
        for h, ws in by_host.items():
            edges = sorted({x for a, b, _ in ws for x in (a, b)})
            step = dict.fromkeys(edges, 0.0)
            for a, b, c in ws:
                step[a] += c
                step[b] -= c
            integral, level, acc = {}, 0.0, 0.0      # ∫ f dt (seconds x tasks) from the first edge to each edge
            for i, x in enumerate(edges):
                if i:
                    acc += level * (x - edges[i - 1]) / 1e9
                integral[x] = acc
                level += step[x]
            self.hosts[h] = integral

    def stage(self, windows) -> float | None:
        """windows = [(host, start_ns, end_ns, io_seconds)] of the stage's tasks; None when none did I/O."""
        num = den = 0.0
        for h, a, b, io in windows:
            g = self.hosts.get(h)
            if g is None or not b > a or not io > 0:
                continue
            length = (b - a) / 1e9
            own = 1.0 - min(1.0, io / length)
            num += io * max(0.0, (g[b] - g[a]) / length - own)
            den += io
        return num / den if den > 0 else None
