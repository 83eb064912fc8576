"""mdtest (hpc/ior 3.x/4.x): command lines per metric and a parser of its text report.

Metric -> mdtest options (every run: ``-a API -F -n K -i REPEATS -d DIR``; no ``-u``: all
tasks work in one shared directory, as the native engine's Tm does and a stage's tasks do):

======  ===================================================================================
Tm      ``-C``: create + close of empty files ("File creation" rate). A report of a run
        with ``-u`` (a directory per task: no contention on one directory) is stored as
        Tmu, not Tm.
TL/BL   ``-C -w SIZE``: create + write SIZE bytes + close ("File creation" rate; B = T x SIZE).
T1L/B1L ``-E -e SIZE``: open + read SIZE bytes + close of the files this task created in an
        earlier ``-C -w SIZE`` run on the same host ("File read" rate).
T1R/B1R ``-E -e SIZE -N PPN``: the same, of the files of the task PPN ranks further, i.e.
        on the next host with block mapping (needs >= 2 hosts).
TN/BN   ``-E -S -e SIZE``: every task opens and reads the same SIZE-byte files (``-S`` shared
        file; "whole" N-to-1).
======  ===================================================================================

Parsing the report. Without ``-v`` mdtest prints only Max/Min/Mean/StdDev over iterations of
the aggregate rate, not the iterations. For 1, 2 or 3 iterations they are recovered exactly
(up to the printed 3 decimals): 1 -> mean; 2 -> max, min; 3 -> max, min, 3 x mean - max -
min, checked against the printed sample standard deviation. Their order is not known, so
repeat indices are assigned max, min, middle. More iterations cannot be split: the mean is
returned as one point marked ``statistic: mean`` (min/max/sd in its config). Run mdtest with
``-i 1`` (what :meth:`command` does by default) to get one exact value per run.
Every point's config has files_per_proc (``-n``), ops (files_per_proc x tasks) and
unique_dir (``-u``).

"File creation" means Tm when the run wrote nothing (``-w 0``), TL (+BL) when it wrote
``-w`` bytes per file. "File read" with ``-e 0`` is an open/close only and gives no point.
"""
from __future__ import annotations

import math
import re
import shlex
from typing import Any, Sequence

from ..points import NoEnvelopeMetric, ParseError, Point, TruncatedOutput, pair, parse_size
from .base import DEFAULT_MPI_LAUNCHER, Driver, expand_launcher, require, source_of

_LAUNCHED = re.compile(r"^(mdtest-\S+) was launched with (\d+) total task\(s\) on (\d+) node\(s\)",
                       re.M)
_SUMMARY = re.compile(r"^SUMMARY (rate|time) \(in [^)]*\): \(of (\d+) iterations\)", re.M)
_ROWNAME = re.compile(r"^\s+(File creation|File stat|File read|File removal|Directory creation|"
                      r"Directory stat|Directory rename|Directory removal|Tree creation|"
                      r"Tree removal)\s+(.*)$")
_NUMS = re.compile(r"^-?[0-9.]+(?:e[+-]?\d+)?$")


