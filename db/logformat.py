"""Reader of mtcprof shim logs (format versions 1 to 3, see preload/FORMAT.md; the shim writes 3).

    log = read_log(path)          # -> MtcLog; never raises for truncation/corruption when strict=False
    log.process                   # dict: pid, ppid, host, task, argv, start_ns, end_ns, gfarm_mounts, ...
    log.files                     # list of dicts, one per file: path, flags, counters, hist_read, hist_write
    log.ops                       # numpy structured array (OP_DTYPE), empty unless MTCPROF_TRACE=ops
    log.complete, log.error       # error: LogError with .offset when the log is truncated or corrupt
    log.kept_out                  # [LogError]: FILE records not read for counts no shim writes (1 counter, 11 bins)

The op trace is decoded with one numpy.frombuffer when log.ops is first read (no per-op Python work); numpy is
imported only then, so that `mtcprof dump` (ops_as_dicts) starts without it.
"""
from __future__ import annotations

import errno
import os
import stat
import struct
from collections.abc import Iterator

FORMAT_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)
MAGIC = b"MTCPLOG\0"
HEADER_SIZE = 32
BOM = 0x01020304

R_PROC, R_STR, R_FILE, R_OPS, R_DIR, R_END = 1, 2, 3, 4, 5, 15
RECORD_NAMES = {R_PROC: "process", R_STR: "string", R_FILE: "file", R_OPS: "ops", R_DIR: "dir", R_END: "end"}
FILE2_HEAD = 32          # v2 and v3 FILE record: fixed part before the values

STR_KEYS = {1: "host", 2: "run", 3: "task", 4: "stage", 5: "exe", 6: "argv", 7: "cwd", 8: "gfarm_mounts",
            9: "log_dir", 10: "include", 11: "exclude", 12: "shim_version", 13: "argv_truncated", 14: "cpu_clock",
            15: "sched", 16: "cpu_wait"}
ENDED_BY = {0: "unknown", 1: "main_return", 2: "exit", 3: "_exit", 4: "exec", 5: "signal", 6: "destructor"}
ORIGIN = {0: "exec", 1: "fork"}

COUNTERS = ("opens", "creates", "closes", "reads", "writes", "bytes_read", "bytes_written", "seeks",
            "read_discont", "write_discont", "max_offset", "stats", "fsyncs", "unlinks", "renames",
            "mkdirs", "rmdirs", "truncates", "mmaps", "mmap_bytes", "dups", "errors",
            "t_open_ns", "t_read_ns", "t_write_ns", "t_close_ns", "t_meta_ns", "first_open_ns", "last_close_ns",
            "seeks_end")     # version 3 added seeks_end (a version-2 FILE record has the first 29)
NBINS = 10
# counters a FILE record of each format version has; a record with other counts (or other than NBINS bins) is no
# shim's: its values cannot be put in their slots, so it is kept out of log.files and named in log.kept_out
VERSION_COUNTERS = {1: 29, 2: 29, 3: 30}
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
_PROC_U64 = tuple(i for i, c in enumerate(_PROC_FMT) if c == "Q")
I64_MAX = (1 << 63) - 1      # larger counters and times do not fit SQLite's INTEGER: only a damaged log has them
MAX_LOG_BYTES = 1 << 30      # read_log refuses larger files (the shim's default op trace cap gives <= 192 MiB)
SMALL_READ = 1 << 16         # read_bytes reads a file up to this size in one call
# smallest payload of each record type (v1 FILE: 24); a shorter record is corrupt, not read past its end
_MIN_LEN = {R_PROC: PROC_SIZE, R_STR: 8, R_FILE: 32, R_OPS: 8, R_DIR: 8, R_END: 8}


def op_dtype(byteorder: str = "<"):
    import numpy as np
    return np.dtype([("start_ns", byteorder + "u8"), ("dur_ns", byteorder + "u8"), ("offset", byteorder + "i8"),
                     ("length", byteorder + "i8"), ("file", byteorder + "u4"), ("tid", byteorder + "u4"),
                     ("op", byteorder + "u2"), ("flags", byteorder + "u2"), ("err", byteorder + "i4")])


_OP_STRUCT = {bo: struct.Struct(bo + "QQqqIIHHi") for bo in "<>"}     # the same layout, for readers without numpy
assert _OP_STRUCT["<"].size == OP_SIZE


