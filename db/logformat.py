"""Reader of mtcprof shim logs (format versions 1 and 2, see preload/FORMAT.md; the shim writes 2).

    log = read_log(path)          # -> MtcLog; never raises for truncation/corruption when strict=False
    log.process                   # dict: pid, ppid, host, task, argv, start_ns, end_ns, gfarm_mounts, ...
    log.files                     # list of dicts, one per file: path, flags, counters, hist_read, hist_write
    log.ops                       # numpy structured array (OP_DTYPE), empty unless MTCPROF_TRACE=ops
    log.complete, log.error       # error: LogError with .offset when the log is truncated or corrupt

The op trace is decoded with one numpy.frombuffer per OPS record (no per-op Python work).
"""
from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
MAGIC = b"MTCPLOG\0"
HEADER_SIZE = 32
BOM = 0x01020304

R_PROC, R_STR, R_FILE, R_OPS, R_DIR, R_END = 1, 2, 3, 4, 5, 15
RECORD_NAMES = {R_PROC: "process", R_STR: "string", R_FILE: "file", R_OPS: "ops", R_DIR: "dir", R_END: "end"}
FILE2_HEAD = 32          # v2 FILE record: fixed part before the values

STR_KEYS = {1: "host", 2: "run", 3: "task", 4: "stage", 5: "exe", 6: "argv", 7: "cwd", 8: "gfarm_mounts",
            9: "log_dir", 10: "include", 11: "exclude", 12: "shim_version", 13: "argv_truncated"}
ENDED_BY = {0: "unknown", 1: "main_return", 2: "exit", 3: "_exit", 4: "exec", 5: "signal", 6: "destructor"}
ORIGIN = {0: "exec", 1: "fork"}

COUNTERS = ("opens", "creates", "closes", "reads", "writes", "bytes_read", "bytes_written", "seeks",
            "read_discont", "write_discont", "max_offset", "stats", "fsyncs", "unlinks", "renames",
            "mkdirs", "rmdirs", "truncates", "mmaps", "mmap_bytes", "dups", "errors",
            "t_open_ns", "t_read_ns", "t_write_ns", "t_close_ns", "t_meta_ns", "first_open_ns", "last_close_ns")
NBINS = 10
HIST_BINS = ("0-100", "100-1K", "1K-10K", "10K-100K", "100K-1M", "1M-4M", "4M-10M", "10M-100M", "100M-1G", "1G+")
HIST_EDGES = (0, 100, 1024, 10240, 102400, 1048576, 4194304, 10485760, 104857600, 1073741824)

FILE_FLAGS = {0x1: "created", 0x2: "inherited", 0x4: "stdio", 0x8: "gfarm", 0x10: "posix"}
OPS = {1: "open", 2: "close", 3: "read", 4: "write", 5: "seek", 6: "stat", 7: "fsync", 8: "mmap", 9: "unlink",
       10: "rename", 11: "mkdir", 12: "rmdir", 13: "truncate", 14: "dup"}
OP_CODES = {v: k for k, v in OPS.items()}
OP_FLAGS = {0x1: "created", 0x2: "stdio", 0x4: "gfarm", 0x8: "positional", 0x10: "vectored", 0x20: "copy"}

_PROC_FIELDS = ("pid", "ppid", "uid", "origin", "start_ns", "end_ns", "exit_status", "ended_by", "signal", "n_files",
                "ops_traced", "ops_dropped", "files_dropped", "trace_flags", "munmaps", "parent_start_ns", "_reserved")
_PROC_FMT = "iiIIQQiIiIQQIIQQQ"
PROC_SIZE = struct.calcsize("<" + _PROC_FMT)   # 96
OP_SIZE = 48


def op_dtype(byteorder: str = "<") -> np.dtype:
    return np.dtype([("start_ns", byteorder + "u8"), ("dur_ns", byteorder + "u8"), ("offset", byteorder + "i8"),
                     ("length", byteorder + "i8"), ("file", byteorder + "u4"), ("tid", byteorder + "u4"),
                     ("op", byteorder + "u2"), ("flags", byteorder + "u2"), ("err", byteorder + "i4")])


OP_DTYPE = op_dtype("<")
assert OP_DTYPE.itemsize == OP_SIZE


class LogError(ValueError):
    """A log is truncated or corrupt at byte `offset`; everything before it was read."""

    def __init__(self, message: str, offset: int, path: str | None = None):
        self.offset, self.path, self.reason = offset, path, message
        super().__init__(f"{path or '<log>'}: {message} at byte offset {offset}")


@dataclass
class MtcLog:
    path: str | None
    version: int = 0
    byteorder: str = "<"
    created_ns: int = 0
    process: dict = field(default_factory=dict)
    files: list = field(default_factory=list)
    ops: np.ndarray = field(default_factory=lambda: np.zeros(0, OP_DTYPE))
    complete: bool = False
    error: LogError | None = None

    def file_by_path(self, path: str) -> dict | None:
        for f in self.files:
            if f["path"] == path:
                return f
        return None

    def files_by_id(self) -> dict:
        return {f["id"]: f for f in self.files}


