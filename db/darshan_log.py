"""Darshan logs as a capture source (`mtcprof ingest --from darshan`): one Darshan log -> the rows ingest stores.

A Darshan log is one process (MPI: one job, its ranks summed per file).  Its POSIX and STDIO records become
file_access rows (the same counters as the shim's where Darshan has them, see COUNTER MAP in db/README.md), its
DXT_POSIX segments ops (read/write with offset, length, start, duration).  Darshan records no environment, so the
task, stage, host and run come from `mtcprof-task.env`, which the pwrake plugin writes (MTCPROF_CAPTURE=darshan)
in the log folder of each command, else from the log's folder under LOGS (Darshan's own year/month/day folders
left out: `LOGS/<stage>/<task>/2026/5/17/x.darshan`), else the executable's name is the stage and each log is its
own task.  What Darshan cannot tell is kept as capture gaps (capture_gaps table, GAP_TEXT).

The logs are read in a worker process (db/darshan_worker.py): darshan-util aborts on some damaged logs.
"""
from __future__ import annotations

import errno
import importlib.util
import os
import pickle
import re
import stat
import struct
import subprocess
import sys
import tempfile

import numpy as np

from mtcio.db import logformat as lf
from mtcio.db.ingest_read import LogRows
from mtcio.db.store import readable

INSTALL_HINT = "reading Darshan logs needs PyDarshan: pip install 'mtcio[darshan]'"
SIDECAR = "mtcprof-task.env"          # NUL-separated KEY=VALUE lines the plugin writes beside a command's logs
SIDECAR_MAX = 1 << 16
SUFFIXES = (".darshan", ".darshan_partial")
UNKNOWN_HOST = "unknown"
OPS_PER_CHUNK = 1 << 20
_LEN = struct.Struct("<Q")
_DATE_PART = re.compile(r"\A\d{1,4}\Z")
_ID_PID = re.compile(r"_id(\d+)-(\d+)_")

# Capture gaps: what a Darshan log cannot tell (capture_gaps.kind -> what it means for the numbers)
GAP_TEXT = {
    "not_wrapped": "Darshan does not count creates, closes, unlinks, mkdirs, rmdirs, truncates, copy_file_range "
                   "or sendfile copies, nor stat calls of programs built for glibc >= 2.33 (it wraps only the old "
                   "__xstat ABI); an image replaced by exec leaves no log",
    "module_partial": "Darshan ran out of records (its per-process memory, about 1,024 files by default): files "
                      "beyond it are missing",
    "dxt_partial": "the DXT trace holds fewer reads/writes than the counters (DXT's memory ran out)",
    "host_unknown": "the log names no host (no mtcprof-task.env, no DXT): its reads count as remote",
}


class NoDarshan(RuntimeError):
    """PyDarshan is not installed."""


def available() -> bool:
    """PyDarshan importable (without importing it: ~0.35 s)."""
    try:
        return importlib.util.find_spec("darshan") is not None
    except (ImportError, ValueError):
        return False


def find_logs(path: str) -> list[str]:
    """A Darshan log named directly, or every *.darshan (and leftover *.darshan_partial) under a folder."""
    if os.path.isfile(path):
        return [path]
    if not os.path.isdir(path):
        raise FileNotFoundError(errno.ENOENT, "no such file or folder", path)
    out = []
    for root, dirs, files in os.walk(path):
        dirs.sort()
        out.extend(os.path.join(root, f) for f in files if f.endswith(SUFFIXES) and not f.startswith("."))
    out.sort()
    return out


# ---- the worker ----------------------------------------------------------------------------------------------------

