"""`mtcenvelope measure`: sweep the MTC envelope with the native engine on every host at once.

For each host count h, file size S, processes per host P and repeat r (DESIGN.md section 3):

* Tm  (once per P, h, r; file_size 0): every process creates K empty files (create + close =
  one op) in one directory shared by all hosts;
* Ts  (with Tm, h >= 2): every process then stats K of those files, made on the next host's mount:
  the attributes of existing files, which tasks look up far more often than they create files (on
  the files' own mount the kernel's attribute cache answers: ~32,000 stats/s vs ~6,000 on the testbed);
* TL/BL: every process writes K files of S bytes into its host's directory; gfwhere (one
  batched call) then checks that each file's only replica is on the writer's host;
* T1L/B1L: each host's processes read the files its host just wrote (another process wrote
  them; the replica on the reader's host, checked above);
* Tf  (with T1L, at the smallest size): the same processes then open each of those files, read
  one call, close, open it again and fstat it; only the fstat is timed. A read through FUSE
  leaves the kernel's cached attributes stale (the atime), so this fstat asks gfarm2fs, as
  glibc's fseek to the end does when cfitsio re-opens a file it read (~0.45 ms on the testbed,
  ~2 us with the attributes cached);
* young (``--young``): T1L/B1L alone, read at once after the write run (no check, no cache drop in
  between; the replicas checked after the read): files another process wrote on the reader's host
  ~0.2 s before, within FUSE's entry and attribute timeouts (1 s by default), as Montage's
  mFitplane reads mDiff's output ~0.1 s after it (docs/experiments/montage-passes.md: checked alone, the
  age made no read cheaper; the idle before it did);
* after idling (``--idle-ms N``): reads only, each reader sleeping N ms before each op after its
  first and its first op dropped (it follows the launch's idle, ~0.2 s or more; its mean time is
  kept in the config as first_op_s): a small read costs more the longer the host's I/O path idled
  before it, and a task's first read follows the idle since the host's last I/O;
* T1R/B1R: host j reads the files host (j+1) mod h wrote (replica elsewhere, checked above);
* TN/BN: every process reads one shared file written once per size by the first host;
* before each read run no cache may serve the inputs: on the testbed (one kernel, root) every
  gfsd spool file is written back (sync) and evicted (POSIX_FADV_DONTNEED) -- a global
  drop_caches would also evict the daemons' and the engine's code and make every run start
  late; elsewhere ``sync; echo 3 > /proc/sys/vm/drop_caches`` on every host where permitted.
  gfarm2fs keeps no client page cache (checked once per sweep with fincore). What was done is
  in every read point's config under "cache".

Rates: ops/s = ok ops / (last end - first start) over all processes of all hosts; bytes/s the
same with bytes. Each engine run is one repeat; a failed run is stored as failed points with
the reason, and the sweep goes on.

Precision target (IOR's stonewalling idea applied to repeats): a point (metric x size x
processes per host x hosts) is repeated at least ``repeat`` times, then until the 90 %
interval of its mean time per op (or byte) is within +-``precision`` of it, or its time budget is
spent, or ``max_repeat`` repeats were made. A point's time budget is ``budget_factor`` times
what its minimum repeats took, and at most its share of what is left of the sweep's
``time_budget`` (the time left over the planned cost of the points left, times its own cost),
so cheap or steady points leave time to noisy ones and a small sweep stays small. Every repeat's config then holds the point's "precision"
(interval, repeats, op count, why it stopped). Every step's points are stored as soon as they exist, so an
interrupted sweep (Ctrl-C, SIGTERM) keeps what it measured.

The parts, one job each: sweep.py (what a sweep measures, in which order), target.py (where), placement.py (its
files' directories, their replicas), caches.py (eviction before a read run), metric_run.py (measuring one metric),
precision.py (the repeats of a point), persistence.py (the run in the db), signals.py (SIGTERM), progress.py (the
bar); this module checks a sweep and runs it.
"""
from __future__ import annotations

import os
import time
from typing import Any

from .metric_run import IDLE_METRICS, MetricRunner
from .persistence import EnvelopeRun
from .points import METRICS
from .precision import PrecisionLoop
from .progress import Progress
from .signals import sigterm_as_interrupt
from .sweep import MeasureError, Sweep, plan
from .target import Target