class MdtestDriver(Driver):
    name = "mdtest"
    executable = "mdtest"
    metrics = frozenset({"Tm", "TL", "BL", "T1L", "B1L", "T1R", "B1R", "TN", "BN"})

    def command(self, metric: str, file_size: int, nprocs: int, path: str, *,
                hosts: int = 1, launcher: Sequence[str] | None = DEFAULT_MPI_LAUNCHER,
                api: str = "POSIX", files_per_proc: int = 100, repeats: int = 1,
                extra: Sequence[str] = (), hostlist: Sequence[str] = ()) -> list[str]:
        self.check_metric(metric)
        if nprocs <= 0 or repeats <= 0 or files_per_proc <= 0 or file_size < 0:
            raise ValueError("nprocs, repeats and files_per_proc must be positive")
        argv = expand_launcher(launcher, nprocs=nprocs, hosts=hosts, hostlist=hostlist)
        argv += [self.executable, "-a", api, "-F", "-n", str(files_per_proc),
                 "-i", str(repeats), "-d", path]
        kind = metric.lstrip("TB")
        if metric == "Tm":
            argv += ["-C"]
        elif kind == "L":
            argv += ["-C", "-w", str(file_size)]
        elif kind == "1L":
            argv += ["-E", "-e", str(file_size)]
        elif kind == "1R":
            if hosts < 2:
                raise ValueError("remote reads (T1R/B1R) need at least 2 hosts")
            argv += ["-E", "-e", str(file_size), "-N", str(max(1, nprocs // hosts))]
        else:
            argv += ["-E", "-S", "-e", str(file_size)]
        return argv + list(extra)

    def detect(self, text: str) -> bool:
        return bool(_LAUNCHED.search(text[:65536]))

    def parse(self, text: str, context: dict[str, Any] | None = None) -> list[Point]:
        ctx = context or {}
        require(text.strip(), ctx, "empty file (no mdtest output)")
        launched = _LAUNCHED.search(text)
        require(launched, ctx, "no 'mdtest-<version> was launched with N total task(s) on M "
                               "node(s)' line: not an mdtest report")
        version = launched.group(1).split("-", 1)[1]
        tasks, nodes = int(launched.group(2)), int(launched.group(3))
        require(tasks >= 1 and nodes >= 1, ctx, f"launched with {tasks} task(s) on {nodes} "
                "node(s): a run needs at least one of each")
        cm = re.search(r"^Command line used: (.*)$", text, re.M)
        require(cm, ctx, "no 'Command line used:' line")
        argv = _split(cm.group(1))
        opts = _options(argv)
        try:
            write_bytes = parse_size(opts.get("-w", "0"))
            read_bytes = parse_size(opts.get("-e", "0"))
            nstride = int(opts.get("-N", "0"))
            fpp = int(opts.get("-n", "0") or 0)
        except ValueError as e:
            raise ParseError(source_of(ctx), f"command line options -w/-e/-N/-n: {e}") from None
        shared = "-S" in opts

        blocks = list(_SUMMARY.finditer(text))
        rate_blocks = [b for b in blocks if b.group(1) == "rate"]
        if blocks and not rate_blocks:
            raise ParseError(source_of(ctx), "only a 'SUMMARY time' table (mdtest -Z); "
                             "run without -Z (or with -P) to get rates")
        require(rate_blocks, ctx, "no 'SUMMARY rate' table: the output is truncated",
                TruncatedOutput)
        require(re.search(r"^-- finished at ", text, re.M), ctx,
                "no '-- finished at' line: the output is truncated", TruncatedOutput)

        # Several blocks when mdtest ran a range of task counts (-f/-l/-s); each is preceded
        # by a "N tasks, M files" line.
        points: list[Point] = []
        for b in rate_blocks:
            iters = int(b.group(2))
            before = text[:b.start()]
            tl = list(re.finditer(r"^(\d+) tasks, (\d+) files", before, re.M))
            ntasks = int(tl[-1].group(1)) if tl else tasks
            rows = _rows(text[b.end():], ctx)
            require(ntasks >= 1, ctx, f"{ntasks} tasks: a run needs at least one")
            ppn = max(1, ntasks // nodes) if nodes else ntasks
            base = {"command": cm.group(1), "api": opts.get("-a", "POSIX"),
                    "iterations": iters, "files_per_proc": fpp, "ops": fpp * ntasks,
                    "unique_dir": "-u" in opts, "write_bytes": write_bytes,
                    "read_bytes": read_bytes, "shared_file": shared, "nstride": nstride}
            # which phases ran: -C/-E/-T/-r restrict; none of them = all phases
            only = {f for f in ("-C", "-T", "-E", "-r") if f in opts}
            ran_create = not only or "-C" in only
            ran_read = not only or "-E" in only
            if ran_create:
                require("File creation" in rows, ctx, "summary lacks the 'File creation' row",
                        TruncatedOutput)
                vals, stat = _iterations(rows["File creation"], iters, ctx, "File creation")
                for rep, v in enumerate(vals):
                    cfg = dict(base, phase="File creation", statistic=stat)
                    cfg.update(ctx.get("config", {}))
                    if ctx.get("source"):
                        cfg["source"] = ctx["source"]
                    kw = dict(procs_per_host=ppn, hosts=nodes,
                              repeat=ctx.get("repeat_base", 0) + rep, tool="mdtest",
                              tool_version=version, config=cfg)
                    if write_bytes == 0 or ctx.get("create_metric") == "Tm":
                        # a directory per task is another metric than Tm (one shared dir)
                        points.append(Point("Tmu" if "-u" in opts else "Tm",
                                            file_size=write_bytes, value=v, unit="ops/s", **kw))
                    else:
                        points += pair("TL", v, write_bytes, file_size=write_bytes, **kw)
            if ran_read and read_bytes > 0:
                require("File read" in rows, ctx, "summary lacks the 'File read' row",
                        TruncatedOutput)
                metric, where = self._read_metric(shared, nstride, nodes, ctx)
                vals, stat = _iterations(rows["File read"], iters, ctx, "File read")
                for rep, v in enumerate(vals):
                    cfg = dict(base, phase="File read", statistic=stat, locality=where)
                    if metric == "TN":
                        cfg["n_to_1"] = "whole: every task reads the same file"
                    cfg.setdefault("cache", "read in the same run as the creates (no cache "
                                   "drop)" if ran_create else "not recorded")
                    cfg.update(ctx.get("config", {}))
                    if ctx.get("source"):
                        cfg["source"] = ctx["source"]
                    points += pair(metric, v, read_bytes, file_size=read_bytes,
                                   procs_per_host=ppn, hosts=nodes,
                                   repeat=ctx.get("repeat_base", 0) + rep, tool="mdtest",
                                   tool_version=version, config=cfg)
        if not points:
            raise NoEnvelopeMetric(source_of(ctx), "no create or read phase with data "
                                   "(stat/remove only, or -e 0 reads): nothing maps to the "
                                   "envelope")
        return points

    @staticmethod
    def _read_metric(shared: bool, nstride: int, nodes: int, ctx: dict) -> tuple[str, str]:
        if ctx.get("read_metric"):
            m = ctx["read_metric"]
            return ("T" + m[1:] if m.startswith("B") else m), "given by the caller"
        if shared:
            return "TN", "shared file"
        if nstride > 0 and nodes > 1:
            return "T1R", "inferred: -N stride reads another task's files across nodes"
        return "T1L", ("inferred: each task reads files created on its own node"
                       if nodes > 1 or nstride == 0 else "inferred: single node")


def _split(cmd: str) -> list[str]:
    try:
        return shlex.split(cmd)
    except ValueError:
        return cmd.split()


def _options(argv: list[str]) -> dict[str, str]:
    """mdtest's short options: flags map to '', valued options to their value."""
    valued = set("abdefGiIlnNpsVwWxz")
    out: dict[str, str] = {}
    i = 1
    while i < len(argv):
        a = argv[i]
        if a.startswith("--"):
            k, _, v = a.partition("=")
            out[k] = v
        elif a.startswith("-") and len(a) >= 2:
            k = a[:2]
            if k[1] in valued:
                if len(a) > 2:
                    out[k] = a[2:].lstrip("=")
                elif i + 1 < len(argv):
                    out[k] = argv[i + 1]
                    i += 1
            else:
                for c in a[1:]:
                    out["-" + c] = ""
        i += 1
    return out


def _rows(text: str, ctx: dict) -> dict[str, list[float]]:
    rows: dict[str, list[float]] = {}
    for line in text.splitlines()[1:]:
        if line.startswith(("SUMMARY", "-- finished", "-- started")):
            break
        m = _ROWNAME.match(line)
        if not m:
            continue
        nums = m.group(2).split()
        if len(nums) < 4 or not all(_NUMS.match(n) for n in nums[-4:]):
            raise TruncatedOutput(source_of(ctx), f"summary row {m.group(1)!r} has not the 4 "
                                  f"numbers Max Min Mean StdDev: {line.strip()!r}")
        try:
            rows[m.group(1)] = [float(n) for n in nums[-4:]]   # per-rank columns (if any) first
        except ValueError:
            raise ParseError(source_of(ctx), f"summary row {m.group(1)!r} has a number that "
                             f"is none: {line.strip()!r}") from None
    return rows


def _iterations(row: list[float], n: int, ctx: dict, name: str) -> tuple[list[float], str]:
    mx, mn, mean, sd = row
    if n == 1:
        return [mean], "iteration"
    if n == 2:
        return [mx, mn], "iteration"
    if n == 3:
        mid = 3 * mean - mx - mn
        # the printed values are rounded to 3 decimals: allow for it in the checks
        tol = 0.01 + 1e-6 * mx
        if not (mn - tol <= mid <= mx + tol):
            raise ParseError(source_of(ctx), f"{name}: Max/Min/Mean {mx}/{mn}/{mean} are not "
                             "those of 3 iterations")
        mid = min(max(mid, mn), mx)
        m = (mx + mn + mid) / 3
        sd_calc = math.sqrt(((mx - m) ** 2 + (mn - m) ** 2 + (mid - m) ** 2) / 2)
        if abs(sd_calc - sd) > 0.01 + 1e-3 * sd:
            raise ParseError(source_of(ctx), f"{name}: the 3 iterations recovered from "
                             f"Max/Min/Mean give a standard deviation {sd_calc:.3f}, the report "
                             f"says {sd}")
        return [mx, mn, mid], "iteration (recovered from max/min/mean)"
    return [mean], f"mean of {n} iterations (min {mn}, max {mx}, sd {sd})"
