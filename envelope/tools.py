"""`mtcenvelope measure --tool ior|mdtest|fio`: the same sweep through an external benchmark.

The drivers (envelope/drivers/) build each metric's command line and parse the output into
the same points as the native engine. IOR and mdtest are MPI programs started once for all
hosts with ``--mpi-launcher`` (run on this machine); fio runs once per host through the host
launcher, all hosts at once, and its per-host results are summed. Read metrics first write
their inputs with the tool's own write command on the same path (IOR -w -k, mdtest -C -w,
fio --rw=write), so the files are where the tool's rank-to-host mapping puts them; locality
then follows from that mapping (IOR -C -Q 1 / mdtest -N shift reads to the next host), which
these outputs cannot prove: the points' config says so.

fio: every host works in its own directory through its own mount (Gfarm puts a new file on
the writer's host): TL writes it, T1L reads it back, T1R reads the next host's ((j+1) mod h);
TN: every host reads one shared file the first host wrote. K files per process as the native
engine (``Sweep.k_for``), so a fio point and a native point of a metric do the same work.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from typing import Any

from .drivers import get_driver, parse_text
from .points import ParseError, Point

INSTALL_HINT = {
    "ior": "IOR is not packaged in Debian: build it from https://github.com/hpc/ior "
           "(./bootstrap && ./configure && make install, needs an MPI) or use --tool native",
    "mdtest": "mdtest comes with IOR (https://github.com/hpc/ior); or use --tool native",
    "fio": "install it with 'apt-get install fio', or use --tool native",
}


class ToolMissing(RuntimeError):
    """The named tool is not on PATH."""


def require(tool: str):
    d = get_driver(tool)
    if not d.available():
        raise ToolMissing(f"--tool {tool}: '{d.executable}' is not on PATH. "
                          f"{INSTALL_HINT.get(tool, '')}")
    return d


def _run(argv: list[str], timeout: float) -> tuple[int | None, str, str]:
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        return cp.returncode, cp.stdout, cp.stderr
    except subprocess.TimeoutExpired as e:
        return None, (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), \
            f"no result within {timeout:g} s: killed"
    except OSError as e:
        return 127, "", str(e)


def measure_with_tool(tool: str, db: str, name: str, target, sweep, *, append: bool = False,
                      mpi_launcher: str = "mpirun -np {nprocs}", progress: bool = True
                      ) -> dict[str, Any]:
    from mtcio.db import envelope_rows
    from mtcio.db import store as dbstore
    from .agent import Agent
    from .measure import Progress
    from .sweep import KIND_METRICS, MeasureError, Step

    drv = require(tool)
    version = drv.version()
    conn = dbstore.connect(db)
    if envelope_rows.kind_of(conn, name) is not None and not append:
        conn.close()
        raise MeasureError(f"run {name!r} already exists in {db}; pick another --name or --append")
    meta = {"tool": tool, "tool_version": version, "hosts": target.hosts,
            "sizes": sweep.sizes, "procs_per_host": sweep.procs, "repeat": sweep.repeat,
            "status": "running"}
    root = f"{sweep.workdir.rstrip('/')}/{tool}-{os.getpid()}-{int(time.time())}"
    per_host = tool == "fio"
    agents = {h: Agent(h, target.launcher) for h in target.hosts} if per_host else {}
    wanted = [m for m in ("Tm", "TL", "T1L", "T1R", "TN")
              if any(x in sweep.metrics for x in KIND_METRICS[
                  {"Tm": "create", "TL": "write", "T1L": "local", "T1R": "remote",
                   "TN": "shared"}[m]]) and m in drv.metrics]
    jobs = [(m, s, p, h) for h in (sweep.host_counts or [len(target.hosts)])
            for m in wanted for s in sweep.sizes for p in sweep.procs
            if not (m == "T1R" and h < 2)]
    steps = [Step("create" if m == "Tm" else "write", h, s, p, 0, 1.0) for m, s, p, h in jobs]
    prog = Progress(steps, enabled=progress)
    n = failed = 0
    t0 = time.monotonic()
    interrupted = False
    try:
        for (metric, size, ppn, h), st in zip(jobs, steps):
            hosts = target.hosts[:h]
            base = f"{root}/{metric}-s{size}-p{ppn}h{h}"
            path = target.prefix(hosts[0]) + base
            cfg = {"tool": tool, "placement": "each host in its own directory through its own "
                   "mount; Gfarm puts new files on the writer's host (not checked)" if per_host
                   else "by the tool's rank-to-host mapping (not checked)",
                   "cache": "the tool's own (IOR -C, fio --invalidate=1); no drop_caches"}
            ctx = {"source": f"{tool} {metric}", "read_metric": metric if metric[1:2] in "1N"
                   and metric != "Tm" else None, "hosts": h, "procs_per_host": ppn,
                   "config": cfg}
            ctx = {k: v for k, v in ctx.items() if v is not None}
            pts: list[Point] = []
            err = None
            # the native engine's files per process (and so ops and bytes per op), not the
            # tool's default: the same work under the same metric
            k = sweep.k_for(size)       # TN: reads of the one shared file per process
            try:
                if per_host:
                    res = _fio_point(drv, agents, target, hosts, metric, size, ppn, k, base,
                                     sweep)
                    bad = [r for r in res if r.rc != 0]
                    if bad:
                        err = f"{bad[0].host}: {tool} exit {bad[0].rc}: {bad[0].stderr[-300:]}"
                    else:
                        per = [parse_text(r.stdout, dict(ctx, hosts=1), tool) for r in res]
                        pts = _sum_hosts(per, h)
                else:
                    lau = shlex.split(mpi_launcher)
                    kw = {"hosts": h, "launcher": lau, "hostlist": hosts, "repeats": sweep.repeat}
                    if metric not in ("TL", "Tm"):
                        wr = drv.command("TL", size, ppn * h, path, **{**kw, "repeats": 1})
                        if metric == "TN" and tool == "ior":
                            wr = [a for a in wr if a != "-F"]
                            wr[wr.index("-b") + 1] = str(size // (ppn * h) or 1)
                        _run(wr, sweep.timeout)
                    rc, out, er = _run(drv.command(metric, size, ppn * h, path, **kw),
                                       sweep.timeout)
                    if rc != 0:
                        err = f"{tool} exit {rc}: {er.strip()[-300:]}"
                    else:
                        pts = parse_text(out, ctx, tool)
            except (ParseError, ValueError) as e:
                err = str(e)
            if err:
                from .measure import failed_points
                pts = [Point.failed(p.metric, p.file_size, p.procs_per_host, p.hosts, p.repeat,
                                    tool, err, version, cfg)
                       for r in range(sweep.repeat)
                       for p in failed_points(metric, size, ppn, h, r, err, cfg)]
            pts = [p for p in pts if p.metric in sweep.metrics]
            if pts:
                dbstore.add_envelope_points(conn, name, pts, meta=meta)
                n += len(pts)
                failed += sum(not p.ok for p in pts)
            prog.update(st, failed=bool(err))
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if agents and not sweep.keep_files:
            try:
                agents[target.hosts[0]].run(["rm", "-rf", target.prefix(target.hosts[0]) + root],
                                            timeout=120)
            except Exception:   # noqa: BLE001 - cleanup is best effort; the path is printed
                pass
        for a in agents.values():
            a.kill()
        from .measure import set_status
        try:
            set_status(conn, name, "interrupted" if interrupted else
                       "complete" if sys.exc_info()[0] is None else "failed")
        finally:
            conn.close()
    return {"run": name, "db": db, "points": n, "failed": failed, "interrupted": interrupted,
            "seconds": time.monotonic() - t0, "steps": len(steps), "workdir": root}


def _fio_point(drv, agents, target, hosts, metric, size, ppn, k, base, sweep):
    """One fio point on every host at once: its directories (or shared file) made and its
    inputs written first, then the measured run; the measured run's results per host."""
    from .agent import run_many
    t = sweep.timeout + 15
    dirs = {x: f"{base}/{x}" for x in hosts}
    first = agents[hosts[0]]
    # through the first host's mount (any POSIX mount of the file system will do)
    mk = first.run(["mkdir", "-p", *[target.prefix(hosts[0]) + d for d in dirs.values()]],
                   timeout=60)
    if mk.rc:
        return [mk]
    if metric == "TN":
        shared = f"{base}/shared"
        w = first.run(["sh", "-c", f"head -c {int(size)} /dev/urandom > "
                       f"'{target.prefix(hosts[0])}{shared}'"], timeout=t)
        if w.rc:
            return [w]
        return run_many([(agents[x], drv.command("TN", size, ppn, target.prefix(x) + shared,
                                                 hosts=1, repeats=sweep.repeat,
                                                 ops_per_proc=k))
                         for x in hosts], t)
    if metric != "TL":     # inputs first, with the tool itself, each host in its directory
        ws = run_many([(agents[x], drv.command("TL", size, ppn, target.prefix(x) + dirs[x],
                                               hosts=1, files_per_proc=k)) for x in hosts], t)
        if any(r.rc for r in ws):
            return ws
    src = {x: (hosts[(j + 1) % len(hosts)] if metric == "T1R" else x)
           for j, x in enumerate(hosts)}
    return run_many([(agents[x], drv.command(metric, size, ppn, target.prefix(x) + dirs[src[x]],
                                             hosts=1, repeats=sweep.repeat,
                                             files_per_proc=k)) for x in hosts], t)


def _sum_hosts(per_host: list[list[Point]], h: int) -> list[Point]:
    """Per-host fio points (same metric/repeat) -> one point per metric/repeat: values summed
    (each host's rate over its own span; hosts started together)."""
    acc: dict[tuple, Point] = {}
    for pts in per_host:
        for p in pts:
            key = (p.metric, p.file_size, p.procs_per_host, p.repeat)
            if key not in acc:
                acc[key] = Point(p.metric, p.file_size, p.procs_per_host, h, p.value, p.unit,
                                 p.repeat, p.tool, p.tool_version,
                                 {**p.config, "aggregation": f"sum over {h} hosts' runs"},
                                 p.ok, p.error)
            else:
                a = acc[key]
                a.value += p.value
                for c in ("ops", "io_bytes"):      # over all hosts, like the engine's
                    if isinstance(a.config.get(c), int) and isinstance(p.config.get(c), int):
                        a.config[c] += p.config[c]
                if not p.ok:
                    a.ok, a.error = False, p.error
    return list(acc.values())


if __name__ == "__main__":
    sys.exit(0)
