"""`mtcprof model --db DB --run R -o workflow.yaml`, or `--from-wfformat INSTANCE.json`: the workflow model.

The schema is db/workflow_model.py (one loader, used by mtcpredict too); see db/README.md.  The file is written
mode 0600 (a trace's paths and names are private).  A stage whose processes dropped records at the shim's limits
carries `x-dropped: {files: F, ops: O}`: its numbers lack those files and ops.  Names that are not UTF-8 keep their
exact bytes (YAML "\\uDCxx" escapes; os.fsencode gives the bytes back).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import math
import os
import sys

import numpy as np

from mtcio.db import overlap, store
from mtcio.db.gfarm import READAHEAD
from mtcio.db.api import META_COLS, Store
from mtcio.db.workflow_model import (Dist, Measured, Metadata, Read, Shared, Stage, StageEnvelope, Workflow, Write,
                                     from_dict, to_dict)

HEADER = "# mtcio workflow model (schema: db/workflow_model.py, db/README.md)\n"


def _f(x):
    """float or None for NaN."""
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


QUANTILES = tuple((i + 0.5) / 10 for i in range(10))   # midpoints of ten equal-weight bins


def _op_sizes(df, nbytes: str):
    """Bytes one op moves (a task's bytes on one file, at most the file's size: a re-read of a cached part
    moves nothing new) at equal-weight points of their distribution, each a size that occurred. Envelopes are not
    smooth in size (gfarm2fs: ~45 ms per op from 16 KiB to 64/128 KiB, ~2 ms either side), so neither a mean nor
    a point between two sizes (a 304 B and a 27 KB file: 13.8 KB) may stand for them."""
    if not len(df):
        return None
    v = np.minimum(df[nbytes].to_numpy(dtype=float), df["size"].fillna(np.inf).to_numpy(dtype=float))
    v = v[~np.isnan(v)]
    return [_num(x) for x in np.quantile(v, QUANTILES, method="inverted_cdf")] if len(v) else None


def _files_per_process(s: Store, run, scope: str) -> dict:
    """stage -> data files one process opened (mean over the processes that read or wrote any; the same files as
    the model's other counts: Gfarm files when the run touched any). A process's first op costs more than its next."""
    fa = s.file_access(run)
    if scope == "gfarm" or (scope == "auto" and fa["gfarm_path"].notna().any()):
        fa = fa[fa["gfarm_path"].notna()]
    fa = fa[(fa["bytes_read"] > 0) | (fa["bytes_written"] > 0)]
    per = fa.groupby(["stage", "process_id"])["key"].nunique().groupby(level=0).mean()
    return {st: _round(v) for st, v in per.items()}


def _warm(df, made: set):
    """Fraction of these bytes read from files the run wrote (intermediate data, often still in a page cache)."""
    total = df["bytes_read"].sum() if len(df) else 0
    return _round(df.loc[df["key"].isin(made), "bytes_read"].sum() / total) if total else None


YOUNG_NS = 1_000_000_000   # FUSE's entry and attribute timeouts (libfuse's default, gfarm2fs keeps it): 1 s


def _writes(tf):
    """key -> (host, ns) of the last close of a task that wrote the file."""
    w = tf[tf["written"] & tf["last_close_ns"].notna()].sort_values("last_close_ns")
    return {k: (h, c) for k, h, c in zip(w["key"], w["host"], w["last_close_ns"])}


def _young(df, writes: dict):
    """Fraction of these bytes read from files a task wrote on the reader's host less than FUSE's timeouts (1 s)
    before the read's first open: the kernel still knows the name, so a first open may skip a lookup (Montage's
    mFitplane reads mDiff's output ~0.1 s after it)."""
    total = df["bytes_read"].sum() if len(df) else 0
    if not total:
        return None
    young = [(w := writes.get(k)) is not None and w[0] == h and 0 <= o - w[1] < YOUNG_NS
             for k, h, o in zip(df["key"], df["host"], df["first_open_ns"].fillna(-1))]
    return _round(df.loc[young, "bytes_read"].sum() / total)


def _opens(df):
    """Mean opens of a file by a task over these task-file pairs (cfitsio opens a FITS file 2-6 times)."""
    return _round(df["opens"].sum() / len(df)) if len(df) and df["opens"].sum() > 0 else None


STAT_CACHED_NS = 20_000   # a stat under this (mean per task-file pair) was served by the client's attribute cache


def _stats_cached(df):
    """Share of these stats the client's attribute cache served: those of task-file pairs whose only metadata
    ops are stats (and seeks, whose time t_meta_ns holds too), at under 20 us each (testbed: ~2 us from the
    cache, 75-650 us from gfmd). Montage stats a file soon after another task on the host wrote or looked it up
    (mDiff, mFitplane, mProjectPP: 2 us each)."""
    n = df["stats"].sum() if len(df) else 0
    if not n:
        return None
    others = df[[c for c in META_COLS if c not in ("opens", "creates", "stats")]].sum(axis=1)
    hit = (df["stats"] > 0) & (others == 0) & (df["t_meta_ns"] < (df["stats"] + df["seeks"]) * STAT_CACHED_NS)
    return _round(df.loc[hit, "stats"].sum() / n)


def _dist(values) -> Dist | None:
    v = np.asarray(list(values), dtype=float)
    v = v[~np.isnan(v)]
    if not len(v):
        return None
    return Dist(min=_num(v.min()), mean=_num(v.mean()), max=_num(v.max()))


STDIO_BUFFER = 8192   # glibc's stream buffer: the file's st_blksize (8,192 on gfarm2fs), else BUFSIZ (8,192)


def _per_call(df, nbytes: str, calls: str):
    """Mean bytes per system call over these task-file pairs (None without calls). A stdio stream's calls
    smaller than its buffer reach the file system as buffer-sized ones, one more after each seek: cfitsio's
    fwrite of 2,880-byte FITS blocks is write(2) of 8,192 bytes on gfarm2fs, and an envelope of 2,880-byte
    calls costs such a file twice what Montage paid (535 KB: ~12 ms against ~6 ms)."""
    if not len(df) or not df[calls].sum():
        return None
    return round(float(df[nbytes].sum() / _sys_calls(df, nbytes, calls).sum()), 1)


def _sys_calls(df, nbytes: str, calls: str):
    """System calls per task-file pair: a stdio stream's calls smaller than its buffer merged into buffer-sized
    ones, one more after each seek."""
    n, b = df[calls].to_numpy(dtype=float), df[nbytes].to_numpy(dtype=float)
    merged = np.maximum(1.0, np.ceil(b / STDIO_BUFFER)) + df["seeks"].to_numpy(dtype=float)
    small = df["stdio"].to_numpy(dtype=bool) & (n > 0) & (b < n * STDIO_BUFFER)
    return np.where(small, np.minimum(n, merged), n)




def _compute_per_call(t, f) -> float | None:
    """Median over these tasks of their time outside traced I/O per call reaching the file system, in us: writes
    as a stdio buffer merges them, reads per readahead window, opens. How far apart a task's calls
    come: on a VM a FUSE call after its daemons idled costs more (mtcenvelope --call-gap-us)."""
    if not len(t):
        return None
    calls = _sys_calls(f, "bytes_written", "writes") + np.ceil(f["bytes_read"].to_numpy(dtype=float) / READAHEAD) \
        + f["opens"].to_numpy(dtype=float)
    per_task = f.assign(calls=calls).groupby("task_id")["calls"].sum()
    c = per_task.reindex(t["id"], fill_value=0).to_numpy()
    outside = ((t["end_ns"] - t["start_ns"]).to_numpy(dtype=float) / 1e9 - t["t_io_s"].to_numpy(dtype=float))
    ok = c > 0
    if not ok.any():
        return None
    return round(float(np.median(np.maximum(0.0, outside[ok]) / c[ok] * 1e6)), 1)


def _idle_before(tf) -> dict:
    """task id -> ms the host's I/O path idled before the task's first open: from the last close of another task's
    file on the host (0 while one is open); tasks with no I/O before them on their host are left out. A small
    read after 50 ms idle costs ~1.7x one right after other I/O on the testbed (mtcenvelope --idle-ms)."""
    f = tf[tf["first_open_ns"].notna() & tf["last_close_ns"].notna()]
    out = {}
    for _, h in f.groupby(f["host"].fillna("?")):
        h = h.sort_values("first_open_ns")
        starts = h["first_open_ns"].to_numpy(dtype=float)
        ends = np.maximum.accumulate(h["last_close_ns"].to_numpy(dtype=float))   # latest close so far
        for task, a in h.groupby("task_id")["first_open_ns"].min().items():
            i = int(np.searchsorted(starts, a, side="left"))    # the files opened before: other tasks'
            if i:
                out[task] = max(0.0, (a - ends[i - 1]) / 1e6)
    return out


def _machine_busy(procs, ids) -> float | None:
    """Share of the machine's CPU time busy while these tasks ran: per host, from the CPU clock (/proc/uptime, idle
    summed over the CPUs) at its first traced process's start to the one at its last's end; the hosts' shares
    weighted by their tasks. None without clocks (older logs) or over less than 50 ms (the clock counts in 10 ms).
    It counts the stage's own processes: a Montage stage of one task is 0.5 on 2 vCPUs, its process computing on
    one, and a CPU saturated while a stage does I/O (mBackground's two tasks per host: 0.91-0.99) shows here."""
    p = procs[procs["task_id"].isin(set(ids)) & procs["cpus"].notna()]
    tot = n = 0.0
    for _, h in p.groupby(p["host"].fillna("?")):
        a, b = h.loc[h["uptime_start_s"].idxmin()], h.loc[h["uptime_end_s"].idxmax()]
        span = b["uptime_end_s"] - a["uptime_start_s"]
        if span < 0.05:
            continue
        busy = 1.0 - (b["idle_end_s"] - a["idle_start_s"]) / (b["cpus"] * span)
        k = h["task_id"].nunique()
        tot, n = tot + k * min(1.0, max(0.0, busy)), n + k
    return round(float(tot / n), 4) if n else None


def _clocked(procs, ids):
    """The processes of these tasks with a scheduler clock (shim sched) and an end, and each one's life in s."""
    p = procs[procs["task_id"].isin(set(ids)) & procs["sched_wait_s"].notna() & procs["end_ns"].notna()]
    return p, ((p["end_ns"] - p["start_ns"]) / 1e9).clip(lower=0)


def _cpu_wait(procs, ids) -> float | None:
    """Share of the stage's processes' time they were ready to run but had no CPU (their main threads' run-queue
    wait over their lives, shim sched; a wrapper shell's life counts): a blocking call's measured time holds the
    wait after its wake-up. None without clocks (older logs)."""
    p, life = _clocked(procs, ids)
    return round(float(min(1.0, p["sched_wait_s"].sum() / life.sum())), 4) if life.sum() > 0 else None


def _io_cpu_wait(procs, ids) -> float | None:
    """Share of the stage's traced I/O time its processes spent waiting for a CPU, estimated from their scheduler
    clocks: a process asleep only inside its file-system calls spends io - asleep of them on a CPU or waiting for
    one, and is taken to wait there in the share it waited whenever it wanted a CPU (wait / (cpu + wait)). On the
    testbed's 2 vCPUs Montage's mBackground, 2 tasks per host, was 0.16-0.18 on 2 hosts and 0.49-0.55 on 4 (its
    processes got a CPU 24 % of the time they wanted one), every other stage under 0.09. The envelope's calls wait
    too on the same CPUs: this is not the part an envelope lacks (docs/experiments/montage-passes.md, pass N). Only main
    threads are clocked. None without clocks."""
    p, life = _clocked(procs, ids)
    moved = p["io_s"] > 0
    p, life = p[moved], life[moved]
    io, want = p["io_s"].sum(), (p["sched_cpu_s"] + p["sched_wait_s"]).sum()
    if io <= 0 or want <= 0:
        return None
    asleep = (life - p["sched_cpu_s"] - p["sched_wait_s"]).clip(lower=0)
    awake = (p["io_s"] - asleep).clip(lower=0).sum()
    return round(float(min(1.0, p["sched_wait_s"].sum() / want * awake / io)), 4)


def _io_cpu_wait_measured(procs, ids) -> float | None:
    """Share of the stage's traced I/O time its processes waited for a CPU as the shim timed it around each call
    (MTCPROF_CPU_WAIT=1: the thread's run-queue wait read before and after the call). None unless every process of
    the stage with traced I/O has it."""
    p = procs[procs["task_id"].isin(set(ids)) & (procs["io_s"] > 0)]
    if not len(p) or p["io_cpu_wait_s"].isna().any():
        return None
    return round(float(min(1.0, p["io_cpu_wait_s"].sum() / p["io_s"].sum())), 4)


def _served_concurrency(windows, io_cpu_wait) -> float | None:
    """The I/O concurrency of the I/O the file system serves: each task's I/O time less its share waiting for a
    CPU (io_cpu_wait), which loads no daemon but lengthens the calls and so their overlap. On 4 testbed hosts
    (8 slots, 2 vCPUs) mProjectPP's calls waited 0.56 of their time, on 2 hosts 0.27: its overlap rose with the
    wait, not with the load it put on Gfarm. None without clocks."""
    if io_cpu_wait is None:
        return None
    return _round(overlap.io_concurrency([(a, b, io * (1.0 - io_cpu_wait)) for a, b, io in windows]))


def _median_of(values: dict, ids) -> float | None:
    v = [values[i] for i in ids if i in values]
    return round(float(np.median(v)), 1) if v else None


def _round(x):
    return None if x is None else round(float(x), 4)


def _num(x):
    x = float(x)
    return int(x) if x == int(x) and abs(x) < 2 ** 53 else round(x, 6)


def dropped(s: Store, run, scope: str = "auto") -> dict:
    """{stage name in the model: {"files": F, "ops": O}} for stages whose processes dropped records."""
    st = s.stages(run, scope)
    return {(r.stage or "(none)"): {"files": int(r.files_dropped), "ops": int(r.ops_dropped)}
            for r in st.itertuples() if r.files_dropped or r.ops_dropped}


def text(wf: Workflow, drops: dict | None = None) -> str:
    """The model's YAML (what load() reads back), with x-dropped on the stages in `drops`."""
    import yaml
    d = to_dict(wf)
    for st in d["stages"]:
        if st["name"] in (drops or {}):
            st["x-dropped"] = drops[st["name"]]
    from_dict(d)                    # never write what load() would refuse
    return HEADER + yaml.safe_dump(d, sort_keys=False, default_flow_style=None, width=120)


def build(s: Store, run, scope: str = "auto", envelope_run: str | None = None) -> Workflow:
    stages = s.stages(run, scope)
    if not len(stages):
        raise ValueError(f"run {run!r} has no tasks")
    tasks = s.tasks(run)
    tf = s.task_files(run, scope)
    made = set(tf.loc[tf["written"], "key"])    # files some task of this run wrote: their pages may be cached
    writes = _writes(tf)
    per_proc = _files_per_process(s, run, scope)
    idle = _idle_before(tf)
    procs = s.processes(run)
    windows = list(zip(tasks["host"].fillna("?"), tasks["start_ns"], tasks["end_ns"], tasks["t_io_s"]))
    load = overlap.CpuLoad(windows)
    out = []
    for _, st in stages.iterrows():
        name = st["stage"]
        mine = (tasks["stage"].fillna("") == (name or "")).to_numpy()
        t = tasks[mine]
        f = tf[tf["stage"].fillna("") == (name or "")]
        ids = t["id"]
        # a file the task itself writes and reads back (cfitsio reads a block of its output) is its write op
        rd = f["read"] & ~f["written"]
        one = f[rd & (f["read_class"] == "1-1")]
        shared = f[rd & (f["read_class"] == "N-1")]
        w = f[f["written"]]
        n = len(t)
        per = lambda df, col: df.groupby("task_id")[col].sum().reindex(ids, fill_value=0)  # noqa: E731
        cnt = lambda df: df.groupby("task_id")["key"].nunique().reindex(ids, fill_value=0)  # noqa: E731
        read = Read(bytes_per_task=_dist(per(one, "bytes_read")), files_per_task=_num(cnt(one).mean()),
                    file_size=_dist(one.drop_duplicates("key")["size"]), alpha=_f(st["alpha"]),
                    alpha_files=_f(st["alpha_files"]),
                    reread_factor=_f(one["bytes_read"].sum() / one["size"].sum()) if len(one) and
                    one["size"].sum() > 0 else None, bytes_per_call=_per_call(one, "bytes_read", "reads"),
                    op_size_quantiles=_op_sizes(one, "bytes_read"), warm_fraction=_warm(one, made),
                    young_fraction=_young(one, writes), opens_per_file=_opens(one))
        sh = Shared(files=int(shared["key"].nunique()), bytes=int(st["shared_size"]),
                    bytes_read_per_task=_num(per(shared, "bytes_read").mean()), alpha=_f(st["alpha_shared"]),
                    files_per_task=_num(cnt(shared).mean()) if len(shared) else None,
                    bytes_per_call=_per_call(shared, "bytes_read", "reads"),
                    op_size_quantiles=_op_sizes(shared, "bytes_read"), warm_fraction=_warm(shared, made),
                    young_fraction=_young(shared, writes), opens_per_file=_opens(shared))
        wr = Write(bytes_per_task=_dist(per(w, "bytes_written")), files_per_task=_num(cnt(w).mean()),
                   file_size=_dist(w.drop_duplicates("key")["size"]), local_fraction=_f(st["write_local"]),
                   bytes_per_call=_per_call(w, "bytes_written", "writes"),
                   rewrite_factor=_f(w["bytes_written"].sum() / w["size"].sum()) if len(w) and
                   w["size"].sum() > 0 else None,
                   op_size_quantiles=_op_sizes(w, "bytes_written"),
                   redirected_fraction=_round(w["redirected"].mean()) if len(w) else None,
                   left_open_fraction=_round(w["left_open"].mean()) if len(w) else None)
        md = Metadata(ops_per_task=_num(st["meta_ops"] / n), creates_per_task=_num(st["creates"] / n),
                      opens_per_task=_num(st["opens"] / n), stats_per_task=_num(st["stats"] / n),
                      stats_cached_fraction=_stats_cached(f), failed_per_task=_num(f["errors"].sum() / n),
                      seeks_end_per_task=_num(f["seeks_end"].sum() / n))
        ms = Measured(span_s=_f(st["span_s"]), io_s_mean=_f(st["io_s_mean"]), io_s_max=_f(st["io_s_max"]),
                      io_s_total=_f(st["t_io_s"]), read_s_total=_f(f["t_read_ns"].sum() / 1e9),
                      write_s_total=_f(f["t_write_ns"].sum() / 1e9),
                      meta_s_total=_f((f["t_open_ns"] + f["t_close_ns"] + f["t_meta_ns"]).sum() / 1e9))
        win, icw = overlap.stage_windows(f), _io_cpu_wait(procs, ids)
        env = StageEnvelope(
            read_file_size=int(read.file_size.mean) if read.file_size else None,
            write_file_size=int(wr.file_size.mean) if wr.file_size else None,
            shared_file_size=int(sh.bytes / sh.files) if sh.files else None)
        out.append(Stage(name=name or "(none)", tasks=n, hosts=int(st["hosts"]) or 1, read=read, shared=sh,
                         write=wr, metadata=md, concurrency=int(st["concurrency"]),
                         procs_per_host=int(st["per_host_concurrency"]), measured=ms, envelope=env,
                         io_concurrency=_round(overlap.io_concurrency(win)),
                         io_concurrency_served=_served_concurrency(win, icw),
                         tasks_max_per_host=int(t.groupby(t["host"].fillna("?")).size().max()),
                         files_per_process=per_proc.get(name),
                         cpu_load=_round(load.stage([w for w, keep in zip(windows, mine) if keep])),
                         compute_per_call_us=_compute_per_call(t, f), idle_before_ms=_median_of(idle, ids),
                         machine_busy=_machine_busy(procs, ids), cpu_wait=_cpu_wait(procs, ids),
                         io_cpu_wait=icw, io_cpu_wait_measured=_io_cpu_wait_measured(procs, ids)))
        if read.bytes_per_task is None:
            read.bytes_per_task = Dist()
        if wr.bytes_per_task is None:
            wr.bytes_per_task = Dist()
    runs = s.runs()
    name = run if isinstance(run, str) else runs.set_index("id").loc[run, "name"]
    return Workflow(stages=out, run=name,
                    source={"db": os.path.abspath(s.path), "scope": scope,
                            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")},
                    envelope={"run": envelope_run} if envelope_run else None)


def _check_envelope_run(conn, name: str) -> None:
    """--envelope-run must name an envelope run (runs.kind): a trace run's name would be recorded as the envelope
    to predict with and fail only later, in mtcpredict."""
    kind, envs = store.run_kind(conn, name, "envelope")
    if kind != "envelope":
        raise store.StoreError(f"--envelope-run: {store.not_of_kind(name, kind, 'an envelope')} (envelope runs: "
                               f"{', '.join(envs) or 'none'})")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from mtcio.db.wfformat_model import HOSTS_WORDS, add_host_arguments
    from mtcio.exitcodes import exit_table
    p.add_argument("--db", help="SQLite store (required unless --from-wfformat)")
    p.add_argument("--run",
                   help="trace run; several (R1,R2,..) of one workflow at other sizes, with --size, make a model that "
                        "scales: every stage's shape is fitted on the size (db/README.md, 'Scaling')")
    p.add_argument("--size", metavar="R1=S1,R2=S2",
                   help="the workflow size of each run, in the user's own unit (tiles, input files, samples): with "
                        "it, `mtcpredict MODEL --at size=S hosts=C` predicts sizes and host counts never traced; "
                        "with one run, fan-out stages' task counts and one-task stages' inputs are taken "
                        "proportional to the size")
    p.add_argument("-o", "--output", help="workflow model YAML to write ('-' for stdout; the default with "
                                          "--from-wfformat, else required)")
    p.add_argument("--envelope-run", help="envelope run to record as the default for predictions")
    p.add_argument("--files", choices=("auto", "gfarm", "all"), default="auto",
                   help="which files count: Gfarm files only, all traced files, or auto (Gfarm files when the run "
                        "touched any, else all)")
    p.add_argument("--from-wfformat", metavar="INSTANCE.json",
                   help="model a WfFormat instance (WfCommons' JSON, 1.5 or 1.6, recorded or generated) instead of a "
                        "traced run: stages by task category, 1-to-1 and shared inputs by how many tasks read "
                        "each file, bytes from file sizes (readBytes where given), α by the placement rule "
                        "(Gfarm writes locally, a task runs with its largest 1-to-1 input); what the instance does not "
                        "say is taken by default and listed (x-defaults, stderr)")
    add_host_arguments(p, HOSTS_WORDS)
    p.epilog = (
        "examples:\n  mtcprof model --db mtc.db --run montage1 -o workflow.yaml\n"
        "  mtcprof model --from-wfformat epigenomics.json --hosts 4 --slots 2 -o epi.yaml\n\n"
        + exit_table({2: "bad input: bad options, a db or run that is missing or malformed, a WfFormat instance "
                         "that is not JSON, not WfFormat, of an unknown schemaVersion, with a cycle in "
                         "parents/children or a negative size"}))


def parse_sizes(runs: list[str], spec: str | None) -> list[float] | None:
    """--size R1=16,R2=36 -> [16.0, 36.0] in the order of `runs` (ValueError naming the problem)."""
    if spec is None:
        if len(runs) > 1:
            raise ValueError(f"--run names {len(runs)} runs: give each one's workflow size with --size "
                             f"{','.join(r + '=S' for r in runs)}")
        return None
    sizes = {}
    for item in spec.split(","):
        run, sep, v = item.rpartition("=")
        if not sep or not run:
            raise ValueError(f"--size {item!r}: expected RUN=SIZE")
        if run not in runs:
            raise ValueError(f"--size {item!r}: run {run!r} is not one of --run ({', '.join(runs)})")
        if run in sizes:
            raise ValueError(f"--size: run {run!r} given two sizes")
        try:
            sizes[run] = float(v)
        except ValueError:
            sizes[run] = math.nan
        if not math.isfinite(sizes[run]) or sizes[run] <= 0:
            raise ValueError(f"--size {item!r}: a size is a number > 0")
    left = [r for r in runs if r not in sizes]
    if left:
        raise ValueError(f"--size: no size for run {', '.join(left)}")
    return [sizes[r] for r in runs]


def build_scaled(s: Store, runs: list[str], sizes: list[float], scope: str = "auto",
                 envelope_run: str | None = None) -> Workflow:
    """The model of the reference run (the largest size) with a `scaling:` section fitted over every run."""
    from mtcio.db import scaling
    models = [build(s, r, scope, envelope_run) for r in runs]
    shapes = [scaling.shape_of(s, r, scope) for r in runs]
    order = sorted(range(len(runs)), key=lambda i: sizes[i])
    totals = [sum(st.tasks for st in models[i].stages) for i in order]
    for (i, j), (ti, tj) in zip(zip(order, order[1:]), zip(totals, totals[1:])):
        if sizes[i] < sizes[j] and ti > tj:
            raise ValueError(f"--size: run {runs[j]!r} is given the larger size ({sizes[j]:g} > {sizes[i]:g}) but "
                             f"has fewer tasks than {runs[i]!r} ({tj} < {ti}): sizes must grow with the runs")
    hosts = [max(st.hosts for st in m.stages) for m in models]
    procs = [max(st.procs_per_host or 1 for st in m.stages) for m in models]
    sc = scaling.fit(shapes, sizes, hosts, procs)
    wf = models[runs.index(sc["reference"])]
    wf.scaling = sc
    return wf


def _from_wfformat(args: argparse.Namespace) -> int:
    from mtcio.db import wfformat, wfformat_model
    from mtcio.exitcodes import printable
    for opt, v in (("--db", args.db), ("--run", args.run), ("--size", args.size),
                   ("--envelope-run", args.envelope_run), ("--files", None if args.files == "auto" else args.files)):
        if v is not None:
            print(f"mtcprof model: {opt} models a traced run; --from-wfformat models an instance: give one of them",
                  file=sys.stderr)
            return 2
    try:
        inst = wfformat.read_instance(args.from_wfformat)
        hosts, slots = wfformat_model.hosts_and_slots(inst, args.hosts, args.slots)
        wf, notes = wfformat_model.build(inst, hosts, slots)
        out = wfformat_model.text(wf, notes)
    except (wfformat.WfFormatError, ValueError) as e:
        print(f"mtcprof model: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"mtcprof model: {printable(e.filename or args.from_wfformat)}: {e.strerror or e}", file=sys.stderr)
        return 2
    output = args.output or "-"
    try:
        if output == "-":
            sys.stdout.write(out)
            sys.stdout.flush()
        else:
            store.write_private(output, out)
    except BrokenPipeError:
        raise
    except OSError as e:
        print(f"mtcprof model: {printable(e.filename or output)}: {e.strerror or e}", file=sys.stderr)
        return 2
    print(f"mtcprof model: {printable(args.from_wfformat)}: WfFormat {inst.version}, {len(inst.tasks)} tasks, "
          f"{len(wf.stages)} stages on {hosts} hosts x {slots} slots -> {output}", file=sys.stderr)
    print(f"mtcprof model: α by the placement rule: {wfformat_model.PLACEMENT}", file=sys.stderr)
    for n in notes:
        print(f"mtcprof model: default: {n}", file=sys.stderr)
    return 0


def main(args: argparse.Namespace) -> int:
    if getattr(args, "from_wfformat", None) is not None:     # (a Namespace built by hand may lack the new options)
        return _from_wfformat(args)
    if getattr(args, "hosts", None) is not None or getattr(args, "slots", None) is not None:
        print("mtcprof model: --hosts and --slots are for --from-wfformat (a traced run has its own)", file=sys.stderr)
        return 2
    missing = [o for o, v in (("--db", args.db), ("--run", args.run), ("-o/--output", args.output)) if v is None]
    if missing:
        print(f"mtcprof model: the following arguments are required: {', '.join(missing)} (or --from-wfformat "
              "INSTANCE.json)", file=sys.stderr)
        return 2
    try:
        runs = [r for r in args.run.split(",")] if "," in args.run else [args.run]
        if len(set(runs)) != len(runs) or not all(runs):
            raise ValueError(f"--run {args.run!r}: each run once, names separated by commas")
        sizes = parse_sizes(runs, getattr(args, "size", None))
        s = Store(args.db)
        if sizes is None:
            wf = build(s, args.run, args.files, args.envelope_run)
        else:
            wf = build_scaled(s, runs, sizes, args.files, args.envelope_run)
        if args.envelope_run:
            _check_envelope_run(s.conn, args.envelope_run)
        drops = dropped(s, wf.run, args.files)
        if args.output == "-":
            sys.stdout.write(text(wf, drops))
            sys.stdout.flush()
        else:
            store.write_private(args.output, text(wf, drops))
    except BrokenPipeError:     # `-o - | head`: mtcprof's guard ends quietly, exit 0
        raise
    except OSError as e:
        where = f"{store.readable(e.filename)}: " if e.filename else ""
        print(f"mtcprof model: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    except (store.StoreError, ValueError) as e:
        print(f"mtcprof model: {e}", file=sys.stderr)
        return 2
    for name, d in drops.items():
        print(f"mtcprof model: warning: stage {store.readable(name)}: the shim dropped {d['files']:,} file records "
              f"and {d['ops']:,} ops at its limits; the stage's numbers lack them (x-dropped)", file=sys.stderr)
    if wf.scaling:
        sc = wf.scaling
        print(f"mtcprof model: scaling fitted over {len(sc['runs'])} run{'s' if len(sc['runs']) > 1 else ''} "
              f"(sizes {', '.join(f'{x:g}' for x in sc['sizes'])}); stages as run {sc['reference']} traced them",
              file=sys.stderr)
        if sc["one_size"]:
            print("mtcprof model: one size traced: fan-out stages' task counts and gathered inputs are taken "
                  "proportional to the size, one-task stages' bytes too", file=sys.stderr)
    print(f"mtcprof model: {len(wf.stages)} stages -> {args.output}", file=sys.stderr)
    return 0
