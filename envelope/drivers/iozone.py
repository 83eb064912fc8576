"""iozone throughput mode (``-t P``): command lines per metric and a parser of its report.

iozone forks its own P children (no MPI), each on its own file (``-F f1 .. fP``), on one host.

Metric -> iozone options (every run: ``-t P -s SIZE -r RECORD -c -x -+n -F files``;
``-c`` times the close, ``-x`` turns off stonewalling so every child moves its whole file,
``-+n`` skips the re-tests):

======  ===================================================================================
TL/BL   ``-i 0 -e -w``: initial writers, fsync in the timing, files kept (``-w``).
T1L/B1L ``-i 1 -w``: readers of files kept by an earlier ``-i 0 -w`` run on this host.
T1R/B1R the same on files placed on another host (the parser needs ``read_metric``).
TN, Tm  not expressible (iozone children never share a file; no create-only test).
======  ===================================================================================

Parsing. B = "Parent sees throughput" x 1024 bytes/s (iozone's KB is 1024 bytes): the total
bytes over the parent's wall time from the common start to the last child's end, like IOR's
aggregate. The "Children see" sum (each child's bytes over its own time) is kept in the
config. T = B / file size. One run is one repeat (the orchestrator passes ``repeat_base``).
A phase where a child moved less than its file ("Min xfer" < file size: stonewalling, i.e.
the run lacked -x) gives failed points, since its ops/s would be wrong. The auto mode report
(``-a``) is a single process's table per record size and is refused with a clear error.
"""
from __future__ import annotations

import re
import shlex
from typing import Any, Sequence

from ..points import KiB, NoEnvelopeMetric, Point, TruncatedOutput, pair
from .base import Driver, require, source_of

_TITLE = "Iozone: Performance Test of File I/O"
_PHASE = re.compile(r"Children see throughput for\s+(\d+)\s+(initial writers|rewriters|readers|"
                    r"re-readers|reverse readers|stride readers|random readers|mixed workload|"
                    r"random writers|pwrite writers|pread readers|fwriters|freaders)\s*=\s*"
                    r"([0-9.]+)\s*(KB|kB|MB|ops)/sec")
_PARENT = re.compile(r"Parent sees throughput for\s+(\d+)\s+(.+?)\s*=\s*([0-9.]+)\s*(KB|kB|MB|ops)/sec")
_MINXFER = re.compile(r"Min xfer\s*=\s*([0-9.]+)\s*(KB|kB|MB|ops)")
_EACH = re.compile(r"Each process writes a (\d+) (Kbyte|Mbyte|Gbyte) file in (\d+) (Kbyte|Mbyte|byte)")

_UNIT = {"KB": KiB, "kB": KiB, "MB": 1 << 20}
_METRIC = {"initial writers": "TL", "readers": "T1L"}


