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
"""
from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from typing import Any, Callable, Sequence

from mtcio.db import envelope_rows
from mtcio.db.gfarm import parse_gfwhere, short_host

from . import engine as eng
from .agent import Agent, AgentError, Result, run_many
from .points import METRICS, ParseError, Point
from .stats import ci90, hmean
from .sweep import DATA_KINDS, KIND_METRICS, MeasureError, Step, Sweep, plan, point_groups
from .target import Target


def _finite(x):
    """JSON has no infinity (the db's JSON functions refuse it): an unbounded end is null."""
    return x if x is None or math.isfinite(x) else None


# --------------------------------------------------------------------------------- progress
class Progress:
    """A bar with an estimate of the time left on stderr.  Not a terminal (a log file, a pipe): no bar, only a line
    per failed step and one when the last step is done."""

    def __init__(self, steps: Sequence[Step], stream=None, enabled: bool = True):
        self.total = sum(s.cost for s in steps) or 1.0
        self.n = len(steps)
        self.done_cost = 0.0
        self.i = 0
        self.t0 = time.monotonic()
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.failed = 0

    def update(self, step: Step, failed: bool = False) -> None:
        self.i += 1
        self.done_cost += step.cost
        self.failed += failed
        if not self.enabled:
            return
        el = time.monotonic() - self.t0
        frac = min(1.0, self.done_cost / self.total)
        eta = el / frac * (1 - frac) if frac > 0 else float("nan")
        pct = 100 * frac
        bar = "#" * int(30 * frac) + "." * (30 - int(30 * frac))
        msg = (f"[{bar}] {pct:5.1f}% {self.i}/{self.n} steps  {step.label():<24} "
               f"elapsed {fmt_t(el)}  left ~{fmt_t(eta)}"
               + (f"  failed {self.failed}" if self.failed else ""))
        if self.tty:
            self.stream.write("\r" + msg + ("\n" if self.i == self.n else ""))
            self.stream.flush()
        elif self.i == self.n or failed:
            self.stream.write(msg + "\n")
            self.stream.flush()

    def add(self, steps: Sequence[Step]) -> None:
        """Extra repeats of a point that has not met its precision target yet."""
        self.n += len(steps)
        self.total += sum(s.cost for s in steps)

    def note(self, text: str) -> None:
        if self.enabled:
            self.stream.write(("\n" if self.tty else "") + text + "\n")
            self.stream.flush()


def fmt_t(s: float) -> str:
    if not math.isfinite(s):
        return "?"
    s = int(round(s))
    return f"{s // 60}:{s % 60:02d}"


# --------------------------------------------------------------------------------- runner
class Interrupted(Exception):
    pass


class Measurer:
    def __init__(self, target: Target, sweep: Sweep, store_fn: Callable[[list[Point]], None],
                 progress: Progress | None = None, run_name: str = "", repeat_base: int = 0,
                 log: Callable[[str], None] | None = None,
                 annotate_fn: Callable[[list[str], int, int, int, int, int, dict], None]
                 | None = None):
        self.t = target
        self.sw = sweep
        self.store = store_fn
        self.annotate = annotate_fn
        self.sink: dict[str, list[Point]] | None = None   # the current point's points
        self.progress = progress
        self.repeat_base = repeat_base
        self.log = log or (lambda m: print(m, file=sys.stderr))
        self.agents = {h: Agent(h, target.launcher) for h in target.hosts}
        self.delay = sweep.start_delay if sweep.start_delay is not None else \
            (0.4 if target.backend == "gfarm" else 0.15)
        self.root = f"{sweep.workdir.rstrip('/')}/{_safe(run_name) or 'run'}-{os.getpid()}-" \
                    f"{int(time.time())}"
        self.written: dict[tuple, dict] = {}    # (size, ppn, h, rep) -> write state
        self.shared: dict[tuple, dict] = {}     # (size, h) -> shared file state
        self.n_points = 0
        self.n_failed = 0
        self.client_cache: str | None = None
        self.base_delay = self.delay
        self.last_delay = self.delay
        self.step_t0 = time.monotonic()
        self.on_time = 0

    # ------------------------------------------------------------ helpers
    def helper(self, argv: Sequence[str] | str, timeout: float = 60.0) -> Result:
        """A metadata command (gfmkdir, gfwhere, gfrm) on the first host."""
        return self.agents[self.t.hosts[0]].run(argv, timeout)

    def wdir(self, size, ppn, h, rep, host) -> str:
        return f"{self.root}/s{size}/p{ppn}h{h}/r{rep}/{host}"

    def tmdir(self, ppn, h, rep) -> str:
        return f"{self.root}/tm/p{ppn}h{h}/r{rep}"

    def shared_path(self, size, h) -> str:
        return f"{self.root}/shared/s{size}h{h}"

    def files(self, size, ppn, h, rep, host, k) -> list[str]:
        d = self.wdir(size, ppn, h, rep, host)
        return [f"{d}/f{lr}_{i}" for lr in range(ppn) for i in range(k)]

    def where(self, paths: Sequence[str]) -> tuple[dict[str, list[str]], str]:
        """Replica hosts of many Gfarm paths with as few gfwhere calls as possible."""
        out: dict[str, list[str]] = {}
        errs = []
        for i in range(0, len(paths), 500):
            chunk = list(paths[i:i + 500])
            if len(chunk) == 1:   # keep the block format: one path makes gfwhere terse
                chunk = chunk + chunk
            r = self.helper(["gfwhere", *chunk], timeout=max(30.0, self.sw.timeout))
            out.update(parse_gfwhere(r.stdout, chunk))
            if r.rc:
                errs.append(r.stderr.strip().splitlines()[0] if r.stderr.strip() else
                            f"gfwhere exit {r.rc}")
        return out, "; ".join(errs)

    def spools(self) -> list[str]:
        st = self.t.testbed or {}
        base = st.get("state_dir")
        return [os.path.join(base, "hosts", h["name"], "spool") for h in st.get("hosts", [])] \
            if base else []

    def drop(self) -> dict[str, Any]:
        """Keep reads from being served by a cache; returns what was done (for the config)."""
        t0 = time.monotonic()
        note = self._drop()
        note["seconds"] = round(time.monotonic() - t0, 3)
        return note

    def _drop(self) -> dict[str, Any]:
        mode = self.sw.drop_caches
        if mode == "auto":
            mode = "evict" if self.t.same_kernel and self.spools() else "drop"
        note: dict[str, Any] = {"mode": mode, "inputs": "written by other processes",
                                "client": self.client_cache}
        if mode == "off":
            note["done"] = "nothing (--drop-caches off): reads may come from the page cache"
        elif mode == "evict":
            os.sync()         # one bulk write-back: dirty pages cannot be evicted
            n = 0
            errs = set()
            for sp in self.spools():
                for d, _, fs in os.walk(sp):
                    for f in fs:
                        try:
                            fd = os.open(os.path.join(d, f), os.O_RDONLY)
                            try:
                                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                                n += 1
                            finally:
                                os.close(fd)
                        except OSError as e:
                            errs.add(e.strerror)
            note["done"] = (f"sync, then every gfsd spool file ({n}) evicted from the page "
                            "cache (POSIX_FADV_DONTNEED) before the run"
                            + (f"; errors: {', '.join(sorted(errs))}" if errs else ""))
        elif self.t.same_kernel:
            try:
                os.sync()
                with open("/proc/sys/vm/drop_caches", "w") as f:
                    f.write("3\n")
                note["done"] = "sync + echo 3 > /proc/sys/vm/drop_caches (one kernel, all hosts)"
            except OSError as e:
                note["done"] = f"drop_caches not permitted ({e.strerror}): page cache kept"
        else:
            res = run_many([(a, "sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || "
                                "sudo -n sh -c 'echo 3 > /proc/sys/vm/drop_caches'")
                            for a in self.agents.values()], timeout=60)
            bad = [r.host for r in res if r.rc != 0]
            note["done"] = ("sync + drop_caches on every host" if not bad else
                            f"drop_caches not permitted on {', '.join(bad)}: their page cache kept")
        return note

    def check_client_cache(self, mount_path: str) -> None:
        """Once: does the gfarm2fs mount keep file pages after a read? (fincore)"""
        if self.client_cache is not None:
            return
        if self.t.backend == "gfarm":
            self.client_cache = "libgfarm backend: no kernel page cache on the client side"
            return
        if not self.t.same_kernel:
            self.client_cache = "not checked (remote hosts)"
            return
        try:
            cp = subprocess.run(["fincore", "--bytes", "--noheadings", "--raw",
                                 "--output", "RES", mount_path], capture_output=True, text=True,
                                timeout=10)
            res = int(cp.stdout.split()[0])
            self.client_cache = (f"fincore after a read through the mount: {res} bytes resident"
                                 + (" (gfarm2fs keeps no page cache for it)" if res == 0 else
                                    " (FUSE page cache used; evicted only by --drop-caches drop)"))
        except (OSError, ValueError, IndexError, subprocess.TimeoutExpired) as e:
            self.client_cache = f"not checked ({e})"

    def run_engines(self, hosts: Sequence[str], argv_of: Callable[[int, str, int], list[str]],
                    nprocs: int = 1) -> tuple[list[eng.EngineRun], str | None]:
        """Run one engine per host, started together; (runs, error of the whole run)."""
        # headroom for every host to fork and initialise its workers: grows with the process
        # count (2 cores here) and with lateness seen so far
        delay = max(self.delay, self.base_delay + 0.004 * nprocs)
        self.last_delay = delay
        start = eng.start_time(delay)
        jobs = [(self.agents[h], argv_of(j, h, start) + self.hogs_argv(j)) for j, h in enumerate(hosts)]
        try:
            res = run_many(jobs, timeout=self.delay + self.sw.timeout + 15)
        except AgentError as e:
            return [], str(e)
        runs, errs = [], []
        for r in res:
            if r.rc is None:
                errs.append(f"{r.host}: engine did not return within the point timeout "
                            f"({self.sw.timeout:g} s + grace): killed")
                continue
            try:
                run = eng.parse_output(r.stdout, source=f"mtcengine on {r.host}")
            except ParseError as e:
                errs.append(f"{r.host}: {e} (exit {r.rc}; stderr: {r.stderr.strip()[:300]})")
                continue
            run.host, run.returncode, run.stderr = r.host, r.rc, r.stderr
            runs.append(run)
        late = max((int(x.summary.get("late_ns", 0)) for x in runs), default=0)
        # a host passed the common instant well before it was ready: more headroom (small
        # lateness is wake-up latency on a loaded machine, which more headroom does not cure;
        # every point's config keeps late_start_ns)
        if late > 50_000_000:
            self.delay = min(1.5, max(self.delay, (delay + late / 1e9) * 1.25))
            self.on_time = 0
        else:
            self.on_time += 1
            if self.on_time >= 10 and self.delay > self.base_delay:
                self.delay = max(self.base_delay, self.delay * 0.8)
                self.on_time = 0
        return runs, ("; ".join(errs) if errs else None)

    def argv(self, op: str, path: str, ppn: int, k: int, size: int | None, start: int,
             rank_base: int, compute_ms: int = 0) -> list[str]:
        return eng.engine_argv(op, path=path, procs=ppn, files_per_proc=k, size=size,
                               block=min(self.sw.block, size) if size else None,
                               backend=self.t.backend, start_at_ns=start,
                               timeout=self.sw.timeout, fsync=self.sw.fsync and op in ("create", "write"),
                               rank_base=rank_base, compute_ms=compute_ms,
                               gap_us=self.sw.call_gap_us, idle_ms=self.sw.idle_ms if op == "read" else 0,
                               exe=self.t.engine)

    def hogs_argv(self, j: int) -> list[str]:
        """Engine options for the spinners beside the engine of a run's j-th host: its --hogs-per-host, and
        --hogs-per-kernel on the first host when every host shares this machine's kernel, else on each."""
        n = self.sw.hogs_per_host + (self.sw.hogs_per_kernel if j == 0 or not self.t.same_kernel else 0)
        return ["--hogs", str(n)] if n else []

    def base_config(self, **kw) -> dict[str, Any]:
        cfg = {"backend": self.t.backend, "launcher": self.t.launcher_doc,
               "timeout_s": self.sw.timeout, "workdir": self.root}
        if self.sw.hogs_per_host:
            cfg["hogs_per_host"] = self.sw.hogs_per_host
        if self.sw.hogs_per_kernel:
            cfg["hogs_per_kernel"] = self.sw.hogs_per_kernel
        if self.sw.call_gap_us:
            cfg["call_gap_us"] = self.sw.call_gap_us
        if self.sw.young:
            cfg["young"] = True
        if self.sw.idle_ms:
            cfg["idle_ms"] = self.sw.idle_ms
        cfg.update(kw)
        return cfg

    def emit(self, step: Step, metric: str, runs, err: str | None, cfg: dict,
             size: int, extra_fail: str | None = None) -> list[Point]:
        """Points of one measurement (a failure of the whole run or of placement included)."""
        rep = step.rep + self.repeat_base
        cfg = {**cfg, "start_delay_s": round(self.last_delay, 3),
               "step_s": round(time.monotonic() - self.step_t0, 3)}
        # the machine's CPU and idle seconds while measuring (/proc/uptime counts in 10 ms: a short run's may be 0,
        # which its envelope's sums over many points do not mind)
        if runs and all(int(r.summary.get("cpus", 0)) > 0 for r in runs):
            for k in ("cpu_s", "idle_s"):
                cfg[k] = round(sum(float(r.summary.get(k, 0)) for r in runs), 2)
        # the workers' time in ops, and on a CPU and waiting for one over their op loops: the share of an op's time
        # spent waiting for a CPU, as a traced task's io_cpu_wait (db/model.py) estimates it
        if runs and all(r.summary.get("sched") == "1" for r in runs):
            for k in ("op_s", "op_cpu_s", "op_wait_s"):
                cfg[k] = round(sum(float(r.summary[k]) for r in runs), 6)
        if self.sw.hogs_per_kernel:     # where the spinners ran, as the engines said
            cfg["hogs_by_host"] = {r.host: int(r.meta.get("hogs", 0)) for r in runs}
        if self.sw.idle_ms and runs and metric in IDLE_METRICS:
            runs, cfg = _after_idle(runs, cfg)
        elif runs:
            cfg = _first_op_share(runs, cfg)
        if err and not runs:
            pts = failed_points(metric, size, step.ppn, step.h, rep, err, cfg)
        else:
            pts = eng.points_from_runs(metric, runs, file_size=size, procs_per_host=step.ppn,
                                       hosts=step.h, repeat=rep, config=cfg)
            reason = "; ".join(x for x in (err, extra_fail) if x)
            if reason:
                pts = [Point.failed(p.metric, p.file_size, p.procs_per_host, p.hosts, p.repeat,
                                    p.tool, (p.error + "; " if p.error else "") + reason,
                                    p.tool_version,
                                    {**p.config, **({"value_if_ok": p.value} if p.ok else {})})
                       for p in pts]
        if self.sink is not None:
            for p in pts:
                self.sink.setdefault(p.metric, []).append(p)
        keep = [p for p in pts if p.metric in self.sw.metrics]
        if keep:
            self.store(keep)
            self.n_points += len(keep)
            self.n_failed += sum(not p.ok for p in keep)
        return keep

    # ------------------------------------------------------------ steps
    def setup(self, steps: Sequence[Step]) -> None:
        for a in self.agents.values():
            a.start()
        dirs = {self.root}
        for s in steps:
            if s.kind == "create":
                dirs.add(self.tmdir(s.ppn, s.h, s.rep))
            elif s.kind == "write":
                dirs.update(self.wdir(s.size, s.ppn, s.h, s.rep, host)
                             for host in self.t.hosts[:s.h])
            elif s.kind == "setup-shared":
                dirs.add(f"{self.root}/shared")
        r = self.helper(["gfmkdir", "-p", *sorted(dirs)], timeout=120)
        if r.rc:
            raise MeasureError(f"gfmkdir -p {self.root}/... on {self.t.hosts[0]} failed: "
                               f"{r.stderr.strip()[:500]}")

    def step_create(self, st: Step) -> list[Point]:
        k = self.sw.creates_per_proc
        d = self.tmdir(st.ppn, st.h, st.rep)
        hosts = self.t.hosts[:st.h]
        runs, err = self.run_engines(hosts, lambda j, h, start: self.argv(
            "create", f"{self.t.prefix(h)}{d}/c{{rank}}_{{i}}", st.ppn, k, None, start,
            j * st.ppn), st.ppn * st.h)
        cfg = self.base_config(ops_per_proc=k, files_per_proc=k, bytes_per_op=0,
                               op="create+close of an empty file",
                               directory="one directory shared by all processes")
        pts = self.emit(st, "Tm", runs, err, cfg, 0)
        if "Ts" not in self.sw.metrics or st.h < 2:
            return pts
        runs, err = self.run_engines(hosts, lambda j, h, start: self.argv(
            "stat", f"{self.t.prefix(h)}{d}/c{{rank}}_{{i}}", st.ppn, k, None, start,
            ((j + 1) % len(hosts)) * st.ppn), st.ppn * st.h)
        cfg = self.base_config(ops_per_proc=k, files_per_proc=k, bytes_per_op=0,
                               op="stat of an existing empty file", files="the Tm run's, created on the next host")
        return pts + self.emit(st, "Ts", runs, err, cfg, 0)

    def step_setup_shared(self, st: Step) -> None:
        p = self.shared_path(st.size, st.h)
        writer = self.t.hosts[0]
        runs, err = self.run_engines([writer], lambda j, h, start: self.argv(
            "write", f"{self.t.prefix(h)}{p}", 1, 1, st.size, start, 0))
        state = {"path": p, "host": writer, "ok": False}
        if err or not runs or runs[0].failed:
            state["error"] = err or "; ".join(sorted({r.error or "?" for r in runs[0].failed}))
        else:
            reps, werr = self.where([p])
            state["replicas"] = reps.get(p, [])
            if [short_host(x) for x in state["replicas"]] != [short_host(writer)]:
                state["error"] = (f"shared file {p} has replicas {state['replicas']}, expected "
                                  f"only {writer}" + (f" ({werr})" if werr else ""))
            else:
                state["ok"] = True
        self.shared[(st.size, st.h)] = state

    def step_write(self, st: Step) -> list[Point]:
        k = self.sw.k_for(st.size)
        hosts = self.t.hosts[:st.h]
        runs, err = self.run_engines(hosts, lambda j, h, start: self.argv(
            "write", f"{self.t.prefix(h)}{self.wdir(st.size, st.ppn, st.h, st.rep, h)}"
                     f"/f{{lrank}}_{{i}}", st.ppn, k, st.size, start, j * st.ppn,
            self.sw.write_compute_ms), st.ppn * st.h)
        expected = {h: self.files(st.size, st.ppn, st.h, st.rep, h, k) for h in hosts}
        if self.sw.young:      # read at once; the replicas are checked after the read
            self.written[(st.size, st.ppn, st.h, st.rep)] = {
                "ok": bool(runs) and not err and not any(r.failed for r in runs), "expected": expected, "error": err,
                "end_ns": max((x.t_end_ns for r in runs for x in r.records), default=None)}
            return []
        reps, werr = self.where([p for ps in expected.values() for p in ps])
        wrong = [(p, reps.get(p)) for h, ps in expected.items() for p in ps
                 if [short_host(x) for x in reps.get(p, [])] != [short_host(h)]]
        nfiles = sum(len(v) for v in expected.values())
        placement = {"check": "gfwhere after the run", "files": nfiles,
                     "on_writer_host_only": nfiles - len(wrong)}
        if wrong:
            placement["misplaced_examples"] = [f"{p}: {r or 'missing'}" for p, r in wrong[:3]]
        ok_runs = bool(runs) and not err and not any(r.failed for r in runs)
        fail = None
        if wrong and ok_runs:
            fail = (f"placement: {len(wrong)} of {nfiles} written files are not (only) on the "
                    f"writer's host, e.g. {placement['misplaced_examples'][0]}"
                    + (f" ({werr})" if werr else ""))
        state = {"ok": ok_runs and not wrong, "replicas": reps, "expected": expected,
                 "error": None}
        if not state["ok"]:
            why = err or fail or "; ".join(sorted({x.error or f"errno {x.errno}" for r in runs
                                                   for x in r.failed}))[:300]
            state["error"] = f"inputs not in place: the write run of this repeat failed ({why})"
        self.written[(st.size, st.ppn, st.h, st.rep)] = state
        cfg = self.base_config(ops_per_proc=k, files_per_proc=k, bytes_per_op=st.size,
                               block=min(self.sw.block, st.size),
                               fsync=self.sw.fsync, placement=placement,
                               compute_ms_before=self.sw.write_compute_ms,
                               op="create+write+close", files="one per op, new names")
        return self.emit(st, "TL", runs, err, cfg, st.size, fail)

    def step_read(self, st: Step) -> list[Point]:
        k = self.sw.k_for(st.size)
        hosts = self.t.hosts[:st.h]
        metric = {"local": "T1L", "remote": "T1R", "shared": "TN"}[st.kind]
        # TN: every process reads the one shared file k times; T1L/T1R: k files each
        cfg = self.base_config(ops_per_proc=k, files_per_proc=1 if st.kind == "shared" else k,
                               bytes_per_op=st.size, block=min(self.sw.block, st.size),
                               op="open+read to EOF+close")
        if st.kind == "shared":
            state = self.shared.get((st.size, st.h), {"ok": False, "error": "no shared file"})
            if not state["ok"]:
                return self.emit(st, metric, [], f"input not in place: {state.get('error')}",
                                 cfg, st.size)
            cfg["placement"] = {"kind": "N-to-1", "file": state["path"],
                                "replica_hosts": state["replicas"], "check": "gfwhere",
                                "readers_local": st.ppn, "readers_remote": st.ppn * (st.h - 1),
                                "written_by": f"another process on {state['host']}"}
            cfg["cache"] = self.drop()
            runs, err = self.run_engines(hosts, lambda j, h, start: self.argv(
                "read", f"{self.t.prefix(h)}{state['path']}", st.ppn, k, st.size, start,
                j * st.ppn), st.ppn * st.h)
            self.check_client_cache(f"{self.t.prefix(hosts[-1])}{state['path']}")
            return self.emit(st, metric, runs, err, cfg, st.size)
        if self.sw.young:
            return self.step_young(st, cfg)
        state = self.written.get((st.size, st.ppn, st.h, st.rep))
        if not state or not state["ok"]:
            return self.emit(st, metric, [], (state or {}).get("error") or "inputs not written",
                             cfg, st.size)
        src = {h: (h if st.kind == "local" else hosts[(j + 1) % len(hosts)])
               for j, h in enumerate(hosts)}
        # checked, not assumed: every file a host reads has its replicas where they should be
        bad = []
        for reader, owner in src.items():
            for p in state["expected"][owner]:
                rs = [short_host(x) for x in state["replicas"].get(p, [])]
                good = rs == [short_host(reader)] if st.kind == "local" else \
                    (rs and short_host(reader) not in rs)
                if not good:
                    bad.append(f"{p} on {rs} read by {reader}")
        nfiles = sum(len(state["expected"][o]) for o in src.values())
        cfg["placement"] = {"kind": "1-to-1 " + st.kind, "check": "gfwhere",
                            "files": nfiles, "as_required": nfiles - len(bad),
                            "reads_from": {r: o for r, o in src.items()},
                            "written_by": "other processes (this repeat's write run)"}
        if bad:
            return self.emit(st, metric, [], f"placement: {len(bad)} of {nfiles} inputs are not "
                             f"{st.kind}, e.g. {bad[0]}", cfg, st.size)
        cfg["cache"] = self.drop()
        path = {h: f"{self.t.prefix(h)}{self.wdir(st.size, st.ppn, st.h, st.rep, src[h])}/f{{lrank}}_{{i}}"
                for h in hosts}
        runs, err = self.run_engines(hosts, lambda j, h, start: self.argv(
            "read", path[h], st.ppn, k, st.size, start, j * st.ppn), st.ppn * st.h)
        pts = self.emit(st, metric, runs, err, cfg, st.size)
        if st.kind != "local" or "Tf" not in self.sw.metrics or st.size != min(self.sw.sizes):
            return pts
        runs, err = self.run_engines(hosts, lambda j, h, start: self.argv(
            "fstat", path[h], st.ppn, k, None, start, j * st.ppn), st.ppn * st.h)
        cfg = {**cfg, "bytes_per_op": 0, "files": "the T1L run's",
               "op": "open+read one call+close+open+fstat+close, only the fstat timed"}
        cfg.pop("cache", None)
        return pts + self.emit(st, "Tf", runs, err, cfg, 0)

    def step_young(self, st: Step, cfg: dict) -> list[Point]:
        """T1L/B1L of the files this repeat's write run wrote a moment before on each reader's host (no check or
        cache drop in between); the replicas are checked after the read."""
        k = self.sw.k_for(st.size)
        hosts = self.t.hosts[:st.h]
        state = self.written.get((st.size, st.ppn, st.h, st.rep))
        if not state or not state["ok"]:
            why = (state or {}).get("error") or "the write run failed"
            return self.emit(st, "T1L", [], f"inputs not written ({why})", cfg, st.size)
        runs, err = self.run_engines(hosts, lambda j, h, start: self.argv(
            "read", f"{self.t.prefix(h)}{self.wdir(st.size, st.ppn, st.h, st.rep, h)}/f{{lrank}}_{{i}}", st.ppn, k,
            st.size, start, j * st.ppn), st.ppn * st.h)
        start = min((x.t_start_ns for r in runs for x in r.records), default=None)
        expected = state["expected"]
        reps, werr = self.where([p for ps in expected.values() for p in ps])
        bad = [f"{p} on {[short_host(x) for x in reps.get(p, [])]} read by {h}" for h, ps in expected.items() for p in ps
               if [short_host(x) for x in reps.get(p, [])] != [short_host(h)]]
        nfiles = sum(len(v) for v in expected.values())
        cfg = {**cfg, "cache": {"mode": "kept", "why": "young reads: files written on the reader's host just before"},
               "placement": {"kind": "1-to-1 local", "check": "gfwhere after the read", "files": nfiles,
                             "as_required": nfiles - len(bad), "written_by": "other processes, just before"}}
        if start and state["end_ns"]:     # from the write run's last end to the read run's first start
            cfg["age_s"] = round((start - state["end_ns"]) / 1e9, 3)
        fail = (f"placement: {len(bad)} of {nfiles} inputs are not local, e.g. {bad[0]}"
                + (f" ({werr})" if werr else "")) if bad else None
        return self.emit(st, "T1L", runs, err, cfg, st.size, fail)

    def step_cleanup(self, st: Step) -> None:
        # only this host count's directories: the next host count writes into its own
        # directories of the same size, made once by setup()
        self.helper(["gfrm", "-rf", *[f"{self.root}/s{st.size}/p{p}h{st.h}"
                                      for p in self.sw.procs]],
                    timeout=max(60.0, self.sw.timeout))
        for key in [k for k in self.written if k[0] == st.size and k[2] == st.h]:
            del self.written[key]

    def do(self, st: Step) -> None:
        before = self.n_failed
        self.step_t0 = time.monotonic()
        if st.kind == "create":
            self.step_create(st)
        elif st.kind == "setup-shared":
            self.step_setup_shared(st)
        elif st.kind == "write":
            self.step_write(st)
        elif st.kind in ("local", "remote", "shared"):
            self.step_read(st)
        elif st.kind == "cleanup":
            self.step_cleanup(st)
        if self.progress:
            self.progress.update(st, failed=self.n_failed > before)

    def run(self, steps: Sequence[Step]) -> None:
        self.setup(steps)
        t0 = time.monotonic()
        deadline = t0 + self.sw.time_budget if self.sw.time_budget else math.inf
        groups = point_groups(steps)
        cost_left = sum(s.cost for g in groups for s in g)
        planned_s = planned_cost = 0.0      # real seconds and planned cost of the minimum
        for g in groups:
            cost = sum(s.cost for s in g)
            if g[0].kind == "create" or g[0].kind in DATA_KINDS:
                # time for extra repeats: what is left once the minimum repeats of every
                # point left are paid (at the pace seen so far), shared by planned cost
                pace = planned_s / planned_cost if planned_cost > 0 else 1.0
                spare = deadline - time.monotonic() - pace * cost_left
                share = max(0.0, spare) * cost / cost_left if math.isfinite(spare) and \
                    cost_left > 0 else math.inf
                planned_s += self.run_point(g, share)
                planned_cost += cost
            else:
                for st in g:
                    self.do(st)
            cost_left -= cost
        if not self.sw.keep_files:
            self.helper(["gfrm", "-rf", self.root], timeout=max(60.0, self.sw.timeout))

    def run_point(self, steps: Sequence[Step], budget: float) -> float:
        """The planned repeats of one point (Tm of a P x h, or TL/T1L/T1R/TN of a size x P x
        h), then more until each metric's 90 % interval is within the precision target, the
        point's time budget for extra repeats is spent or max_repeat repeats were made.
        Returns the seconds the planned repeats took."""
        t0 = time.monotonic()
        planned_s = 0.0
        first = steps[0]
        kinds = [s.kind for s in steps if s.rep == first.rep]      # one repeat, in order
        planned = max(s.rep for s in steps) + 1
        self.sink = {}
        stopped: dict[str, str] = {}
        rep = 0
        todo = list(kinds)
        try:
            while True:
                if rep < planned:
                    batch = [s for s in steps if s.rep == rep]
                else:
                    batch = [Step(k, first.h, first.size, first.ppn, rep,
                                  next(s.cost for s in steps if s.kind == k))
                             for k in kinds if k in todo]
                    self.make_dirs(batch)
                    if self.progress:
                        self.progress.add(batch)
                for st in batch:
                    self.do(st)
                rep += 1
                if rep < planned:
                    continue
                if rep == planned:
                    planned_s = time.monotonic() - t0
                if self.sw.precision <= 0:
                    stopped = {k: "fixed count (--precision 0)" for k in kinds}
                    break
                open_kinds = []
                for k in kinds:
                    if k in stopped:
                        continue
                    why = self.stop_reason(k)
                    if why:
                        stopped[k] = why
                    else:
                        open_kinds.append(k)
                if not open_kinds:
                    break
                if rep == planned:
                    budget = min(budget, (self.sw.budget_factor - 1) * planned_s)
                spent = time.monotonic() - t0 - planned_s      # on extra repeats
                if rep >= self.sw.max_repeat or spent >= budget:
                    why = (f"max repeats ({self.sw.max_repeat})" if rep >= self.sw.max_repeat
                           else f"time budget spent ({spent:.1f} s of extra repeats, "
                           f"budget {budget:.1f} s)")
                    stopped.update({k: why for k in open_kinds})
                    break
                # reads of 1-to-1 inputs need this repeat's write run
                todo = open_kinds + (["write"] if {"local", "remote"} & set(open_kinds)
                                     and "write" not in open_kinds else [])
            for k, why in stopped.items():     # a write that went on for its reads' sake
                if why == "target met" and self.stop_reason(k) != "target met":
                    stopped[k] = "target met, then repeated as the inputs of reads"
            self.record_precision(first, kinds, stopped, time.monotonic() - t0, budget)
        finally:
            self.sink = None
        return planned_s

    def stop_reason(self, kind: str) -> str | None:
        """Why a kind's point needs no more repeats, or None."""
        t = KIND_METRICS[kind][0]
        pts = (self.sink or {}).get(t, [])
        ok = [p.value for p in pts if p.ok]
        if len(ok) < 2 and len(pts) - len(ok) >= 2:
            return "failed repeats (more would not help)"
        ci = ci90(ok)
        if ci and ci["rel_halfwidth"] <= self.sw.precision:
            return "target met"
        return None

    def record_precision(self, first: Step, kinds: Sequence[str], stopped: dict[str, str],
                         seconds: float, budget: float) -> None:
        if not self.annotate:
            return
        for k in kinds:
            for m in KIND_METRICS[k]:
                pts = (self.sink or {}).get(m, [])
                if not pts or m not in self.sw.metrics:
                    continue
                ok = [p.value for p in pts if p.ok]
                ci = ci90(ok)
                prec = {"target": self.sw.precision, "confidence": 0.9,
                        "repeats": len(pts), "repeats_ok": len(ok),
                        "mean": hmean(ok) if ok else None,
                        "ci90": [_finite(ci["low"]), _finite(ci["high"])] if ci else None,
                        "rel_halfwidth": _finite(ci["rel_halfwidth"]) if ci else None,
                        "met": bool(ci and ci["rel_halfwidth"] <= self.sw.precision),
                        "stopped": stopped.get(k, "?"),
                        "ops": sum(int(p.config.get("ops", 0)) for p in pts),
                        "seconds": round(seconds, 3),
                        "extra_budget_s": round(budget, 3) if math.isfinite(budget) else None}
                self.annotate([m], pts[0].file_size, first.ppn, first.h,
                              min(p.repeat for p in pts), max(p.repeat for p in pts), prec)

    def make_dirs(self, batch: Sequence[Step]) -> None:
        """Directories of an extra repeat (setup() made the planned repeats' ones)."""
        dirs = []
        for s in batch:
            if s.kind == "create":
                dirs.append(self.tmdir(s.ppn, s.h, s.rep))
            elif s.kind == "write":
                dirs += [self.wdir(s.size, s.ppn, s.h, s.rep, host)
                         for host in self.t.hosts[:s.h]]
        if dirs:
            r = self.helper(["gfmkdir", "-p", *dirs], timeout=60)
            if r.rc:
                self.log(f"gfmkdir of an extra repeat failed: {r.stderr.strip()[:300]}")

    def close(self) -> None:
        for a in self.agents.values():
            a.close()

    def kill(self) -> None:
        for a in self.agents.values():
            a.kill()


IDLE_METRICS = ("T1L", "B1L", "T1R", "B1R", "TN", "BN")


def _after_idle(runs, cfg):
    """The runs without each worker's first op (it follows the launch's idle, not --idle-ms), whose mean time goes
    in the config as first_op_s: its ratio to the point's time per op is one of the same minute."""
    firsts = [(x.t_end_ns - x.t_start_ns) / 1e9 for r in runs for x in r.records if x.i == 0 and x.ok]
    cfg = {**cfg, "op": cfg.get("op", "") + f", {cfg.get('idle_ms')} ms idle before each; each process's first "
           "op dropped"}
    if firsts:
        cfg["first_op_s"] = round(sum(firsts) / len(firsts), 7)
    return [replace(r, records=[x for x in r.records if x.i > 0]) for r in runs], cfg


def _first_op_share(runs, cfg):
    """With more than one op per worker: the share of the workers' op time their first ops took (each follows the
    launch's idle and costs ~3x a later one on the testbed), so a process's later ops can be priced from this run
    alone, not from the difference of two envelopes measured minutes apart."""
    ok = [x for r in runs for x in r.records if x.ok]
    total = sum(x.t_end_ns - x.t_start_ns for x in ok)
    if total <= 0 or not any(x.i > 0 for x in ok):
        return cfg
    first = sum(x.t_end_ns - x.t_start_ns for x in ok if x.i == 0)
    return {**cfg, "first_op_share": round(first / total, 4)}


def failed_points(metric, size, ppn, h, rep, err, cfg) -> list[Point]:
    """A failed point for every metric measured together with `metric` (the tool drivers' failures too)."""
    return [Point.failed(m, size, ppn, h, rep, "native", err, eng_version(), cfg)
            for m in eng.measured_together(metric)]


def eng_version() -> str:
    return "1"


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:60]


