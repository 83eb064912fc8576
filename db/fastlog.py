"""Fast path of the log reader for ingest: complete, well-formed format-v2 logs straight to row values.

db/logformat.py is the reference reader (and the one `mtcprof dump` uses).  This module reads the same layout
without building per-file dicts, flag-name lists or numpy arrays, which makes ingest ~3x faster.  Anything
unusual (truncation, corruption, other byte order or version, non-standard counter/bin counts) returns None and
ingest falls back to logformat.read_log, which gives the exact error and the valid prefix (and reads v1 logs).
tests/test_db_fastlog.py checks that both readers agree on real shim logs.

The same reader in C (db/fastlog_c.c, built by `make` into db/build/ for the venv's interpreter) is used when it is
there: ~4x faster (3.5 against 13.5 us for a log of 3 files), the largest part of the decoding ingest does.  Without
it (another interpreter than the one it was built for) this module's Python reader is used; tests/test_db_fastlog.py
checks that the two give the same values, or both None, on damaged logs too.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import struct
from operator import itemgetter

from mtcio.db import logformat as lf

_HDR = struct.Struct("<8sHHIQ")
_REC = struct.Struct("<HHI")
_PROC = struct.Struct("<" + lf._PROC_FMT)
_FILEH = struct.Struct("<IHHIBBHQQ")
_II = struct.Struct("<II")
_NSLOTS = lf.NBINS * 2 + len(lf.COUNTERS)
_NC = len(lf.COUNTERS)
_NB = lf.NBINS
_FIRST, _LAST = lf.COUNTERS.index("first_open_ns"), lf.COUNTERS.index("last_close_ns")
_I64_MAX = lf.I64_MAX
_LAYOUTS: dict = {}     # (mask, wide) -> how to read its values: few distinct ones per workload


def _layout(mask: int, wide: int):
    """(Struct of the values present, a getter that spreads them into the 50 slots with 0 elsewhere, the
    positions of first_open_ns and last_close_ns among the values (-1: absent)).  The getter does in C what a
    Python loop over the slots did: most of a file record's cost."""
    slots = [k for k in range(_NSLOTS) if mask >> k & 1]
    st = struct.Struct("<" + "".join("Q" if wide >> k & 1 else "I" for k in slots))
    zero = len(slots)       # the values get a 0 appended: every absent slot reads it
    spread = itemgetter(*[slots.index(k) if k in slots else zero for k in range(_NSLOTS)])
    lay = (st, spread, slots.index(_FIRST) if _FIRST in slots else -1, slots.index(_LAST) if _LAST in slots else -1)
    _LAYOUTS[(mask, wide)] = lay
    return lay


_ENDED_BY = lf.ENDED_BY
_ORIGIN = lf.ORIGIN
_R_PROC, _R_STR, _R_FILE, _R_OPS, _R_DIR, _R_END = lf.R_PROC, lf.R_STR, lf.R_FILE, lf.R_OPS, lf.R_DIR, lf.R_END
_STR_KEYS = lf.STR_KEYS
_ARGV = next(k for k, v in _STR_KEYS.items() if v == "argv")
_MOUNTS = next(k for k, v in _STR_KEYS.items() if v == "gfarm_mounts")
_PROC_WIDE = itemgetter(*lf._PROC_U64)
_IH = struct.Struct("<IH")
_I = struct.Struct("<I")


class Parsed:
    __slots__ = ("proc", "strings", "mounts", "files", "ops")

    def __init__(self):
        self.proc = None            # tuple in logformat._PROC_FIELDS order
        self.strings = {}           # name -> str (argv: list of str)
        self.mounts = []
        self.files = []             # (fid, flags, path, values[50]: 30 counters, 10 read bins, 10 write bins)
        self.ops = []               # (count, bytes) per OPS record: packed 48-byte little-endian op records


