"""IOR (hpc/ior 3.x/4.x): command lines per metric, and parsers of its text and JSON reports.

Metric -> IOR options (every run: ``-a API -t XFER -b SIZE -s 1 -i REPEATS -o PATH``):

======  ====================================================================================
TL/BL   ``-F -w -k``: each rank creates and writes its own file (Gfarm puts it on the
        writer's host: "write local"); ``-k`` keeps it so placement can be checked with
        gfwhere and the read metrics can reuse the files.
T1L/B1L ``-F -r -E -k``: each rank reads the file its own rank wrote beforehand (same
        host -> local replica). ``existing=False`` gives ``-F -w -r`` (written and read in
        one run; the read then meets a warm cache, which the config records).
T1R/B1R ``-F -r -E -k -C -Q 1``: each rank reads the file of the rank one node further
        (IOR's -C shifts by tasks-per-node), i.e. a replica on another host; needs >= 2
        hosts with the same mapping as the run that wrote the files.
TNp/BNp a shared-file read (no ``-F``): every rank opens the same file and reads its 1/N
        slice ("partitioned" N-to-1). That is not TN/BN (every process reads the whole
        file, as the native engine, mdtest -S and fio do), so these points are stored as
        TNp/BNp (one op = one slice, file_size = the shared file); IOR cannot measure TN.
Tm      not measurable with IOR (use mdtest).

Every point's config has files_per_proc (1: IOR reads or writes one file per rank and
iteration), ops (ranks: one op per rank and iteration) and bytes_per_op.
======  ====================================================================================

Parsing. Bandwidth B = bw(MiB/s) x 2^20 bytes/s, exactly as printed (text: PPDouble's 2 or 6
decimals; JSON: 4 decimals). Throughput T counts one op per rank per iteration (open + whole
transfer + close), so T = B / (bytes one rank moves) = B / (block x segments). IOR's own
"IOPS" column counts transfers over the wr/rd time only and is not used. Each iteration
("iter" column, or the order of the JSON "Results") is one repeat.
"""
from __future__ import annotations

import re
import shlex
from typing import Any, Sequence

from ..points import MiB, NoEnvelopeMetric, ParseError, Point, TruncatedOutput, pair
from .base import load_json, DEFAULT_MPI_LAUNCHER, Driver, expand_launcher, require, source_of

_HEADER = re.compile(r"^IOR-(\S+): MPI Coordinated Test of Parallel I/O", re.M)
_NUM = r"(-|[0-9.]+(?:e[+-]?\d+)?)"
_ROW = re.compile(r"^(write|read)\s+" + r"\s+".join([_NUM] * 9) + r"\s+(\d+)\s*$")
_KV = re.compile(r"^(\S[^:]*?)\s*:\s(.*)$")
_JSON_NAN = re.compile(r"(:\s*)(-?nan|-?inf)\b")

# which read metric a file-per-process read stands for
LOCAL, REMOTE = "T1L", "T1R"