class IozoneDriver(Driver):
    name = "iozone"
    executable = "iozone"
    metrics = frozenset({"TL", "BL", "T1L", "B1L", "T1R", "B1R"})

    def command(self, metric: str, file_size: int, nprocs: int, path: str, *,
                hosts: int = 1, launcher: Sequence[str] | None = None,
                transfer: int | None = None, extra: Sequence[str] = ()) -> list[str]:
        """``path`` is a pattern with ``{rank}`` (one file per child), e.g. /mnt/d/ioz.{rank}."""
        self.check_metric(metric)
        if hosts != 1:
            raise ValueError("iozone runs on one host per command; run one per host")
        if file_size < KiB or file_size % KiB:
            raise ValueError("iozone sizes are whole KiB")
        if "{rank}" not in path:
            raise ValueError("path needs a {rank} placeholder: one file per child")
        rec = transfer or min(file_size, 1 << 20)
        if rec % KiB or file_size % rec:
            raise ValueError("record size must be whole KiB and divide the file size")
        argv = list(launcher or []) + [
            self.executable, "-t", str(nprocs), "-s", f"{file_size // KiB}k",
            "-r", f"{rec // KiB}k", "-c", "-x", "-+n", "-w"]
        argv += ["-i", "0", "-e"] if metric in ("TL", "BL") else ["-i", "1"]
        argv += ["-F"] + [path.format(rank=r) for r in range(nprocs)]
        return argv + list(extra)

    def version_args(self) -> list[str]:
        return ["-v"]

    def detect(self, text: str) -> bool:
        return _TITLE in text[:4096]

    def parse(self, text: str, context: dict[str, Any] | None = None) -> list[Point]:
        ctx = context or {}
        require(text.strip(), ctx, "empty file (no iozone output)")
        require(_TITLE in text, ctx, f"no '{_TITLE}' title: not an iozone report")
        ver = re.search(r"Version \$Revision: ([0-9.]+) \$", text)
        version = ver.group(1) if ver else None
        cm = re.search(r"Command line used: (.*)$", text, re.M)
        command = cm.group(1).strip() if cm else None
        if not re.search(r"Throughput test with (\d+) process", text):
            if re.search(r"^\s*Auto Mode", text, re.M) or re.search(r"\bkB\s+reclen\b", text):
                raise NoEnvelopeMetric(source_of(ctx), "iozone auto mode (-a) report: one "
                                       "process, one row per record size; use the throughput "
                                       "mode (-t P) for envelope points")
            raise TruncatedOutput(source_of(ctx), "no 'Throughput test with N processes' line: "
                                  "not a throughput-mode report, or cut before it")
        each = _EACH.search(text)
        require(each, ctx, "no 'Each process writes a N Kbyte file' line", TruncatedOutput)
        fsize = int(each.group(1)) * {"Kbyte": KiB, "Mbyte": 1 << 20, "Gbyte": 1 << 30}[each.group(2)]
        require(fsize > 0, ctx, "each process writes a 0-byte file: nothing to measure")
        require(re.search(r"^iozone test complete\.", text, re.M), ctx,
                "no 'iozone test complete.' line: the output is truncated", TruncatedOutput)

        lines = text.splitlines()
        points: list[Point] = []
        found = 0
        for i, line in enumerate(lines):
            m = _PHASE.search(line)
            if not m:
                continue
            found += 1
            nprocs, phase = int(m.group(1)), m.group(2)
            require(nprocs >= 1, ctx, f"'{phase}' of {nprocs} processes: needs at least one")
            block = "\n".join(lines[i:i + 7])
            par, mx = _PARENT.search(block), _MINXFER.search(block)
            require(par and mx and par.group(4) in _UNIT, ctx,
                    f"the '{phase}' block lacks its 'Parent sees' / 'Min xfer' lines",
                    TruncatedOutput)
            metric = _METRIC.get(phase)
            if metric is None:
                continue      # re-tests, random, stride ...: not envelope ops
            if metric == "T1L" and ctx.get("read_metric"):
                metric = ctx["read_metric"].replace("B", "T", 1)
            parent = float(par.group(3)) * _UNIT[par.group(4)]
            children = float(m.group(3)) * _UNIT.get(m.group(4), 1)
            min_xfer = float(mx.group(1)) * _UNIT.get(mx.group(2), 1)
            hosts = int(ctx.get("hosts", 1))
            ppn = int(ctx.get("procs_per_host", nprocs))
            cfg = {"command": command, "phase": phase, "record_size": _record(each),
                   "children_see_bytes_per_s": children, "min_xfer_bytes": min_xfer,
                   "close_timed": "-c" in (command or ""), "fsync_timed": "-e" in (command or ""),
                   "files_per_proc": 1, "ops": nprocs, "bytes_per_op": fsize}
            if metric != "TL":
                cfg["locality"] = ("given by the caller" if ctx.get("read_metric")
                                   else "assumed local (files written on this host)")
                cfg["cache"] = ("read in the same run as the writes (no cache drop)"
                                if "initial writers" in text[:text.find(line)] else "not recorded")
            cfg.update(ctx.get("config", {}))
            if ctx.get("source"):
                cfg["source"] = ctx["source"]
            kw = dict(procs_per_host=ppn, hosts=hosts, repeat=ctx.get("repeat_base", 0),
                      tool="iozone", tool_version=version, config=cfg)
            if min_xfer < fsize:
                why = (f"a child moved {min_xfer:.0f} of {fsize} bytes (stonewalling: iozone "
                       "ran without -x), so files/s is not measured")
                points += [Point.failed(mt, fsize, error=why, **kw)
                           for mt in (metric, "B" + metric[1:])]
                continue
            points += pair(metric, parent / fsize, fsize, file_size=fsize, **kw)
        require(found, ctx, "no 'Children see throughput' result: the run stopped before its "
                "first phase ended", TruncatedOutput)
        if not points:
            raise NoEnvelopeMetric(source_of(ctx), "only re-test/random phases; no initial "
                                   "write or read")
        return points


def _record(each: re.Match) -> int:
    return int(each.group(3)) * {"Kbyte": KiB, "Mbyte": 1 << 20, "byte": 1}[each.group(4)]


def split_command(cmd: str) -> list[str]:
    try:
        return shlex.split(cmd)
    except ValueError:
        return cmd.split()