def _load_c():
    """The C reader (db/build/fastlog_c*.so) initialised with the layout above, or None when it is not built."""
    d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "build")
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(d, "fastlog_c" + suffix)
        if os.path.exists(path):
            spec = importlib.util.spec_from_file_location("fastlog_c", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            mod.init(lf.MAGIC, lf.FORMAT_VERSION, lf.BOM, _NC, _NB, _FIRST, _LAST, lf.OP_SIZE, _ARGV, _MOUNTS,
                     lf._PROC_FMT, _STR_KEYS, _R_PROC, _R_STR, _R_FILE, _R_OPS, _R_DIR, _R_END)
            return mod
    return None


_C = _load_c()


def parse(buf: bytes) -> Parsed | None:
    """Parse a complete log; None when anything is off (use logformat.read_log then)."""
    if _C is not None:
        got = _C.parse(buf)
        if got is None:
            return None
        out = Parsed()
        out.proc, out.strings, out.mounts, out.files, out.ops = got
        return out
    return parse_py(buf)


def parse_py(buf: bytes) -> Parsed | None:
    """parse() in Python."""
    try:
        return _parse(buf)
    except (struct.error, ValueError, OverflowError, IndexError, KeyError):
        return None             # damaged in a way the checks below do not name: the reference reader will


def _parse(buf: bytes) -> Parsed | None:
    n = len(buf)
    if n < 32:
        return None
    magic, version, hsize, bom, _ = _HDR.unpack_from(buf, 0)
    if magic != lf.MAGIC or version != lf.FORMAT_VERSION or bom != lf.BOM:
        return None
    out = Parsed()
    strings, files = out.strings, out.files
    off, nrec = hsize, 0
    dirs: dict = {}
    fids: set = set()
    start = 0
    rec = _REC.unpack_from
    ii = _II.unpack_from
    layouts = _LAYOUTS
    while off + 8 <= n:
        rtype, _f, length = rec(buf, off)
        p = off + 8
        end = p + length
        if end > n or length & 7:
            return None
        if rtype == _R_STR:         # the most frequent record: a dozen per process
            key, slen = ii(buf, p)
            if 8 + slen > length:
                return None
            raw = buf[p + 8:p + 8 + slen]
            if key == _ARGV:
                strings["argv"] = [a.decode("utf-8", "surrogateescape") for a in raw.split(b"\0")[:-1]] \
                    if raw else []
            elif b"\0" in raw:
                return None
            elif key == _MOUNTS:
                out.mounts.append(raw.decode("utf-8", "surrogateescape"))
            else:
                strings[_STR_KEYS.get(key) or "str%d" % key] = raw.decode("utf-8", "surrogateescape")
        elif rtype == _R_FILE:
            if length < 32:
                return None
            fid, flags, nlen, did, nc, nb, _r, mask, wide = _FILEH.unpack_from(buf, p)
            if nc != _NC or nb != _NB or mask >> _NSLOTS or wide & ~mask or fid in fids:
                return None
            fids.add(fid)
            st, spread, pf, pl = layouts.get((mask, wide)) or _layout(mask, wide)
            ns = p + 32 + st.size
            if ns + nlen > end or did not in dirs:
                return None
            u = st.unpack_from(buf, p + 32) + (0,)
            if pf >= 0 or pl >= 0:              # v2 FILE timestamps are relative to the PROC record's start_ns
                u = list(u)
                if pf >= 0:
                    u[pf] += start
                    if u[pf] > _I64_MAX:
                        return None
                if pl >= 0:
                    u[pl] += start
                    if u[pl] > _I64_MAX:
                        return None
            if wide and max(u) > _I64_MAX:
                return None
            name = buf[ns:ns + nlen]
            if b"\0" in name:
                return None
            files.append((fid, flags, dirs[did] + "/" + name.decode("utf-8", "surrogateescape"), spread(u)))
        elif rtype == _R_DIR:
            did, dlen = ii(buf, p)
            if 8 + dlen > length or b"\0" in buf[p + 8:p + 8 + dlen]:
                return None
            dirs[did] = buf[p + 8:p + 8 + dlen].decode("utf-8", "surrogateescape")
        elif rtype == _R_PROC:
            if length < _PROC.size:
                return None
            out.proc = _PROC.unpack_from(buf, p)
            if max(_PROC_WIDE(out.proc)) > _I64_MAX:
                return None
            start = out.proc[4]     # start_ns: v2 FILE timestamps are relative to it
        elif rtype == _R_OPS:
            count, osize = _IH.unpack_from(buf, p)
            if osize != lf.OP_SIZE or 8 + count * osize != length:
                return None
            out.ops.append((count, buf[p + 8:end]))
        elif rtype == _R_END:
            expect, = _I.unpack_from(buf, p)
            if expect != nrec or end != n or out.proc is None:
                return None
            return out
        else:
            return None
        off = end
        nrec += 1
    return None


def proc_dict(pr: Parsed) -> dict:
    """The process record as logformat.read_log's log.process would have it."""
    d = dict(zip(lf._PROC_FIELDS, pr.proc))
    d.pop("_reserved")
    d["ended_by"] = _ENDED_BY.get(d["ended_by"], str(d["ended_by"]))
    d["origin"] = _ORIGIN.get(d["origin"], str(d["origin"]))
    d["trace_ops"] = bool(d.pop("trace_flags") & 1)
    d.update(pr.strings)
    d["gfarm_mounts"] = list(pr.mounts)
    return d
