"""fio (``--output-format=json``): command lines per metric and a parser of its JSON.

fio runs its own processes (``--numjobs``), so no MPI launcher; across hosts it needs its
client/server mode, which the orchestrator drives by running one fio per host.

Metric -> fio options (every run: ``--ioengine=psync --bs=XFER --filesize=SIZE
--nrfiles=K --openfiles=1 --file_service_type=sequential --numjobs=P --group_reporting``;
``--openfiles=1`` + sequential service makes fio open, do the whole file, and close it
before the next file, inside the timed region, like an MTC task):

======  ===================================================================================
TL/BL   ``--rw=write --directory=DIR`` (each job its own files; ``--fsync_on_close`` if asked)
T1L/B1L ``--rw=read --directory=DIR --invalidate=1``: files written beforehand by the same
        job name on the same host (fio names them JOB.N.I). ``--invalidate=1`` drops the
        client page cache of each file first (posix_fadvise DONTNEED).
T1R/B1R the same on files written from another host (the orchestrator's placement; fio
        cannot tell local from remote: the parser needs ``read_metric`` in the context).
TN/BN   ``--rw=read --filename=PATH --size=SIZE [--loops=K]``: every job reads the same whole
        file, K times (each loop opens, reads and closes it: the native engine's K ops per
        process on one shared file).
Tm      not measurable with fio (its layout phase is untimed): use mdtest or the engine.
======  ===================================================================================

Parsing. B = sum(io_bytes) x 1000 / max(runtime ms) over the jobs of a group (= fio's own
``bw_bytes`` with ``--group_reporting``). fio's runtime has 1 ms resolution, so very short
runs are coarse. T = B / file size (one op = one whole file). Each reporting group is one
measurement; groups with the same metric, size and job count (a job repeated after
``--stonewall``) become repeats 0, 1, 2 ... in file order.
"""
from __future__ import annotations

from typing import Any, Sequence

from ..points import ParseError, Point, TruncatedOutput, pair, parse_size
from .base import load_json, Driver, require, source_of