def _op_dtype_le():
    if "OP_DTYPE" not in globals():
        globals()["OP_DTYPE"] = op_dtype("<")
    return globals()["OP_DTYPE"]


def __getattr__(name: str):
    """OP_DTYPE is built on first use: importing this module must not import numpy (~70 ms)."""
    if name == "OP_DTYPE":
        return _op_dtype_le()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class LogError(ValueError):
    """A log is truncated or corrupt at byte `offset`; everything before it was read."""

    def __init__(self, message: str, offset: int, path: str | None = None):
        self.offset, self.path, self.reason = offset, path, message
        super().__init__(f"{path or '<log>'}: {message} at byte offset {offset}")


class KeptOut(LogError):
    """A record read but kept out of the log's contents (its counts are no shim's); the walk went on past it."""


class NotALogFile(OSError):
    """A path that is not a regular file of bounded size (symlink, FIFO, device, folder, too large): not read."""


class NotNow(Exception):
    """read_bytes(..., most=): the file is larger than most bytes; it was not opened."""


def read_bytes(path: str | os.PathLike, max_bytes: int = MAX_LOG_BYTES, most: int | None = None) -> bytes:
    """The whole content of a log file, read safely: regular files only (a symlink, FIFO or device named *.mtclog
    is neither opened nor followed: O_NOFOLLOW, O_NONBLOCK, fstat S_ISREG) and at most max_bytes.  A file whose
    first bytes are not a log's magic gives only its header's bytes (which the reader then rejects): a large
    file that happens to be named *.mtclog is never read into memory.  most: a regular file larger than this
    raises NotNow before it is opened (the read-ahead threads leave it to be read in its turn)."""
    st = os.lstat(path)
    if most is not None and st.st_size > most and stat.S_ISREG(st.st_mode):
        raise NotNow()
    if not stat.S_ISREG(st.st_mode):
        raise NotALogFile(errno.EINVAL, "not a regular file (%s)" % _kind(st.st_mode), os.fspath(path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise NotALogFile(errno.ELOOP, "not a regular file (symbolic link)", os.fspath(path)) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):        # replaced between lstat and open
            raise NotALogFile(errno.EINVAL, "not a regular file (%s)" % _kind(st.st_mode), os.fspath(path))
        if st.st_size > max_bytes:
            raise NotALogFile(errno.EFBIG, "larger than %d bytes (%d)" % (max_bytes, st.st_size), os.fspath(path))
        # a small file in one read (most logs are ~1 KB); a larger one only after its header says it is a log
        head = os.read(fd, st.st_size if st.st_size <= SMALL_READ else HEADER_SIZE)
        if len(head) < HEADER_SIZE or head[:len(MAGIC)] != MAGIC:
            return head[:HEADER_SIZE]   # not a log (or all of a tiny file): the reader rejects it from these bytes
        chunks, left = [head], st.st_size - len(head)
        while left > 0:                          # never past the size fstat gave (a growing file is cut there)
            b = os.read(fd, min(left, 1 << 26))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "symbolic link"), (stat.S_ISFIFO, "FIFO"), (stat.S_ISDIR, "folder"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
                       (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "special file"


class MtcLog:
    """One log as read.  A plain class (not a dataclass): `mtcprof dump` starts ~8 ms sooner without dataclasses."""
    __slots__ = ("path", "version", "byteorder", "created_ns", "process", "files", "complete", "error", "ops_raw",
                 "kept_out", "_ops")

    def __init__(self, path: str | None, version: int = 0, byteorder: str = "<", created_ns: int = 0,
                 process: dict | None = None, files: list | None = None, complete: bool = False,
                 error: LogError | None = None, ops_raw: list | None = None):
        self.path, self.version, self.byteorder, self.created_ns = path, version, byteorder, created_ns
        self.process = {} if process is None else process
        self.files = [] if files is None else files
        self.complete, self.error = complete, error
        self.ops_raw = [] if ops_raw is None else ops_raw      # [(byteorder, bytes of an OPS record's ops)]
        self.kept_out: list = []                                # [LogError] of FILE records with unknown counts
        self._ops = None

    def __repr__(self) -> str:
        return (f"MtcLog(path={self.path!r}, version={self.version}, files={len(self.files)}, "
                f"complete={self.complete}, error={self.error!r})")

    @property
    def ops(self):
        """The op trace as a numpy structured array (OP_DTYPE), empty unless MTCPROF_TRACE=ops."""
        if self._ops is None:
            import numpy as np
            dt = _op_dtype_le()
            parts = [np.frombuffer(raw, dtype=op_dtype(bo)).astype(dt) for bo, raw in self.ops_raw]   # copies
            self._ops = np.concatenate(parts) if len(parts) > 1 else parts[0] if parts else np.zeros(0, dt)
        return self._ops

    @ops.setter
    def ops(self, value) -> None:
        self._ops = value

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
        raise LogError("bad magic (not an mtcprof log)", 0, path)   # never echo file content
    bo = "<" if struct.unpack_from("<I", buf, 12)[0] == BOM else ">" if struct.unpack_from(">I", buf, 12)[0] == BOM else None
    if bo is None:
        raise LogError("bad byte-order mark", 12, path)
    version, hsize = struct.unpack_from(bo + "HH", buf, 8)
    if version not in READABLE_VERSIONS:
        raise LogError("unsupported format version %d (reader knows %s)" % (version, ", ".join(map(str, READABLE_VERSIONS))),
                       8, path)
    if hsize < HEADER_SIZE or hsize % 8 or hsize > n:
        raise LogError("bad header size %d" % hsize, 10, path)
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
        if length < _MIN_LEN[rtype] - (8 if rtype == R_FILE and version < 2 else 0):
            raise LogError("short %s record (%d bytes)" % (RECORD_NAMES[rtype], length), off, path)
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
    strings: dict = {}
    dirs: dict = {}
    version = None
    nrec = 0
    fids: set = set()
    p = 8
    rtype = 0
    try:
        for rtype, p, length, bo in iter_records(buf, path):
            log.byteorder = bo
            if version is None:
                version = struct.unpack_from(bo + "H", buf, 8)[0]
            if rtype == R_PROC:
                if length < PROC_SIZE:
                    raise LogError("short process record", p - 8, path)
                vals = struct.unpack_from(bo + _PROC_FMT, buf, p)
                if max(vals[i] for i in _PROC_U64) > I64_MAX:
                    raise LogError("process record value out of range", p - 8, path)
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
                if b"\0" in raw and name != "argv":
                    raise LogError("NUL byte in the %s string" % name, p - 8, path)
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
                raw = bytes(buf[p + 8:p + 8 + dlen])
                if b"\0" in raw:
                    raise LogError("NUL byte in a folder name", p - 8, path)
                dirs[did] = raw.decode("utf-8", "surrogateescape")
            elif rtype == R_FILE and version >= 2:
                rec = _file_v2(buf, p, length, bo, dirs, log.process.get("start_ns", 0), path)
                if rec["id"] in fids:
                    raise LogError("duplicate file id %d" % rec["id"], p - 8, path)
                fids.add(rec["id"])
                _keep_file(log, rec, version, *struct.unpack_from("BB", buf, p + 12), p - 8)
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
                raw = bytes(buf[pstart:pstart + plen])
                if b"\0" in raw:
                    raise LogError("NUL byte in a file name", p - 8, path)
                if fid in fids:
                    raise LogError("duplicate file id %d" % fid, p - 8, path)
                if packed and max(packed) > I64_MAX:
                    raise LogError("file record value out of range", p - 8, path)
                fids.add(fid)
                rec = {"id": fid, "path": raw.decode("utf-8", "surrogateescape"), "flags": _flags(flags, FILE_FLAGS)}
                for i, name in enumerate(COUNTERS[:nc]):
                    rec[name] = vals[i]
                rec["hist_read"] = list(vals[nc:nc + nb])
                rec["hist_write"] = list(vals[nc + nb:nc + 2 * nb])
                _keep_file(log, rec, version, nc, nb, p - 8)
            elif rtype == R_OPS:
                count, osize = struct.unpack_from(bo + "IH", buf, p)
                if osize != OP_SIZE or 8 + count * osize != length:
                    raise LogError("bad ops record (count %d, op size %d)" % (count, osize), p - 8, path)
                log.ops_raw.append((bo, bytes(buf[p + 8:p + 8 + count * OP_SIZE])))
            elif rtype == R_END:
                expect, = struct.unpack_from(bo + "I", buf, p)
                if expect != nrec:
                    raise LogError("END record counts %d records, found %d" % (expect, nrec), p - 8, path)
                log.complete = True
            nrec += 1
    except (LogError, struct.error, ValueError, OverflowError, IndexError) as e:
        if not isinstance(e, LogError):     # a record the checks above let through: still an error at its offset
            e = LogError("malformed %s record" % RECORD_NAMES.get(rtype, "?"), max(p - 8, 0), path)
        if strict:
            raise e from None
        log.error = e.with_traceback(None)    # no frames (and no buffer views) kept alive by the error
    if len(buf) >= 16 and bytes(buf[0:8]) == MAGIC:
        log.version = struct.unpack_from(log.byteorder + "H", buf, 8)[0]
    if len(buf) >= 24:
        log.created_ns = struct.unpack_from(log.byteorder + "Q", buf, 16)[0]
    log.process.update(strings)
    log.process.setdefault("gfarm_mounts", [])
    return log


def _keep_file(log: MtcLog, rec: dict, version: int, nc: int, nb: int, offset: int) -> None:
    """A FILE record into log.files when its counts are its version's, else into log.kept_out."""
    if nc == VERSION_COUNTERS[version] and nb == NBINS:
        log.files.append(rec)
    else:
        log.kept_out.append(KeptOut("file record with %d counters and %d bins (a version-%d log has %d and %d)"
                                     % (nc, nb, version, VERSION_COUNTERS[version], NBINS), offset, log.path))


_FIRST, _LAST = COUNTERS.index("first_open_ns"), COUNTERS.index("last_close_ns")


def _file_v2(buf, p: int, length: int, bo: str, dirs: dict, start_ns: int, path) -> dict:
    """A version-2 or -3 FILE record; its two timestamps are stored relative to the PROC record's start_ns."""
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
    if wide and packed and max(packed) > I64_MAX:
        raise LogError("file record value out of range", p - 8, path)
    vals = [0] * nslots
    for slot in range(nslots):
        if mask >> slot & 1:
            vals[slot] = packed[i]
            i += 1
    ns = p + FILE2_HEAD + size
    raw = bytes(buf[ns:ns + nlen])
    if b"\0" in raw:
        raise LogError("NUL byte in a file name", p - 8, path)
    name = raw.decode("utf-8", "surrogateescape")
    rec = {"id": fid, "path": dirs[did] + "/" + name, "flags": _flags(flags, FILE_FLAGS)}
    for s in (_FIRST, _LAST):
        if s < nc and mask >> s & 1:
            vals[s] += start_ns
            if vals[s] > I64_MAX:
                raise LogError("file record time out of range", p - 8, path)
    for i, cname in enumerate(COUNTERS[:nc]):
        rec[cname] = vals[i]
    rec["hist_read"] = list(vals[nc:nc + nb])
    rec["hist_write"] = list(vals[nc + nb:nc + 2 * nb])
    return rec


def read_log(path: str | os.PathLike, strict: bool = False) -> MtcLog:
    """Read one log file.  strict=True raises LogError on truncation/corruption; otherwise the valid prefix is
    returned with .error set and .complete False."""
    path = os.fspath(path)
    buf = read_bytes(path)          # regular files only, bounded: a *.mtclog symlink to /dev/zero or a FIFO is refused
    if not buf:
        log = MtcLog(path=path, error=LogError("empty file", 0, path))
        if strict:
            raise log.error
        return log
    log = parse(buf, path, strict=False)
    if strict and log.error is not None:
        raise log.error
    return log


def ops_as_dicts(log: MtcLog) -> Iterator[dict]:
    """The op trace as plain dicts (slow path for dumps; use log.ops for analysis)."""
    paths = {f["id"]: f["path"] for f in log.files}
    rows = (log.ops.tolist() if log._ops is not None else
            (o for bo, raw in log.ops_raw for o in _OP_STRUCT[bo].iter_unpack(raw)))
    for o in rows:
        start, dur, off, length, fid, tid, op, flags, err = o
        yield {"op": OPS.get(op, str(op)), "file": fid, "path": paths.get(fid), "offset": off, "length": length,
               "start_ns": start, "dur_ns": dur, "tid": tid, "flags": _flags(flags, OP_FLAGS), "err": err}
