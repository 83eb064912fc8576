"""Python side of the native engine (envelope/engine/, program ``mtcengine``).

The orchestrator builds one argv per host with :func:`engine_argv` (same ``start_at_ns`` on
every host, a distinct ``rank_base`` per host), runs each through its launcher template
(:func:`run_engine`, e.g. ``["mtcbed", "exec", "{host}", "--"]`` or ``["ssh", "{host}"]``),
parses every host's stdout with :func:`parse_output`, and turns all hosts' records into one
point per metric with :func:`aggregate` / :func:`points_from_runs`:

    ops/s   = ok ops / (last end - first start)   over all processes of all hosts
    bytes/s = bytes of ok ops / (same span)

Times are CLOCK_REALTIME ns, so engines in network namespaces of one machine (or NTP-synced
nodes) share one time axis.
"""
from __future__ import annotations

import math
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from .points import METRICS, PAIRS, ParseError, Point, TruncatedOutput

ENGINE_DIR = Path(__file__).resolve().parent / "engine"
ENGINE = ENGINE_DIR / "build" / "mtcengine"
COLUMNS = ["rank", "i", "op", "path", "bytes", "t_start_ns", "t_end_ns", "ok", "errno", "error"]

# which engine op measures a metric
OP_OF = {"Tm": "create", "Ts": "stat", "Tf": "fstat", "TL": "write", "BL": "write"} | {
    m: "read" for m in ("T1L", "B1L", "T1R", "B1R", "TN", "BN")}

EXIT_OK, EXIT_FAILED_OPS, EXIT_USAGE, EXIT_TIMEOUT, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class EngineError(RuntimeError):
    """The engine could not run at all (bad arguments, not built, launcher failed)."""


@dataclass
class OpRecord:
    rank: int
    i: int
    op: str
    path: str
    bytes: int
    t_start_ns: int
    t_end_ns: int
    ok: bool
    errno: int
    error: str | None


@dataclass
class EngineRun:
    meta: dict[str, str]
    records: list[OpRecord]
    summary: dict[str, str]
    host: str | None = None            # the launcher's host name, set by run_engine
    returncode: int | None = None
    stderr: str = ""

    @property
    def failed(self) -> list[OpRecord]:
        return [r for r in self.records if not r.ok]

    @property
    def timed_out(self) -> bool:
        return self.summary.get("timed_out") == "1"


@dataclass
class Aggregate:
    ops: int
    ok: int
    failed: int
    bytes: int
    first_start_ns: int
    last_end_ns: int
    span_s: float
    ops_per_s: float
    bytes_per_s: float
    errors: list[str] = field(default_factory=list)   # distinct reasons of failed ops


def build(quiet: bool = True) -> Path:
    """Build mtcengine if needed (the top-level `make setup` does the same)."""
    r = subprocess.run(["make", "-s", "-C", str(ENGINE_DIR)], capture_output=quiet, text=True)
    if r.returncode or not ENGINE.exists():
        raise EngineError(f"building {ENGINE} failed:\n{r.stdout or ''}{r.stderr or ''}")
    return ENGINE


def engine_argv(op: str, *, path: str | None = None, file_list: str | None = None,
                procs: int = 1, files_per_proc: int = 1, size: int | None = None,
                block: int | None = None, backend: str = "posix",
                start_at_ns: int | None = None, timeout: float | None = None,
                fsync: bool = False, rank_base: int = 0, compute_ms: int = 0, hogs: int = 0, gap_us: int = 0,
                idle_ms: int = 0, exe: str | os.PathLike | None = None) -> list[str]:
    """argv of one engine run. ``path`` may hold {rank}, {lrank}, {i}, {host}; a path without
    placeholders makes every process use the same file (N-to-1)."""
    if op not in ("create", "write", "read", "stat", "fstat"):
        raise ValueError(f"op must be create, write, read, stat or fstat, not {op!r}")
    if (path is None) == (file_list is None):
        raise ValueError("give exactly one of path and file_list")
    argv = [os.fspath(exe or ENGINE), "--backend", backend, "--op", op, "--procs", str(procs),
            "--files-per-proc", str(files_per_proc)]
    argv += ["--path", path] if path is not None else ["--file-list", os.fspath(file_list)]
    if size is not None:
        argv += ["--size", str(size)]
    if block is not None:
        argv += ["--block", str(block)]
    if start_at_ns is not None:
        argv += ["--start-at", str(int(start_at_ns))]
    if timeout is not None:
        argv += ["--timeout", repr(float(timeout))]
    if fsync:
        argv += ["--fsync"]
    if rank_base:
        argv += ["--rank-base", str(rank_base)]
    if compute_ms:
        argv += ["--compute-ms", str(int(compute_ms))]
    if hogs:
        argv += ["--hogs", str(int(hogs))]
    if gap_us:
        argv += ["--gap-us", str(int(gap_us))]
    if idle_ms:
        argv += ["--idle-ms", str(int(idle_ms))]
    return argv