def _flags(value: int, names: dict) -> list:
    return [n for bit, n in names.items() if value & bit]


def iter_records(buf, path: str | None = None) -> Iterator[tuple]:
    """Yield (type, payload_offset, payload_length, byteorder) for each record; raise LogError at the first bad one.

    The header is checked first.  A record whose length runs past the end of the buffer means truncation."""
    n = len(buf)
    if n < HEADER_SIZE:
        raise LogError("truncated header (%d bytes)" % n, 0, path)
    if bytes(buf[0:8]) != MAGIC:
        raise LogError("bad magic %r (not an mtcprof log)" % bytes(buf[0:8]), 0, path)
    bo = "<" if struct.unpack_from("<I", buf, 12)[0] == BOM else ">" if struct.unpack_from(">I", buf, 12)[0] == BOM else None
    if bo is None:
        raise LogError("bad byte-order mark", 12, path)
    version, hsize = struct.unpack_from(bo + "HH", buf, 8)
    if version not in READABLE_VERSIONS:
        raise LogError("unsupported format version %d (reader knows %s)" % (version, ", ".join(map(str, READABLE_VERSIONS))),
                       8, path)
    off = hsize
    hdr = struct.Struct(bo + "HHI")
    while off < n:
        if off + 8 > n:
            raise LogError("truncated record header", off, path)
        rtype, _rflags, length = hdr.unpack_from(buf, off)
        if rtype not in RECORD_NAMES or (rtype == R_DIR and version < 2):
            raise LogError("unknown record type %d" % rtype, off, path)
        if length % 8:
            raise LogError("record length %d not a multiple of 8" % length, off, path)
        if off + 8 + length > n:
            raise LogError("truncated %s record (needs %d bytes, %d left)" % (RECORD_NAMES[rtype], length, n - off - 8),
                           off, path)
        yield rtype, off + 8, length, bo
        off += 8 + length
        if rtype == R_END:
            if off != n:
                raise LogError("%d trailing bytes after END record" % (n - off), off, path)
            return
    raise LogError("missing END record (log truncated)", off, path)


def parse(buf, path: str | None = None, strict: bool = False) -> MtcLog:
    """Parse a whole log held in a bytes-like object (bytes, mmap, memoryview)."""
    log = MtcLog(path=path)
    ops_chunks = []
    strings: dict = {}
    dirs: dict = {}
    version = None
    nrec = 0
    try:
        for rtype, p, length, bo in iter_records(buf, path):
            log.byteorder = bo
            if version is None:
                version = struct.unpack_from(bo + "H", buf, 8)[0]
            if rtype == R_PROC:
                if length < PROC_SIZE:
                    raise LogError("short process record", p - 8, path)
                vals = struct.unpack_from(bo + _PROC_FMT, buf, p)
                proc = dict(zip(_PROC_FIELDS, vals))
                proc.pop("_reserved")
                proc["ended_by"] = ENDED_BY.get(proc["ended_by"], str(proc["ended_by"]))
                proc["origin"] = ORIGIN.get(proc["origin"], str(proc["origin"]))
                proc["trace_ops"] = bool(proc.pop("trace_flags") & 1)
                log.process.update(proc)
            elif rtype == R_STR:
                key, slen = struct.unpack_from(bo + "II", buf, p)
                if 8 + slen > length:
                    raise LogError("string longer than its record", p - 8, path)
                raw = bytes(buf[p + 8:p + 8 + slen])
                name = STR_KEYS.get(key, "str%d" % key)
                if name == "argv":
                    strings["argv"] = [a.decode("utf-8", "surrogateescape") for a in raw.split(b"\0")[:-1]] if raw else []
                elif name == "gfarm_mounts":
                    strings.setdefault("gfarm_mounts", []).append(raw.decode("utf-8", "surrogateescape"))
                else:
                    strings[name] = raw.decode("utf-8", "surrogateescape")
            elif rtype == R_DIR:
                did, dlen = struct.unpack_from(bo + "II", buf, p)
                if 8 + dlen > length:
                    raise LogError("dir longer than its record", p - 8, path)
                dirs[did] = bytes(buf[p + 8:p + 8 + dlen]).decode("utf-8", "surrogateescape")
            elif rtype == R_FILE and version >= 2:
                log.files.append(_file_v2(buf, p, length, bo, dirs, log.process.get("start_ns", 0), path))
            elif rtype == R_FILE:
                fid, flags, plen, cn = struct.unpack_from(bo + "IIII", buf, p)
                nc, nb = cn & 0xFFFF, cn >> 16
                mask, = struct.unpack_from(bo + "Q", buf, p + 16)
                nv = bin(mask).count("1")
                if 24 + 8 * nv + plen > length or nc + 2 * nb > 64 or mask >> (nc + 2 * nb):
                    raise LogError("file record shorter than its counters and path", p - 8, path)
                vals = [0] * (nc + 2 * nb)
                packed = struct.unpack_from(bo + "%dQ" % nv, buf, p + 24)
                i = 0
                for slot in range(nc + 2 * nb):
                    if mask >> slot & 1:
                        vals[slot] = packed[i]
                        i += 1
                pstart = p + 24 + 8 * nv
                rec = {"id": fid, "path": bytes(buf[pstart:pstart + plen]).decode("utf-8", "surrogateescape"),
                       "flags": _flags(flags, FILE_FLAGS)}
                for i, name in enumerate(COUNTERS[:nc]):
                    rec[name] = vals[i]
                rec["hist_read"] = list(vals[nc:nc + nb])
                rec["hist_write"] = list(vals[nc + nb:nc + 2 * nb])
                log.files.append(rec)
            elif rtype == R_OPS:
                count, osize = struct.unpack_from(bo + "IH", buf, p)
                if osize != OP_SIZE or 8 + count * osize != length:
                    raise LogError("bad ops record (count %d, op size %d)" % (count, osize), p - 8, path)
                ops_chunks.append(np.frombuffer(buf, dtype=op_dtype(bo), count=count, offset=p + 8))
            elif rtype == R_END:
                expect, = struct.unpack_from(bo + "I", buf, p)
                if expect != nrec:
                    raise LogError("END record counts %d records, found %d" % (expect, nrec), p - 8, path)
                log.complete = True
            nrec += 1
    except LogError as e:
        if strict:
            raise
        log.error = e.with_traceback(None)    # no frames (and no buffer views) kept alive by the error
    if len(buf) >= 16 and bytes(buf[0:8]) == MAGIC:
        log.version = struct.unpack_from(log.byteorder + "H", buf, 8)[0]
    if len(buf) >= 24:
        log.created_ns = struct.unpack_from(log.byteorder + "Q", buf, 16)[0]
    log.process.update(strings)
    log.process.setdefault("gfarm_mounts", [])
    if ops_chunks:
        ops = np.concatenate(ops_chunks) if len(ops_chunks) > 1 else ops_chunks[0].copy()
        log.ops = ops.astype(OP_DTYPE, copy=False)
    del ops_chunks
    return log