class IORDriver(Driver):
    name = "ior"
    executable = "ior"
    metrics = frozenset({"TL", "BL", "T1L", "B1L", "T1R", "B1R"})   # command() builds these

    # ---------------------------------------------------------------------------- command
    def command(self, metric: str, file_size: int, nprocs: int, path: str, *,
                hosts: int = 1, launcher: Sequence[str] | None = DEFAULT_MPI_LAUNCHER,
                api: str = "POSIX", transfer: int | None = None, repeats: int = 1,
                existing: bool = True, fsync: bool = False,
                extra: Sequence[str] = (), hostlist: Sequence[str] = ()) -> list[str]:
        self.check_metric(metric)
        if file_size <= 0 or nprocs <= 0 or repeats <= 0:
            raise ValueError("file_size, nprocs and repeats must be positive")
        kind = metric.lstrip("TB")            # 'L', '1L', '1R', 'N'
        per_rank = file_size
        if kind == "N":
            if file_size % nprocs:
                raise ValueError(f"IOR N-to-1: file size {file_size} is not divisible by "
                                 f"{nprocs} ranks")
            per_rank = file_size // nprocs
        xfer = transfer or min(per_rank, MiB)
        if per_rank % xfer:
            xfer = per_rank   # IOR needs block % transfer == 0
        argv = expand_launcher(launcher, nprocs=nprocs, hosts=hosts, hostlist=hostlist)
        argv += [self.executable, "-a", api, "-t", str(xfer), "-b", str(per_rank), "-s", "1",
                 "-i", str(repeats), "-o", path]
        if kind == "L":
            argv += ["-F", "-w", "-k"]
        elif kind == "1L":
            argv += ["-F", "-r", "-E", "-k"] if existing else ["-F", "-w", "-r"]
        elif kind == "1R":
            if hosts < 2:
                raise ValueError("remote reads (T1R/B1R) need at least 2 hosts")
            argv += ["-F", "-r", "-E", "-k", "-C", "-Q", "1"]
        else:
            argv += ["-r", "-E", "-k"]
        if fsync:
            argv += ["-e"]
        return argv + list(extra)

    def version_args(self) -> list[str]:
        return ["--version"]

    # ----------------------------------------------------------------------------- detect
    def detect(self, text: str) -> bool:
        if _HEADER.search(text[:65536]):
            return True
        head = text.lstrip()[:4096]
        return head.startswith("{") and '"tests"' in head and '"Version"' in head and \
            '"Command line"' in head

    def parse(self, text: str, context: dict[str, Any] | None = None) -> list[Point]:
        ctx = context or {}
        require(text.strip(), ctx, "empty file (no IOR output)")
        if text.lstrip().startswith("{"):
            return self.parse_json(text, ctx)
        m = re.match(r"\s*Writing output to (\S+)\s*$", text)
        if m:
            raise ParseError(source_of(ctx), "this is the stdout of an IOR run with "
                             f"-O summaryFormat=JSON; parse its summary file {m.group(1)}")
        return self.parse_text(text, ctx)

    # ------------------------------------------------------------------------------- text
    def parse_text(self, text: str, ctx: dict[str, Any]) -> list[Point]:
        return self._to_points(self._raw_text(text, ctx), ctx)

    def parse_json(self, text: str, ctx: dict[str, Any]) -> list[Point]:
        return self._to_points(self._raw_json(text, ctx), ctx)

    def results(self, text: str, context: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Every write/read iteration of a report, whether or not it maps to a metric:
        dicts with test, access, iteration, bw_bytes (bytes/s), tasks, ppn, nodes, fpp,
        block, segments, transfer. For outputs parse() refuses (an N-to-1 write)."""
        ctx = context or {}
        require(text.strip(), ctx, "empty file (no IOR output)")
        raw = self._raw_json(text, ctx) if text.lstrip().startswith("{") else \
            self._raw_text(text, ctx)
        out = []
        for results, geo, _ph, config, _v in raw:
            for access, it, bw in results:
                out.append(dict(test=config["test_id"], access=access, iteration=it,
                                bw_bytes=bw * MiB, **{k: geo[k] for k in (
                                    "tasks", "ppn", "nodes", "fpp", "block", "segments",
                                    "transfer")}))
        return out

    def _to_points(self, raw, ctx) -> list[Point]:
        points: list[Point] = []
        for results, geo, phases, config, version in raw:
            points += self._points(results, geo, phases, config, version, ctx)
        _require_points(points, ctx, raw[0][3].get("access") if raw else None)
        return points

    def _raw_text(self, text: str, ctx: dict[str, Any]) -> list[tuple]:
        hdr = _HEADER.search(text)
        require(hdr, ctx, "no 'IOR-<version>: MPI Coordinated Test of Parallel I/O' header: "
                          "not an IOR text report")
        version = hdr.group(1)
        lines = text[hdr.start():].splitlines()
        top = _key_values(lines[:8])
        cmdline = top.get("Command line", "")

        tests: list[dict[str, Any]] = []   # one per "Options:" block
        summary: list[dict[str, str]] = []
        finished = False
        i = 0
        while i < len(lines):
            line = lines[i]
            if line.startswith("Options:"):
                opts: dict[str, str] = {}
                i += 1
                while i < len(lines) and lines[i].strip():
                    kv = _KV.match(lines[i])
                    if kv:
                        opts[kv.group(1).strip()] = kv.group(2).strip()
                    i += 1
                tests.append({"options": opts, "rows": []})
                continue
            if line.startswith("Results:"):
                require(tests, ctx, "a 'Results:' table without its 'Options:' block")
                i += 1
                while i < len(lines) and not lines[i].startswith(("Summary of all tests",
                                                                  "Options:", "Finished")):
                    r = _ROW.match(lines[i].strip())
                    if r:       # other lines (libgfarm: <info> ..., warnings) are skipped
                        tests[-1]["rows"].append(r.groups())
                    i += 1
                continue
            if line.startswith("Summary of all tests:"):
                cols = lines[i + 1].split() if i + 1 < len(lines) else []
                i += 2
                while i < len(lines) and re.match(r"^(write|read)\s", lines[i]):
                    vals = lines[i].split()
                    require(len(vals) == len(cols), ctx,
                            f"summary row has {len(vals)} fields, header {len(cols)}: "
                            f"{lines[i].strip()!r}", TruncatedOutput)
                    summary.append(dict(zip(cols, vals)))
                    i += 1
                continue
            if line.startswith("Finished"):
                finished = True
            i += 1

        require(tests, ctx, "no 'Options:' block: not an IOR report or cut before it",
                TruncatedOutput)
        require(any(t["rows"] for t in tests), ctx, "no result rows (write/read ...) in the "
                "'Results:' table: the run stopped before its first phase ended",
                TruncatedOutput)
        require(summary, ctx, "no 'Summary of all tests:' table: the output is truncated",
                TruncatedOutput)
        require(finished, ctx, "no 'Finished' line: the output is truncated", TruncatedOutput)

        raw = []
        for t, test in enumerate(tests):
            opts = test["options"]
            summ = [s for s in summary if s.get("Test#") == str(t)] or \
                   [s for s in summary if s.get("Test#", "0") == opts.get("TestID", str(t))]
            require(summ, ctx, f"test {t} has no row in the summary table", TruncatedOutput)
            s0 = summ[0]
            try:
                geo = {
                    "tasks": int(s0["#Tasks"]), "ppn": int(s0["tPN"]), "reps": int(s0["reps"]),
                    "fpp": s0["fPP"] == "1", "reorder": s0["reord"] == "1",
                    "reorder_random": s0["reordrand"] == "1", "segments": int(s0["segcnt"]),
                    "block": int(s0["blksiz"]), "transfer": int(s0["xsize"]),
                    "api": s0.get("API", opts.get("api")),
                }
                geo["nodes"] = int(opts.get("nodes", max(1, geo["tasks"] // geo["ppn"])))
            except (KeyError, ValueError, ZeroDivisionError) as e:
                raise ParseError(source_of(ctx), f"summary table of test {t} lacks or garbles "
                                 f"a column ({e})") from None
            phases = {s.get("Operation") for s in summ} & {"write", "read"}
            for ph in phases:
                n = sum(1 for r in test["rows"] if r[0] == ph)
                require(n == geo["reps"], ctx, f"test {t}: {n} '{ph}' result rows, but "
                        f"{geo['reps']} repetitions in the summary", TruncatedOutput)
            config = {"command": cmdline, "api": geo["api"], "api_version": opts.get("apiVersion"),
                      "access": opts.get("access"), "transfer_size": geo["transfer"],
                      "block_size": geo["block"], "segments": geo["segments"],
                      "iterations": geo["reps"], "reorder_tasks": geo["reorder"],
                      "test_id": t, "format": "text"}
            results = [(r[0], int(r[10]), float(r[1])) for r in test["rows"]
                       if r[1] != "-"]
            raw.append((results, geo, phases, config, version))
        return raw

    # ------------------------------------------------------------------------------- json
    def _raw_json(self, text: str, ctx: dict[str, Any]) -> list[tuple]:
        # IOR prints a NaN as a bare `nan` (PrintKeyValDouble's %.4f); json wants NaN.
        fixed = _JSON_NAN.sub(lambda m: m.group(1) + ("NaN" if "nan" in m.group(2)
                                                      else m.group(2).replace("inf", "Infinity")),
                              text)
        doc = load_json(fixed, ctx, "IOR JSON summary")
        require(isinstance(doc, dict) and isinstance(doc.get("tests"), list), ctx,
                "JSON without a 'tests' list: not an IOR summaryFile")
        require(doc["tests"], ctx, "IOR JSON 'tests' list is empty", TruncatedOutput)
        require("Finished" in doc, ctx, "IOR JSON has no 'Finished' key: the run did not end",
                TruncatedOutput)
        version = doc.get("Version")
        raw = []
        for t, test in enumerate(doc["tests"]):
            par, opts = test.get("Parameters"), test.get("Options", {})
            require(isinstance(par, dict), ctx, f"test {t} has no 'Parameters'")
            require(isinstance(test.get("Results"), list), ctx,
                    f"test {t} has no 'Results' list", TruncatedOutput)
            try:
                tasks = int(opts.get("tasks") or par["nodes"] * par["tasksPerNode"])
                geo = {"tasks": tasks, "ppn": int(par["tasksPerNode"]),
                       "nodes": int(par["nodes"]), "reps": int(par["repetitions"]),
                       "fpp": bool(par["filePerProc"]), "reorder": bool(par["reorderTasks"]),
                       "reorder_random": bool(par.get("reorderTasksRandom", 0)),
                       "segments": int(par["segmentCount"]), "block": int(par["blockSize"]),
                       "transfer": int(par["transferSize"]), "api": par.get("api")}
            except (KeyError, TypeError, ValueError, OverflowError) as e:
                raise ParseError(source_of(ctx), f"test {t} 'Parameters' lack or garble a "
                                 f"value ({e})") from None
            phases = {ph for ph, key in (("write", "writeFile"), ("read", "readFile"))
                      if par.get(key)}
            results, seen = [], {"write": 0, "read": 0}
            for r in test["Results"]:
                acc = r.get("access")
                if acc not in seen:
                    continue
                bw = r.get("bwMiB")
                require(isinstance(bw, (int, float)), ctx,
                        f"test {t}: a '{acc}' result without a numeric bwMiB ({bw!r})")
                results.append((acc, seen[acc], float(bw)))
                seen[acc] += 1
            for ph in phases:
                require(seen[ph] == geo["reps"], ctx, f"test {t}: {seen[ph]} '{ph}' results, "
                        f"but {geo['reps']} repetitions", TruncatedOutput)
            config = {"command": doc.get("Command line"), "api": geo["api"],
                      "api_version": opts.get("apiVersion"), "access": opts.get("access"),
                      "transfer_size": geo["transfer"], "block_size": geo["block"],
                      "segments": geo["segments"], "iterations": geo["reps"],
                      "reorder_tasks": geo["reorder"], "test_id": t, "format": "json",
                      "fsync": bool(par.get("fsync")),
                      "use_existing_file": bool(par.get("useExistingTestFile"))}
            raw.append((results, geo, phases, config, version))
        return raw

    # ------------------------------------------------------------------------- to points
    def _points(self, results, geo, phases, config, version, ctx) -> list[Point]:
        per_rank = geo["block"] * geo["segments"]
        for k in ("tasks", "ppn", "nodes"):
            require(geo[k] >= 1, ctx, f"{k} = {geo[k]}: a run needs at least one")
        require(per_rank > 0 and geo["transfer"] > 0, ctx, f"block size {geo['block']} x "
                f"{geo['segments']} segments, transfer {geo['transfer']}: no data per rank")
        both = "write" in phases and "read" in phases
        out: list[Point] = []
        for access, it, bw_mib in results:
            metric = self._metric(access, geo, ctx)
            if metric is None:
                continue
            require(bw_mib >= 0 and bw_mib == bw_mib and bw_mib != float("inf"), ctx,
                    f"{access} iteration {it}: bandwidth {bw_mib} MiB/s is not a rate")
            cfg = dict(config, phase=access, files_per_proc=1, ops=geo["tasks"],
                       bytes_per_op=per_rank)
            if metric == "TNp":
                file_size = per_rank * geo["tasks"]
                cfg["n_to_1"] = "partitioned: each rank reads its 1/N of the shared file"
            else:
                file_size = per_rank
            if access == "read":
                cfg["locality"] = ctx.get("locality") or _locality_note(metric, geo)
                cfg.setdefault("cache", "read right after the write phase of the same run "
                               "(no cache drop)" if both else "not recorded")
            cfg.update(ctx.get("config", {}))
            if ctx.get("source"):
                cfg["source"] = ctx["source"]
            out += pair(metric, bw_mib * MiB / per_rank, per_rank,
                        file_size=file_size, procs_per_host=geo["ppn"], hosts=geo["nodes"],
                        repeat=ctx.get("repeat_base", 0) + it, tool="ior",
                        tool_version=version, config=cfg)
        return out

    @staticmethod
    def _metric(access: str, geo: dict, ctx: dict) -> str | None:
        if access == "write":
            # N-to-1 (shared file) writes are no envelope metric: writes are local, per file
            return "TL" if geo["fpp"] else None
        if not geo["fpp"]:
            return "TNp"     # whatever the caller says: the output shows a partitioned read
        if ctx.get("read_metric"):
            m = ctx["read_metric"].replace("B", "T", 1) if ctx["read_metric"][0] == "B" \
                else ctx["read_metric"]
            return "TNp" if m == "TN" else m
        if geo["reorder_random"]:
            return None      # random partner: neither provably local nor remote
        # -C reads another node's file only when there is another node
        return REMOTE if geo["reorder"] and geo["nodes"] > 1 else LOCAL


def _locality_note(metric: str, geo: dict) -> str:
    if metric == "TNp":
        return "shared file"
    if metric == "T1R":
        return "inferred: -C with >1 node reads the file of a rank on another node"
    if geo["reorder"]:
        return "inferred: -C on a single node reads a neighbour rank's file on the same host"
    return "inferred: each rank reads the file it wrote (Gfarm writes locally)"


def _require_points(points: list[Point], ctx: dict, access: str | None) -> None:
    if not points:
        raise NoEnvelopeMetric(source_of(ctx), "no phase maps to an envelope metric "
                               f"(access: {access}; a shared-file write is an N-to-1 write, "
                               "which the envelope does not measure)")


def _key_values(lines: list[str]) -> dict[str, str]:
    out = {}
    for ln in lines:
        kv = _KV.match(ln)
        if kv:
            out[kv.group(1).strip()] = kv.group(2).strip()
    return out


def command_options(cmdline: str) -> list[str]:
    """The IOR command line of a report as argv (for the config)."""
    try:
        return shlex.split(cmdline)
    except ValueError:
        return cmdline.split()