def _kv(fields: Iterable[str]) -> dict[str, str]:
    return dict(f.split("=", 1) for f in fields if "=" in f)


def parse_output(text: str, source: str | None = None) -> EngineRun:
    """Records and summary of one engine stdout; TruncatedOutput if it stops early."""
    src = source or "<mtcengine output>"
    lines = text.splitlines()
    if not any(ln.startswith("#mtcengine") for ln in lines):
        raise ParseError(src, "no '#mtcengine' meta line: not mtcengine output")
    meta: dict[str, str] = {}
    summary: dict[str, str] | None = None
    records: list[OpRecord] = []
    header = None
    for n, ln in enumerate(lines, 1):
        if ln.startswith("#mtcengine"):
            meta = _kv(ln.split("\t")[1:])
        elif ln.startswith("#summary"):
            summary = _kv(ln.split("\t")[1:])
        elif ln.startswith("rank\t"):
            header = ln.split("\t")
            if header != COLUMNS:
                raise ParseError(src, f"line {n}: unexpected columns {header}")
        elif ln.strip() and header:
            f = ln.split("\t")
            if len(f) != len(COLUMNS):
                raise TruncatedOutput(src, f"line {n}: {len(f)} fields, expected {len(COLUMNS)}")
            try:
                records.append(OpRecord(int(f[0]), int(f[1]), f[2], f[3], int(f[4]), int(f[5]),
                                        int(f[6]), f[7] == "1", int(f[8]),
                                        None if f[9] == "-" else f[9]))
            except ValueError as e:
                raise ParseError(src, f"line {n}: {e}") from None
    if summary is None:
        raise TruncatedOutput(src, "no '#summary' line: the engine output is truncated")
    if int(summary.get("ops", -1)) != len(records):
        raise TruncatedOutput(src, f"{len(records)} op lines, the summary counts "
                              f"{summary.get('ops')}")
    return EngineRun(meta, records, summary)


def run_engine(argv: Sequence[str], launcher: Sequence[str] | None = None, *,
               host: str | None = None, wait_timeout: float | None = None,
               env: dict[str, str] | None = None) -> EngineRun:
    """Run one engine (through ``launcher`` with ``{host}`` filled in) and parse its output.
    Failed ops and timeouts come back in the run's records; only an engine that could not
    run (usage error, missing binary, launcher failure, no output) raises EngineError."""
    prefix = [a.format(host=host or "") for a in (launcher or [])]
    if wait_timeout is None:    # the engine kills its own workers; this guards the launcher
        t = _timeout_of(argv)
        wait_timeout = t + 30 if t else None
    try:
        cp = subprocess.run([*prefix, *argv], capture_output=True, text=True,
                            timeout=wait_timeout, env=env)
    except subprocess.TimeoutExpired as e:
        raise EngineError(f"{host or 'local'}: engine did not return within {wait_timeout} s "
                          "(launcher hung?)") from e
    except OSError as e:
        raise EngineError(f"{host or 'local'}: cannot start {prefix + list(argv[:1])}: {e}") from e
    if cp.returncode == EXIT_USAGE:
        raise EngineError(f"{host or 'local'}: mtcengine rejected its arguments: "
                          f"{cp.stderr.strip()}")
    try:
        run = parse_output(cp.stdout, source=f"mtcengine on {host or 'local'}")
    except ParseError as e:
        raise EngineError(f"{e} (exit {cp.returncode}; stderr: {cp.stderr.strip()[:500]})") from e
    run.host, run.returncode, run.stderr = host, cp.returncode, cp.stderr
    return run


