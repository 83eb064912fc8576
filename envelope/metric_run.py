"""Measuring one metric: a step of a sweep (Tm + Ts, a write run, a read run, the shared file) as one engine run per
host started at one instant, its placement checked, its outputs turned into points and stored (measure.py says
what each metric's run does)."""
from __future__ import annotations

import sys
import time
from dataclasses import replace
from typing import Any, Callable, Sequence

from mtcio.db.gfarm import short_host

from . import engine as eng
from .agent import Agent, AgentError, Result, run_many
from .caches import CacheEviction
from .placement import Placement
from .points import ParseError, Point
from .progress import Progress
from .sweep import Step, Sweep
from .target import Target

# The common start's headroom (engine --start-at), set by hand on the testbed (2 cores) when the start became
# adaptive (7c076f3), the first delays earlier (8212cbc); not fitted: the first delay per backend, more per process
# started, a run whose host was late by more than LATE_NS grows it by LATE_GROWTH up to MAX_DELAY_S, and after
# ON_TIME_RUNS runs on time it shrinks by SHRINK towards the first.
START_DELAY_S = {"gfarm": 0.4, "posix": 0.15}
DELAY_PER_PROC_S = 0.004
LATE_NS = 50_000_000
LATE_GROWTH = 1.25
MAX_DELAY_S = 1.5
ON_TIME_RUNS = 10
SHRINK = 0.8