class FioDriver(Driver):
    name = "fio"
    executable = "fio"
    metrics = frozenset({"TL", "BL", "T1L", "B1L", "T1R", "B1R", "TN", "BN"})

    def command(self, metric: str, file_size: int, nprocs: int, path: str, *,
                hosts: int = 1, launcher: Sequence[str] | None = None,
                transfer: int | None = None, files_per_proc: int = 16, repeats: int = 1,
                ops_per_proc: int = 1,
                fsync: bool = False, job_name: str = "mtc",
                extra: Sequence[str] = ()) -> list[str]:
        self.check_metric(metric)
        if hosts != 1:
            raise ValueError("fio runs on one host per command; run one per host")
        if file_size <= 0 or nprocs <= 0 or repeats <= 0:
            raise ValueError("file_size, nprocs and repeats must be positive")
        bs = transfer or min(file_size, 1 << 20)
        argv = list(launcher or []) + [
            self.executable, "--output-format=json", "--ioengine=psync", f"--bs={bs}",
            f"--numjobs={nprocs}", "--group_reporting"]
        kind = metric.lstrip("TB")
        if kind == "N":
            argv += ["--rw=read", f"--filename={path}", f"--size={file_size}", "--invalidate=1"]
            if ops_per_proc > 1:
                argv += [f"--loops={ops_per_proc}"]
        else:
            argv += [f"--directory={path}", f"--filesize={file_size}",
                     f"--nrfiles={files_per_proc}", "--openfiles=1",
                     "--file_service_type=sequential"]
            if kind == "L":
                argv += ["--rw=write"] + (["--fsync_on_close=1"] if fsync else [])
            else:
                argv += ["--rw=read", "--invalidate=1"]
        argv += list(extra)
        for r in range(repeats):     # one reporting group per repeat
            argv += [f"--name={job_name}"] + (["--stonewall"] if repeats > 1 else [])
        return argv

    def detect(self, text: str) -> bool:
        i = text.find("{")
        return i >= 0 and '"fio version"' in text[i:i + 400]

    def parse(self, text: str, context: dict[str, Any] | None = None) -> list[Point]:
        ctx = context or {}
        require(text.strip(), ctx, "empty file (no fio output)")
        i = text.find("{")      # fio may print warnings before the JSON
        require(i >= 0, ctx, "no JSON object: not fio --output-format=json output")
        doc = load_json(text[i:], ctx, "fio JSON")
        require(isinstance(doc, dict) and "fio version" in doc, ctx,
                "JSON without 'fio version': not fio output")
        jobs = doc.get("jobs")
        require(isinstance(jobs, list) and jobs, ctx, "fio JSON has no jobs", TruncatedOutput)
        version = str(doc["fio version"]).removeprefix("fio-")
        glob = doc.get("global options", {}) or {}

        groups: dict[int, list[dict]] = {}
        for j in jobs:
            require(isinstance(j, dict) and isinstance(j.get("job options"), dict) and
                    isinstance(j.get("groupid"), int), ctx,
                    "a job without 'job options' or an integer 'groupid'")
            groups.setdefault(j["groupid"], []).append(j)

        points: list[Point] = []
        seen: dict[tuple, int] = {}
        for gid, js in groups.items():
            opts = {**glob, **js[0]["job options"]}
            err = next((j.get("error") for j in js if j.get("error")), 0)
            rw = opts.get("rw", opts.get("readwrite", "read"))
            direction = "write" if "write" in rw else "read"
            if rw not in ("read", "write"):
                raise ParseError(source_of(ctx), f"group {gid}: rw={rw}; only sequential "
                                 "whole-file read or write maps to the envelope")
            try:
                numjobs = int(opts.get("numjobs", "1"))
                shared = "filename" in opts
                fsize = parse_size(opts.get("filesize") or opts.get("size"))
            except (TypeError, ValueError) as e:
                raise ParseError(source_of(ctx), f"group {gid}: cannot read the file size "
                                 f"(filesize/size option): {e}") from None
            # with --group_reporting a group is one entry covering all numjobs jobs
            nprocs = numjobs if len(js) == 1 else len(js)
            if direction == "write":
                metric = "TL"
            elif ctx.get("read_metric"):
                metric = ctx["read_metric"].replace("B", "T", 1)
            else:
                metric = "TN" if shared and nprocs > 1 else "T1L"
            try:
                io_bytes = sum(_count(j[direction]["io_bytes"]) for j in js)
                runtime_ms = max(_count(j[direction]["runtime"]) for j in js)
            except (KeyError, TypeError, ValueError) as e:
                raise ParseError(source_of(ctx), f"group {gid}: the {direction} results lack "
                                 f"an integer io_bytes or runtime ({e})") from None
            hosts = int(ctx.get("hosts", 1))
            ppn = int(ctx.get("procs_per_host", nprocs))
            key = (metric, fsize, ppn, hosts)
            rep = seen.get(key, 0)
            seen[key] = rep + 1
            require(fsize > 0 and nprocs >= 1 and hosts >= 1 and ppn >= 1, ctx,
                    f"group {gid}: file size {fsize}, {nprocs} jobs: nothing to measure")
            require(io_bytes >= 0 and runtime_ms >= 0, ctx, f"group {gid}: negative io_bytes "
                    f"({io_bytes}) or runtime ({runtime_ms} ms)")
            try:
                nrfiles = 1 if shared else int(opts.get("nrfiles", "1"))
            except ValueError:
                raise ParseError(source_of(ctx), f"group {gid}: nrfiles="
                                 f"{opts.get('nrfiles')!r} is not a number") from None
            cfg = {"command_options": opts, "group": gid, "rw": rw, "bs": opts.get("bs"),
                   "io_bytes": io_bytes, "runtime_ms": runtime_ms, "format": "json",
                   "files_per_proc": nrfiles, "ops": io_bytes // fsize, "bytes_per_op": fsize}
            if direction == "read":
                cfg["cache"] = ("client page cache invalidated (fio --invalidate=1)"
                                if str(opts.get("invalidate", "1")) == "1" else "not dropped")
                cfg["locality"] = ("given by the caller" if ctx.get("read_metric") else
                                   "shared file" if metric == "TN" else
                                   "unknown to fio; assumed local")
                if metric == "TN":
                    cfg["n_to_1"] = "whole: every job reads the same file"
            cfg.update(ctx.get("config", {}))
            if ctx.get("source"):
                cfg["source"] = ctx["source"]
            kw = dict(file_size=fsize, procs_per_host=ppn, hosts=hosts,
                      repeat=ctx.get("repeat_base", 0) + rep, tool="fio", tool_version=version,
                      config=cfg)
            if err or io_bytes == 0 or runtime_ms <= 0:
                why = (f"fio error {err}" if err else "no I/O done" if io_bytes == 0
                       else "runtime 0 ms (too short to time at fio's 1 ms resolution)")
                points += [Point.failed(m, fsize, ppn, hosts, kw["repeat"], "fio", why,
                                        version, cfg) for m in (metric, "B" + metric[1:])]
                continue
            bw = io_bytes * 1000.0 / runtime_ms
            points += pair(metric, bw / fsize, fsize, **kw)
        return points


def _count(v) -> int:
    """An integer count of fio's JSON (a float or a string is a damaged output)."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{v!r} is not an integer")
    return v