# --------------------------------------------------------------------------------- entry
def measure(db: str, name: str, target: Target, sweep: Sweep, *, append: bool = False,
            progress: bool = True, stream=None, machine: dict | None = None) -> dict[str, Any]:
    """Run a sweep into run ``name`` of ``db``; returns a summary. ``machine``: this machine's load just before
    (mtcio.envelope.machine), kept in the run's meta. KeyboardInterrupt (Ctrl-C,
    and SIGTERM, which is turned into it) stops the sweep keeping the points stored so far;
    the summary then has interrupted=True."""
    from mtcio.db import store as dbstore

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
    conn = dbstore.connect(db)
    kind = envelope_rows.kind_of(conn, name)
    repeat_base = 0
    if kind is not None:
        if not append:
            raise MeasureError(f"run {name!r} already exists in {db}; pick another --name or "
                               "give --append")
        if kind != "envelope":
            raise MeasureError(f"run {name!r} is a {kind} run, not an envelope run")
        repeat_base = envelope_rows.next_repeat(conn, name)
    meta = {"tool": "native", "hosts": target.hosts, "host_counts": hcs,
            "sizes": sweep.sizes, "procs_per_host": sweep.procs, "repeat": sweep.repeat,
            "metrics": sweep.metrics, "backend": target.backend, "launcher": target.launcher_doc,
            "mount": target.mount, "timeout_s": sweep.timeout,
            "drop_caches": sweep.drop_caches, "started": time.time(),
            "testbed": bool(target.testbed), "status": "running",
            "precision": sweep.precision, "max_repeat": sweep.max_repeat,
            "time_budget_s": sweep.time_budget, "budget_factor": sweep.budget_factor,
            "block": sweep.block, "ops_per_proc": sweep.ops_per_proc, "hogs_per_host": sweep.hogs_per_host,
            "hogs_per_kernel": sweep.hogs_per_kernel,
            "call_gap_us": sweep.call_gap_us, "young": sweep.young, "idle_ms": sweep.idle_ms}
    if machine is not None:
        meta["machine_before"] = machine
    if kind is not None:
        set_status(conn, name, "running")

    def store_fn(points):
        dbstore.add_envelope_points(conn, name, points, meta=meta)

    def annotate_fn(metrics, size, ppn, h, rep_lo, rep_hi, precision):
        """The point's precision into the config of each of its repeats."""
        envelope_rows.set_precision(conn, name, metrics, size, ppn, h, rep_lo, rep_hi, precision)

    steps = plan(sweep, len(target.hosts))
    prog = Progress(steps, stream=stream, enabled=progress)
    m = Measurer(target, sweep, store_fn, prog, run_name=name, repeat_base=repeat_base,
                 annotate_fn=annotate_fn)
    t0 = time.monotonic()
    interrupted = completed = False
    old = signal.getsignal(signal.SIGTERM)
    try:
        if threading_main():
            signal.signal(signal.SIGTERM, _sigterm)
        m.run(steps)
        completed = True
        m.close()
    except KeyboardInterrupt:      # the caller says "interrupted" (once)
        interrupted = True
        m.kill()
    except BaseException:
        m.kill()
        raise
    finally:
        if threading_main():
            signal.signal(signal.SIGTERM, old)
        try:   # a run that died without getting here stays "running" (list shows it)
            set_status(conn, name, "complete" if completed else
                       "interrupted" if interrupted else "failed")
        finally:
            conn.close()
    return {"run": name, "db": db, "points": m.n_points, "failed": m.n_failed,
            "seconds": time.monotonic() - t0, "steps": len(steps), "interrupted": interrupted,
            "workdir": m.root}


def set_status(conn, name: str, status: str) -> None:
    """Mark run ``name`` complete | interrupted | failed (stopped by an error) | running in
    its meta (list and export show it); nothing when the run has no point yet."""
    meta = envelope_rows.meta_of(conn, name)
    if meta is None:
        return
    meta["status"] = status
    envelope_rows.set_meta(conn, name, meta)


def _sigterm(signum, frame):
    raise KeyboardInterrupt


def threading_main() -> bool:
    import threading
    return threading.current_thread() is threading.main_thread()