def start_time(delay_s: float = 0.5) -> int:
    """A --start-at instant far enough ahead for every host's engine to be launched and to
    have initialised its workers (libgfarm connects before the barrier)."""
    import time
    return time.time_ns() + int(delay_s * 1e9)


def run_on_hosts(plans: Sequence[tuple[str, Sequence[str]]],
                 launcher: Sequence[str] | None = None, **kw: Any) -> list[EngineRun]:
    """Run one engine per (host, argv) concurrently through ``launcher`` and return their
    runs in the same order. Give every argv the same ``start_at_ns``."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=max(1, len(plans))) as pool:
        futs = [pool.submit(run_engine, argv, launcher, host=host, **kw) for host, argv in plans]
        return [f.result() for f in futs]


def _timeout_of(argv: Sequence[str]) -> float | None:
    a = list(argv)
    return float(a[a.index("--timeout") + 1]) if "--timeout" in a else 300.0


def aggregate(runs_or_records: Iterable[EngineRun | OpRecord]) -> Aggregate:
    """Totals over several processes and hosts: rates over the span from the first start
    to the last end of the successful ops."""
    recs: list[OpRecord] = []
    for x in runs_or_records:
        recs += x.records if isinstance(x, EngineRun) else [x]
    good = [r for r in recs if r.ok]
    errors = sorted({r.error or f"errno {r.errno}" for r in recs if not r.ok})
    if not good:
        return Aggregate(len(recs), 0, len(recs), 0, 0, 0, 0.0, 0.0, 0.0, errors)
    first = min(r.t_start_ns for r in good)
    last = max(r.t_end_ns for r in good)
    span = (last - first) / 1e9
    nbytes = sum(r.bytes for r in good)
    return Aggregate(len(recs), len(good), len(recs) - len(good), nbytes, first, last, span,
                     len(good) / span if span > 0 else math.inf,
                     nbytes / span if span > 0 else math.inf, errors)


def measured_together(metric: str) -> list[str]:
    """The metrics one engine run gives with `metric`: Tm, Ts or Tf alone, a throughput metric with its bandwidth
    twin (T1L -> [T1L, B1L], B1L -> [T1L, B1L])."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}")
    if metric in ("Tm", "Ts", "Tf"):
        return [metric]
    t = metric if metric in PAIRS else {b: t for t, b in PAIRS.items()}[metric]
    return [t, PAIRS[t]]


def points_from_runs(metric: str, runs: Sequence[EngineRun], *, file_size: int,
                     procs_per_host: int, hosts: int, repeat: int,
                     config: dict[str, Any] | None = None) -> list[Point]:
    """The point(s) of one measurement: Tm, Ts or Tf alone, or a throughput metric with its bandwidth
    twin (T1L -> T1L + B1L ...). Any failed op makes the measurement a failed point whose
    error names the reasons (the orchestrator records it and goes on)."""
    metrics = measured_together(metric)
    agg = aggregate(runs)
    cfg = dict(config or {})
    cfg.update({"engine_ops": agg.ops, "engine_failed": agg.failed, "ops": agg.ok,
                "span_s": agg.span_s,
                "hosts_run": [r.host for r in runs],
                "backend": runs[0].meta.get("backend") if runs else None,
                "late_start_ns": max((int(r.summary.get("late_ns", 0)) for r in runs),
                                     default=0)})
    version = runs[0].meta.get("version") if runs else None
    if not runs or agg.failed or agg.ok == 0 or not math.isfinite(agg.ops_per_s):
        why = ("no engine run" if not runs else
               f"{agg.failed} of {agg.ops} ops failed: " + "; ".join(agg.errors[:3])
               if agg.failed else "span of 0 ns: too fast to time")
        # libgfarm explains on stderr what it waited for ("sleep 8 sec: no filesystem
        # node" when a gfsd is down): keep its last word with the reason
        tail = [ln for r in runs for ln in r.stderr.splitlines() if ln.strip()]
        if tail:
            why += f" (stderr: {tail[-1].strip()[:200]})"
        return [Point.failed(m, file_size, procs_per_host, hosts, repeat, "native", why,
                             version, cfg) for m in metrics]
    out = []
    for m in metrics:
        v = agg.ops_per_s if METRICS[m] == "ops/s" else agg.bytes_per_s
        out.append(Point(m, file_size, procs_per_host, hosts, v, METRICS[m], repeat, "native",
                         version, cfg))
    return out