class Reader:
    """Reads logs through one worker process at a time; a worker that dies costs the log it was reading."""

    def __init__(self):
        self.proc = None
        self.err = None

    def _start(self) -> None:
        self.err = tempfile.TemporaryFile()       # darshan-util's messages (the worker reads them back per log)
        self.proc = subprocess.Popen([sys.executable, "-m", "mtcio.db.darshan_worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.err)

    def _stop(self) -> None:
        if self.proc is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            self.proc.wait()
            self.proc.stdout.close()
            self.err.close()
        self.proc = None

    def close(self) -> None:
        self._stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def raw(self, path: str) -> dict:
        """The worker's dict for one log; {'crashed': messages} when darshan-util killed the worker."""
        if self.proc is None:
            self._start()
        req = os.fsencode(path)
        try:
            self.proc.stdin.write(_LEN.pack(len(req)) + req)
            self.proc.stdin.flush()
            head = self.proc.stdout.read(_LEN.size)
            blob = self.proc.stdout.read(_LEN.unpack(head)[0]) if len(head) == _LEN.size else b""
        except (BrokenPipeError, struct.error):
            head = blob = b""
        if not blob:
            rc = self.proc.wait()
            self.err.seek(0)
            msgs = [ln.strip() for ln in self.err.read(1 << 16).decode("utf-8", "replace").splitlines()
                    if ln.strip()]
            self._stop()
            why = f"killed by signal {-rc}" if rc < 0 else f"exit status {rc}"
            return {"crashed": f"darshan-util {why}" + (f" ({msgs[-1]})" if msgs else "")}
        res = pickle.loads(blob)
        if "no_darshan" in res:
            self._stop()
            raise NoDarshan(INSTALL_HINT)
        if not res.get("closed"):
            self._stop()          # the worker exits after a log with an error
        return res

    def read(self, path: str, root: str):
        """(LogRows or None, None or the log's one warning (message, path, offset)) as ingest's readers give."""
        shown = readable(path)
        try:
            st = os.lstat(path)
        except OSError as e:
            return None, (f"{shown}: cannot read ({readable(e.strerror)}); skipped", path, 0)
        if not stat.S_ISREG(st.st_mode):
            return None, (f"{shown}: cannot read (not a regular file); skipped", path, 0)
        raw = self.raw(path)
        if "crashed" in raw:
            return None, (f"{shown}: damaged Darshan log: {readable(raw['crashed'])}; skipped", path, 0)
        if raw.get("open_failed") or "job" not in raw:
            return None, (f"{shown}: not a readable Darshan log ({readable(_first(raw['errors']))}); skipped",
                          path, 0)
        rows = rows_of(raw, path, root)
        if path.endswith(".darshan_partial") and not raw["errors"]:
            raw["errors"].append("a .darshan_partial log: Darshan did not finish writing it")
        if raw["errors"]:
            rows.complete = False
            rows.error = "; ".join(dict.fromkeys(raw["errors"]))[:500]
            return rows, (f"{shown}: damaged Darshan log ({readable(_first(raw['errors']))}); what was read whole "
                          f"was kept", path, 0)
        return rows, None


def _first(msgs) -> str:
    return next(iter(msgs), "unknown error")


# ---- task, stage, host ---------------------------------------------------------------------------------------------

def read_sidecar(folder: str) -> dict | None:
    """MTCPROF_* values of folder/mtcprof-task.env (regular file, <= 64 KiB), or None."""
    p = os.path.join(folder, SIDECAR)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, SIDECAR_MAX)
    finally:
        os.close(fd)
    out = {}
    for item in data.split(b"\0"):
        k, sep, v = item.strip(b"\n").partition(b"=")
        if sep and k.startswith(b"MTCPROF_"):
            out[k.decode("ascii", "replace")] = v.decode("utf-8", "surrogateescape")
    return out


def identity(path: str, root: str, exe: str) -> dict:
    """task, stage, host, run, mounts of a log, and where they came from (source)."""
    root = os.path.abspath(root if os.path.isdir(root) else os.path.dirname(root))
    folder = os.path.dirname(os.path.abspath(path))
    d = folder
    while True:
        env = read_sidecar(d)
        if env is not None and env.get("MTCPROF_TASK"):
            mounts = [m for m in env.get("MTCPROF_GFARM_MOUNTS", "").split(":") if m]
            return {"task": env["MTCPROF_TASK"], "stage": env.get("MTCPROF_STAGE") or exe_name(exe),
                    "host": env.get("MTCPROF_HOST") or None, "run": env.get("MTCPROF_RUN") or None,
                    "mounts": mounts, "source": "plugin record"}
        if d == root or len(d) <= len(root) or d == os.path.dirname(d):
            break
        d = os.path.dirname(d)
    rel = os.path.relpath(folder, root)
    parts = [] if rel in (".", "") or rel.startswith("..") else rel.split(os.sep)
    while parts and _DATE_PART.match(parts[-1]):       # Darshan's year/month/day folders
        parts.pop()
    if parts:
        return {"task": "/".join(parts), "stage": parts[0] if len(parts) > 1 else exe_name(exe), "host": None,
                "run": None, "mounts": [], "source": "log folder"}
    return {"task": "", "stage": exe_name(exe), "host": None, "run": None, "mounts": [],
            "source": "executable name"}


def exe_name(exe: str) -> str | None:
    word = (exe or "").split(" ", 1)[0]
    return os.path.basename(word) or None


# ---- counters ------------------------------------------------------------------------------------------------------

_CI = {c: i for i, c in enumerate(lf.COUNTERS)}
NV = len(lf.COUNTERS) + 2 * lf.NBINS
_SUMMED = ("opens", "closes", "reads", "writes", "bytes_read", "bytes_written", "seeks", "read_discont",
           "write_discont", "stats", "fsyncs", "renames", "mmaps", "dups", "t_read_ns", "t_write_ns", "t_meta_ns")
_BINS = ("0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M", "1M_4M", "4M_10M", "10M_100M", "100M_1G", "1G_PLUS")


def _module_values(rec: dict, mod: str, start_ns: int) -> np.ndarray:
    """One row of the shim's 50 values (lf.COUNTERS + read bins + write bins) per Darshan record."""
    # a damaged log's values may be anything: counts 0 .. 2^62, times finite seconds within 10^6 s of the start
    c = np.clip(rec["counters"], 0, 1 << 62)
    f = np.clip(np.nan_to_num(rec["fcounters"], nan=0.0, posinf=0.0, neginf=0.0), 0, 1e6)
    ci = {n: i for i, n in enumerate(rec["counter_names"])}
    fi = {n: i for i, n in enumerate(rec["fcounter_names"])}
    n = len(c)
    out = np.zeros((n, NV), dtype=np.int64)

    def col(name):
        return c[:, ci[f"{mod}_{name}"]] if f"{mod}_{name}" in ci else np.zeros(n, np.int64)

    def fcol(name):
        return f[:, fi[f"{mod}_F_{name}"]] if f"{mod}_F_{name}" in fi else np.zeros(n)

    def put(name, v):
        out[:, _CI[name]] = v

    opens = col("OPENS") + col("FDOPENS")
    reads, writes = col("READS"), col("WRITES")
    br, bw = col("BYTES_READ"), col("BYTES_WRITTEN")
    closed = fcol("CLOSE_END_TIMESTAMP") > 0
    put("opens", opens)
    put("closes", np.where(closed, opens, 0))          # Darshan counts no closes: a file it saw closed, all
    put("reads", reads)
    put("writes", writes)
    put("bytes_read", br)
    put("bytes_written", bw)
    put("seeks", col("SEEKS"))
    if mod == "POSIX":
        # a read not right after the previous read (Darshan's first read is never "consecutive": not counted)
        put("read_discont", np.clip(reads - col("CONSEC_READS") - 1, 0, None))
        put("write_discont", np.clip(writes - col("CONSEC_WRITES") - 1, 0, None))
        put("stats", col("STATS"))
        put("fsyncs", col("FSYNCS") + col("FDSYNCS"))
        put("renames", col("RENAME_SOURCES"))
        put("mmaps", col("MMAPS"))
        put("dups", col("DUPS"))
        for k, b in enumerate(_BINS):
            out[:, len(lf.COUNTERS) + k] = col(f"SIZE_READ_{b}")
            out[:, len(lf.COUNTERS) + lf.NBINS + k] = col(f"SIZE_WRITE_{b}")
    top = np.maximum(np.where(br > 0, col("MAX_BYTE_READ") + 1, 0), np.where(bw > 0, col("MAX_BYTE_WRITTEN") + 1, 0))
    put("max_offset", top)
    put("t_read_ns", (fcol("READ_TIME") * 1e9).astype(np.int64))
    put("t_write_ns", (fcol("WRITE_TIME") * 1e9).astype(np.int64))
    put("t_meta_ns", (fcol("META_TIME") * 1e9).astype(np.int64))     # Darshan's: opens, closes, seeks, stats...
    t_open, t_close = fcol("OPEN_START_TIMESTAMP"), fcol("CLOSE_END_TIMESTAMP")
    put("first_open_ns", np.where(t_open > 0, start_ns + (t_open * 1e9).astype(np.int64), 0))
    put("last_close_ns", np.where(t_close > 0, start_ns + (t_close * 1e9).astype(np.int64), 0))
    return out


def _merge(acc: dict, fid_of: dict, rid: int, vals: np.ndarray, flag: int) -> None:
    row = acc.get(rid)
    if row is None:
        fid_of[rid] = len(fid_of) + 1
        acc[rid] = [flag, vals.copy()]
        return
    row[0] |= flag
    cur = row[1]
    for name in _SUMMED:
        cur[_CI[name]] += vals[_CI[name]]
    cur[len(lf.COUNTERS):] += vals[len(lf.COUNTERS):]
    cur[_CI["max_offset"]] = max(cur[_CI["max_offset"]], vals[_CI["max_offset"]])
    for name, pick in (("first_open_ns", min), ("last_close_ns", max)):
        a, b = cur[_CI[name]], vals[_CI[name]]
        cur[_CI[name]] = pick(a, b) if a and b else (a or b)


FLAG_STDIO, FLAG_POSIX, FLAG_INHERITED = 0x4, 0x10, 0x2


def rows_of(raw: dict, path: str, root: str):
    """The worker's dict for one log -> ingest_read.LogRows (gaps and task source attached)."""
    job = raw["job"]
    start_ns = int(job["start_sec"]) * 1_000_000_000 + int(job["start_nsec"] or 0)
    end_ns = start_ns + max(int(float(job.get("run_time") or 0) * 1e9), 0)
    exe = raw.get("exe") or ""
    who = identity(path, root, exe)
    dxt_hosts = [d["hostname"] for d in raw["dxt"] if d["hostname"]]
    host = who["host"] or (dxt_hosts[0] if dxt_hosts else None)
    m = _ID_PID.search(os.path.basename(path))
    pid = int(m.group(2)) if m else int(job["jobid"])
    meta = job["metadata"]
    ppid = int(meta["fork_parent"]) if meta.get("fork_parent", "").isdigit() else None
    mounts = who["mounts"] or [p for p, typ in raw.get("mounts", []) if "gfarm" in typ]
    acc, fid_of = {}, {}
    for mod, flag in (("POSIX", FLAG_POSIX), ("STDIO", FLAG_STDIO)):
        rec = raw["records"].get(mod)
        if rec is None or not len(rec["id"]):
            continue
        vals = _module_values(rec, mod, start_ns)
        for rid, v in zip(rec["id"].tolist(), vals):
            _merge(acc, fid_of, rid, v, flag)
    names = raw["names"]
    gaps = [("not_wrapped", None, None)]
    gaps += [("module_partial", None, mod) for mod in ("POSIX", "STDIO")
             if raw["modules"].get(mod, {}).get("partial")]
    ops = _dxt_ops(raw, acc, fid_of, start_ns, gaps)
    files = []
    for rid, (flag, v) in acc.items():
        name = names.get(rid, f"<unnamed record {rid}>")
        if name in ("<STDIN>", "<STDOUT>", "<STDERR>"):
            flag |= FLAG_INHERITED
        files.append((fid_of[rid], flag, name, tuple([int(x) for x in v])))
    if host is None:
        gaps.append(("host_unknown", None, None))
    nprocs = int(job["nprocs"] or 1)
    argv = exe.split()
    proc = {"host": host or UNKNOWN_HOST, "pid": pid, "ppid": ppid, "uid": int(job["uid"]),
            "origin": "fork" if ppid is not None else "exec", "start_ns": start_ns, "end_ns": end_ns,
            "exit_status": None, "ended_by": None, "signal": None, "parent_start_ns": None,
            "exe": argv[0] if argv else None, "argv": argv, "cwd": None, "task": who["task"], "stage": who["stage"],
            "run": who["run"], "gfarm_mounts": mounts, "ops_traced": sum(c for c, _ in ops), "ops_dropped": 0,
            "files_dropped": 0, "munmaps": 0, "trace_ops": 1 if "DXT_POSIX" in raw["modules"] else 0,
            "shim_version": f"darshan {meta.get('lib_ver', '?')}" + (f", {nprocs} ranks" if nprocs > 1 else "")}
    rows = LogRows(proc, files, ops, True, None)
    rows.gaps = gaps
    rows.task_source = who["source"]
    return rows


def _dxt_ops(raw: dict, acc: dict, fid_of: dict, start_ns: int, gaps: list) -> list:
    """DXT_POSIX segments as op chunks (count, packed lf.OP_DTYPE bytes), sorted by start."""
    if not raw["dxt"]:
        if raw["modules"].get("DXT_POSIX", {}).get("partial"):
            gaps.append(("dxt_partial", None, "DXT_POSIX"))
        return []
    dt = lf.OP_DTYPE
    parts, seen = [], {}
    for d in raw["dxt"]:
        rid = d["id"]
        if rid not in acc:            # a DXT trace of a file whose counters were not kept: a row for its ops
            _merge(acc, fid_of, rid, np.zeros(NV, np.int64), FLAG_POSIX)
        fid = fid_of[rid]
        s = seen.setdefault(fid, [0, 0])
        for segs, code in ((d["reads"], lf.OP_CODES["read"]), (d["writes"], lf.OP_CODES["write"])):
            if not len(segs):
                continue
            a = np.zeros(len(segs), dtype=dt)
            t0, t1 = (np.clip(np.nan_to_num(segs[k], nan=0.0, posinf=0.0, neginf=0.0), 0, 1e6)
                      for k in ("start", "end"))
            a["start_ns"] = start_ns + (t0 * 1e9).astype(np.int64)
            a["dur_ns"] = (np.clip(t1 - t0, 0, None) * 1e9).astype(np.int64)
            a["offset"], a["length"] = segs["offset"], segs["length"]
            a["file"], a["tid"], a["op"] = fid, max(int(d["rank"]), 0), code
            parts.append(a)
            s[0 if code == lf.OP_CODES["read"] else 1] += len(segs)
    short = [fid for rid, fid in fid_of.items() if fid in seen and
             (seen[fid][0] < acc[rid][1][_CI["reads"]] or seen[fid][1] < acc[rid][1][_CI["writes"]])]
    if raw["modules"].get("DXT_POSIX", {}).get("partial"):
        gaps.append(("dxt_partial", None, "DXT_POSIX"))
    gaps += [("dxt_partial", fid, None) for fid in short]
    if not parts:
        return []
    ops = np.concatenate(parts)
    ops = ops[np.argsort(ops["start_ns"], kind="stable")]
    return [(len(ops[i:i + OPS_PER_CHUNK]), ops[i:i + OPS_PER_CHUNK].tobytes())
            for i in range(0, len(ops), OPS_PER_CHUNK)]