_FIRST, _LAST = COUNTERS.index("first_open_ns"), COUNTERS.index("last_close_ns")


def _file_v2(buf, p: int, length: int, bo: str, dirs: dict, start_ns: int, path) -> dict:
    """A version-2 FILE record; its two timestamps are stored relative to the PROC record's start_ns."""
    fid, flags, nlen, did, nc, nb, _r, mask, wide = struct.unpack_from(bo + "IHHIBBHQQ", buf, p)
    nslots = nc + 2 * nb
    if nslots > 64 or mask >> nslots or wide & ~mask:
        raise LogError("bad file record slot masks", p - 8, path)
    if did not in dirs:
        raise LogError("file record names unknown dir %d" % did, p - 8, path)
    fmt, i = bo, 0
    for slot in range(nslots):
        if mask >> slot & 1:
            fmt += "Q" if wide >> slot & 1 else "I"
    size = struct.calcsize(fmt)
    if FILE2_HEAD + size + nlen > length:
        raise LogError("file record shorter than its counters and name", p - 8, path)
    packed = struct.unpack_from(fmt, buf, p + FILE2_HEAD)
    vals = [0] * nslots
    for slot in range(nslots):
        if mask >> slot & 1:
            vals[slot] = packed[i]
            i += 1
    ns = p + FILE2_HEAD + size
    name = bytes(buf[ns:ns + nlen]).decode("utf-8", "surrogateescape")
    rec = {"id": fid, "path": dirs[did] + "/" + name, "flags": _flags(flags, FILE_FLAGS)}
    for s in (_FIRST, _LAST):
        if s < nc and mask >> s & 1:
            vals[s] += start_ns
    for i, cname in enumerate(COUNTERS[:nc]):
        rec[cname] = vals[i]
    rec["hist_read"] = list(vals[nc:nc + nb])
    rec["hist_write"] = list(vals[nc + nb:nc + 2 * nb])
    return rec


def read_log(path: str | os.PathLike, strict: bool = False) -> MtcLog:
    """Read one log file.  strict=True raises LogError on truncation/corruption; otherwise the valid prefix is
    returned with .error set and .complete False."""
    path = os.fspath(path)
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            log = MtcLog(path=path, error=LogError("empty file", 0, path))
            if strict:
                raise log.error
            return log
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            log = parse(mm, path, strict=False)
            # detach numpy views from the mmap before it closes
            log.ops = np.array(log.ops, dtype=OP_DTYPE, copy=True)
    if strict and log.error is not None:
        raise log.error
    return log


def ops_as_dicts(log: MtcLog) -> Iterator[dict]:
    """The op trace as plain dicts (slow path for dumps; use log.ops for analysis)."""
    paths = {f["id"]: f["path"] for f in log.files}
    for o in log.ops.tolist():
        start, dur, off, length, fid, tid, op, flags, err = o
        yield {"op": OPS.get(op, str(op)), "file": fid, "path": paths.get(fid), "offset": off, "length": length,
               "start_ns": start, "dur_ns": dur, "tid": tid, "flags": _flags(flags, OP_FLAGS), "err": err}
