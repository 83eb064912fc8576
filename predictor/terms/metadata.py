"""Metadata requests: the task's metadata ops beyond its data files' open and close, each a request to gfmd.

The paper charges one create per round (1/Tm in equations (1)/(2)), and only to writing stages. A task's traced
metadata ops are its opens, stats, creates, seeks...; the opens and creates of the files it reads and writes are
inside their data ops (the envelope's write op creates its file), so the term charges the rest (`metadata`):

    n_meta = max(0, ops − data opens − cached stats) + ends + max(0, creates − write ops)
    time per task  k · [ n_f / Tf(k) + n_s / Ts(k) + (n_meta − n_s − n_f) / Tm(k) ]

n_s = min(lookups, uncached stats) + ends − n_f stats at Ts (when the envelope has the stat rate,
`mtcenvelope measure` on ≥ 2 hosts: ~0.17 ms per stat against ~0.9 ms per create on the testbed), n_f = ends at Tf
(when it has the fstat rate), the rest at Tm. Its parts:
- `stat_cache`: the share of the stats the trace saw served by the client's attribute cache
  (`stats_cached_fraction`: task-file pairs whose stats took < 20 us each) is not charged: such a stat costs ~2 us,
  gfmd answers in 75-650 us (testbed);
- `seeks_end`: a seek to a file's end (`seeks_end_per_task`) asks gfarm2fs the file's size (glibc's fseek calls
  fstat, and a read through FUSE leaves the cached attributes stale), at Tf: 0.44-0.49 ms per fstat on the
  testbed against 0.20-0.24 ms for a stat of a file not read; seeks made 8-16 % of some stages' I/O time
  (montage_example/RESULTS.md, "Seeks to a file's end").
Without `metadata`: the paper's one create per round, to writing stages.
"""
SWITCHES = ("metadata", "stat_cache", "seeks_end")
STAGE_FIELDS = ("metadata.ops_per_task", "metadata.creates_per_task", "metadata.stats_per_task",
                "metadata.stats_cached_fraction", "metadata.seeks_end_per_task")
ENVELOPE_METRICS = ("Tm", "Ts", "Tf")


def charge(stage, surface, ops, size, on, notes) -> tuple:
    """Add the task's metadata ops as ops["meta"]; (of them at Ts, at Tf)."""
    n_stat = n_fstat = 0.0
    if "metadata" not in on:
        return n_stat, n_fstat
    md = stage.metadata
    data_opens = sum(ops.values())
    cached = (md.stats_per_task or 0.0) * ((md.stats_cached_fraction or 0.0) if "stat_cache" in on else 0.0)
    stats = (md.stats_per_task or 0.0) - cached
    lookups = max(0.0, (md.ops_per_task or 0.0) - data_opens - cached)
    ends = (md.seeks_end_per_task or 0.0) if "seeks_end" in on else 0.0
    extra = lookups + ends + max(0.0, md.creates_per_task - ops.get("write", 0.0))
    if extra > 0:
        ops["meta"], size["meta"] = extra, 0
        if "Tf" in surface.metrics():
            n_fstat = ends
        if "Ts" in surface.metrics():
            n_stat = min(lookups, stats) + ends - n_fstat
        elif md.stats_per_task or ends - n_fstat:
            notes.append("the envelope has no stat rate (Ts): stats charged as creates (Tm)")
    if ends:
        notes.append(f"seeks to the end: {ends:.3g} per task (the size asked of the file system), each a "
                     f"metadata request" + (" at Tf" if n_fstat else ""))
    return n_stat, n_fstat


def rate(env, n, n_stat, n_fstat, k) -> float:
    """The aggregate rate of the task's n metadata ops at concurrency k: Tf, Ts and Tm by their counts."""
    if not (n_stat or n_fstat):
        return env.get("Tm", 0, k)
    parts = ((n_fstat, "Tf"), (n_stat, "Ts"), (n - n_stat - n_fstat, "Tm"))
    return n / sum(m / env.get(x, 0, k) for m, x in parts if m > 0)


def per_round_create(stage_writes: bool, on) -> bool:
    """Without `metadata`, a writing stage pays the paper's one create (1/Tm) per round."""
    return "metadata" not in on and stage_writes