class MetricRunner:
    """Runs the steps of a sweep, each one engine run per host started together, and turns their outputs into
    points (``store`` gets every point as soon as it exists). ``sink``, when a dict, also collects each metric's
    points of the current point (the precision loop reads them)."""

    def __init__(self, target: Target, sweep: Sweep, store_fn: Callable[[list[Point]], None],
                 progress: Progress | None = None, run_name: str = "", repeat_base: int = 0,
                 log: Callable[[str], None] | None = None):
        self.t = target
        self.sw = sweep
        self.store = store_fn
        self.sink: dict[str, list[Point]] | None = None   # the current point's points
        self.progress = progress
        self.repeat_base = repeat_base
        self.log = log or (lambda m: print(m, file=sys.stderr))
        self.agents = {h: Agent(h, target.launcher) for h in target.hosts}
        self.delay = sweep.start_delay if sweep.start_delay is not None else \
            START_DELAY_S["gfarm" if target.backend == "gfarm" else "posix"]
        self.place = Placement(sweep.workdir, run_name, target.hosts, self.helper, sweep.timeout, self.log)
        self.caches = CacheEviction(target, sweep, self.agents)
        self.written: dict[tuple, dict] = {}    # (size, ppn, h, rep) -> write state
        self.shared: dict[tuple, dict] = {}     # (size, h) -> shared file state
        self.n_points = 0
        self.n_failed = 0
        self.base_delay = self.delay
        self.last_delay = self.delay
        self.step_t0 = time.monotonic()
        self.on_time = 0

    # ------------------------------------------------------------ helpers
    def helper(self, argv: Sequence[str] | str, timeout: float = 60.0) -> Result:
        """A metadata command (gfmkdir, gfwhere, gfrm) on the first host."""
        return self.agents[self.t.hosts[0]].run(argv, timeout)

    def run_engines(self, hosts: Sequence[str], argv_of: Callable[[int, str, int], list[str]],
                    nprocs: int = 1) -> tuple[list[eng.EngineRun], str | None]:
        """Run one engine per host, started together; (runs, error of the whole run)."""
        # headroom for every host to fork and initialise its workers: grows with the process
        # count (2 cores here) and with lateness seen so far
        delay = max(self.delay, self.base_delay + DELAY_PER_PROC_S * nprocs)
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
        if late > LATE_NS:
            self.delay = min(MAX_DELAY_S, max(self.delay, (delay + late / 1e9) * LATE_GROWTH))
            self.on_time = 0
        else:
            self.on_time += 1
            if self.on_time >= ON_TIME_RUNS and self.delay > self.base_delay:
                self.delay = max(self.base_delay, self.delay * SHRINK)
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
               "timeout_s": self.sw.timeout, "workdir": self.place.root}
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
            runs, cfg = after_idle(runs, cfg)
        elif runs:
            cfg = first_op_share(runs, cfg)
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

    def start(self, steps: Sequence[Step]) -> None:
        """The agents on every host, then the directories of every planned step."""
        for a in self.agents.values():
            a.start()
        self.place.make_all(steps)

    def step_create(self, st: Step) -> list[Point]:
        k = self.sw.creates_per_proc
        d = self.place.tmdir(st.ppn, st.h, st.rep)
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
        p = self.place.shared_path(st.size, st.h)
        writer = self.t.hosts[0]
        runs, err = self.run_engines([writer], lambda j, h, start: self.argv(
            "write", f"{self.t.prefix(h)}{p}", 1, 1, st.size, start, 0))
        state = {"path": p, "host": writer, "ok": False}
        if err or not runs or runs[0].failed:
            state["error"] = err or "; ".join(sorted({r.error or "?" for r in runs[0].failed}))
        else:
            reps, werr = self.place.where([p])
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
            "write", f"{self.t.prefix(h)}{self.place.wdir(st.size, st.ppn, st.h, st.rep, h)}"
                     f"/f{{lrank}}_{{i}}", st.ppn, k, st.size, start, j * st.ppn,
            self.sw.write_compute_ms), st.ppn * st.h)
        expected = {h: self.place.files(st.size, st.ppn, st.h, st.rep, h, k) for h in hosts}
        if self.sw.young:      # read at once; the replicas are checked after the read
            self.written[(st.size, st.ppn, st.h, st.rep)] = {
                "ok": bool(runs) and not err and not any(r.failed for r in runs), "expected": expected, "error": err,
                "end_ns": max((x.t_end_ns for r in runs for x in r.records), default=None)}
            return []
        reps, werr = self.place.where([p for ps in expected.values() for p in ps])
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
            cfg["cache"] = self.caches.drop()
            runs, err = self.run_engines(hosts, lambda j, h, start: self.argv(
                "read", f"{self.t.prefix(h)}{state['path']}", st.ppn, k, st.size, start,
                j * st.ppn), st.ppn * st.h)
            self.caches.check_client_cache(f"{self.t.prefix(hosts[-1])}{state['path']}")
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
        cfg["cache"] = self.caches.drop()
        path = {h: f"{self.t.prefix(h)}{self.place.wdir(st.size, st.ppn, st.h, st.rep, src[h])}/f{{lrank}}_{{i}}"
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
            "read", f"{self.t.prefix(h)}{self.place.wdir(st.size, st.ppn, st.h, st.rep, h)}/f{{lrank}}_{{i}}", st.ppn, k,
            st.size, start, j * st.ppn), st.ppn * st.h)
        start = min((x.t_start_ns for r in runs for x in r.records), default=None)
        expected = state["expected"]
        reps, werr = self.place.where([p for ps in expected.values() for p in ps])
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
        # directories of the same size, made once by start()
        self.place.remove([f"{self.place.root}/s{st.size}/p{p}h{st.h}" for p in self.sw.procs])
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

    def close(self) -> None:
        for a in self.agents.values():
            a.close()

    def kill(self) -> None:
        for a in self.agents.values():
            a.kill()


IDLE_METRICS = ("T1L", "B1L", "T1R", "B1R", "TN", "BN")


def after_idle(runs, cfg):
    """The runs without each worker's first op (it follows the launch's idle, not --idle-ms), whose mean time goes
    in the config as first_op_s: its ratio to the point's time per op is one of the same minute."""
    firsts = [(x.t_end_ns - x.t_start_ns) / 1e9 for r in runs for x in r.records if x.i == 0 and x.ok]
    cfg = {**cfg, "op": cfg.get("op", "") + f", {cfg.get('idle_ms')} ms idle before each; each process's first "
           "op dropped"}
    if firsts:
        cfg["first_op_s"] = round(sum(firsts) / len(firsts), 7)
    return [replace(r, records=[x for x in r.records if x.i > 0]) for r in runs], cfg


def first_op_share(runs, cfg):
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