def measure(db: str, name: str, target: Target, sweep: Sweep, *, append: bool = False,
            progress: bool = True, stream=None, machine: dict | None = None) -> dict[str, Any]:
    """Run a sweep into run ``name`` of ``db``; returns a summary. ``machine``: this machine's load just before
    (mtcio.envelope.machine), kept in the run's meta. KeyboardInterrupt (Ctrl-C,
    and SIGTERM, which is turned into it) stops the sweep keeping the points stored so far;
    the summary then has interrupted=True."""
    hcs = check(target, sweep)
    run = EnvelopeRun(db, name, append)
    run.meta.update({"tool": "native", "hosts": target.hosts, "host_counts": hcs,
                     "sizes": sweep.sizes, "procs_per_host": sweep.procs, "repeat": sweep.repeat,
                     "metrics": sweep.metrics, "backend": target.backend, "launcher": target.launcher_doc,
                     "mount": target.mount, "timeout_s": sweep.timeout,
                     "drop_caches": sweep.drop_caches, "started": time.time(),
                     "testbed": bool(target.testbed), "status": "running",
                     "precision": sweep.precision, "max_repeat": sweep.max_repeat,
                     "time_budget_s": sweep.time_budget, "budget_factor": sweep.budget_factor,
                     "block": sweep.block, "ops_per_proc": sweep.ops_per_proc,
                     "hogs_per_host": sweep.hogs_per_host, "hogs_per_kernel": sweep.hogs_per_kernel,
                     "call_gap_us": sweep.call_gap_us, "young": sweep.young, "idle_ms": sweep.idle_ms})
    if machine is not None:
        run.meta["machine_before"] = machine
    if run.exists:
        run.set_status("running")
    steps = plan(sweep, len(target.hosts))
    prog = Progress(steps, stream=stream, enabled=progress)
    runner = MetricRunner(target, sweep, run.store, prog, run_name=name, repeat_base=run.repeat_base)
    loop = PrecisionLoop(runner, sweep, annotate=run.annotate)
    t0 = time.monotonic()
    interrupted = completed = False
    try:
        with sigterm_as_interrupt():
            loop.run(steps)
            completed = True
            runner.close()
    except KeyboardInterrupt:      # the caller says "interrupted" (once)
        interrupted = True
        runner.kill()
    except BaseException:
        runner.kill()
        raise
    finally:
        try:   # a run that died without getting here stays "running" (list shows it)
            run.set_status("complete" if completed else "interrupted" if interrupted else "failed")
        finally:
            run.close()
    return {"run": name, "db": db, "points": runner.n_points, "failed": runner.n_failed,
            "seconds": time.monotonic() - t0, "steps": len(steps), "interrupted": interrupted,
            "workdir": runner.place.root}


def check(target: Target, sweep: Sweep) -> list[int]:
    """MeasureError for a sweep that cannot run on ``target``; else its host counts."""
    unknown = [m for m in sweep.metrics if m not in METRICS]
    if unknown:
        raise MeasureError(f"unknown metric(s) {', '.join(unknown)}; one of {', '.join(METRICS)}")
    if sweep.young and set(sweep.metrics) - {"T1L", "B1L"}:
        raise MeasureError("young reads (--young) measure T1L and B1L only, not "
                           + ", ".join(m for m in sweep.metrics if m not in ("T1L", "B1L")))
    if sweep.idle_ms and set(sweep.metrics) - set(IDLE_METRICS):
        raise MeasureError("reads after idling (--idle-ms) measure reads only, not "
                           + ", ".join(m for m in sweep.metrics if m not in IDLE_METRICS))
    if sweep.idle_ms and sweep.ops_per_proc == 1:
        raise MeasureError("--idle-ms needs 2 or more ops per process: the first, after the launch, is dropped")
    hcs = sweep.host_counts or [len(target.hosts)]
    if any(h < 1 or h > len(target.hosts) for h in hcs):
        raise MeasureError(f"host counts {hcs} must be within 1..{len(target.hosts)}")
    if any(p < 1 for p in sweep.procs) or any(s < 1 for s in sweep.sizes) or sweep.repeat < 1:
        raise MeasureError("sizes, processes per host and --repeat must be positive")
    if not os.path.exists(target.engine) and target.same_kernel:
        raise MeasureError(f"engine {target.engine} not found (make -C envelope/engine)")
    return hcs
