"""Fast path of the log reader for ingest: complete, well-formed format-v2 logs straight to row values.

db/logformat.py is the reference reader (and the one `mtcprof dump` uses).  This module reads the same layout
without building per-file dicts, flag-name lists or numpy arrays, which makes ingest ~3x faster.  Anything
unusual (truncation, corruption, other byte order or version, non-standard counter/bin counts) returns None and
ingest falls back to logformat.read_log, which gives the exact error and the valid prefix (and reads v1 logs).
tests/test_db_fastlog.py checks that both readers agree on real shim logs.
"""
from __future__ import annotations

import struct

from mtcio.db import logformat as lf

_HDR = struct.Struct("<8sHHIQ")
_REC = struct.Struct("<HHI")
_PROC = struct.Struct("<" + lf._PROC_FMT)
_FILEH = struct.Struct("<IHHIBBHQQ")
_II = struct.Struct("<II")
_NSLOTS = lf.NBINS * 2 + len(lf.COUNTERS)
_NC = len(lf.COUNTERS)
_FIRST, _LAST = lf.COUNTERS.index("first_open_ns"), lf.COUNTERS.index("last_close_ns")
_ZERO = (0,) * _NSLOTS
_I64_MAX = lf.I64_MAX
_LAYOUTS: dict = {}     # (mask, wide) -> (Struct of the values, their slots): few distinct ones per workload


def _layout(mask: int, wide: int):
    slots = [k for k in range(_NSLOTS) if mask >> k & 1]
    lay = (struct.Struct("<" + "".join("Q" if wide >> k & 1 else "I" for k in slots)), slots)
    _LAYOUTS[(mask, wide)] = lay
    return lay
_ENDED_BY = lf.ENDED_BY
_ORIGIN = lf.ORIGIN
_R_PROC, _R_STR, _R_FILE, _R_OPS, _R_DIR, _R_END = lf.R_PROC, lf.R_STR, lf.R_FILE, lf.R_OPS, lf.R_DIR, lf.R_END
_STR_KEYS = lf.STR_KEYS


class Parsed:
    __slots__ = ("proc", "strings", "mounts", "files", "ops")

    def __init__(self):
        self.proc = None            # tuple in logformat._PROC_FIELDS order
        self.strings = {}           # name -> str (argv: list of str)
        self.mounts = []
        self.files = []             # (fid, flags, path, values[50]: 30 counters, 10 read bins, 10 write bins)
        self.ops = []               # (count, bytes) per OPS record: packed 48-byte little-endian op records


def parse(buf: bytes) -> Parsed | None:
    """Parse a complete log; None when anything is off (use logformat.read_log then)."""
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
    off, nrec = hsize, 0
    dirs: dict = {}
    fids: set = set()
    start = 0
    rec = _REC.unpack_from
    while off + 8 <= n:
        rtype, _f, length = rec(buf, off)
        p = off + 8
        end = p + length
        if end > n or length & 7:
            return None
        if rtype == _R_FILE:
            if length < 32:
                return None
            fid, flags, nlen, did, nc, nb, _r, mask, wide = _FILEH.unpack_from(buf, p)
            if nc != _NC or nb != lf.NBINS or mask >> _NSLOTS or wide & ~mask or fid in fids:
                return None
            fids.add(fid)
            lay = _LAYOUTS.get((mask, wide)) or _layout(mask, wide)
            st, slots = lay
            ns = p + 32 + st.size
            if ns + nlen > end or did not in dirs:
                return None
            v = list(_ZERO)
            for k, x in zip(slots, st.unpack_from(buf, p + 32)):
                v[k] = x
            if mask >> _FIRST & 1:
                v[_FIRST] += start
            if mask >> _LAST & 1:
                v[_LAST] += start
            name = buf[ns:ns + nlen]
            if wide and max(v) > _I64_MAX or v[_LAST] > _I64_MAX or v[_FIRST] > _I64_MAX or b"\0" in name:
                return None
            out.files.append((fid, flags, dirs[did] + "/" + name.decode("utf-8", "surrogateescape"), v))
        elif rtype == _R_DIR:
            did, dlen = _II.unpack_from(buf, p)
            if 8 + dlen > length or b"\0" in buf[p + 8:p + 8 + dlen]:
                return None
            dirs[did] = buf[p + 8:p + 8 + dlen].decode("utf-8", "surrogateescape")
        elif rtype == _R_STR:
            key, slen = _II.unpack_from(buf, p)
            if 8 + slen > length:
                return None
            raw = buf[p + 8:p + 8 + slen]
            name = _STR_KEYS.get(key, "str%d" % key)
            if name != "argv" and b"\0" in raw:
                return None
            if name == "argv":
                out.strings["argv"] = [a.decode("utf-8", "surrogateescape") for a in raw.split(b"\0")[:-1]] \
                    if raw else []
            elif name == "gfarm_mounts":
                out.mounts.append(raw.decode("utf-8", "surrogateescape"))
            else:
                out.strings[name] = raw.decode("utf-8", "surrogateescape")
        elif rtype == _R_PROC:
            if length < _PROC.size:
                return None
            out.proc = _PROC.unpack_from(buf, p)
            if max(out.proc[i] for i in lf._PROC_U64) > _I64_MAX:
                return None
            start = out.proc[4]     # start_ns: v2 FILE timestamps are relative to it
        elif rtype == _R_OPS:
            count, osize = struct.unpack_from("<IH", buf, p)
            if osize != lf.OP_SIZE or 8 + count * osize != length:
                return None
            out.ops.append((count, buf[p + 8:end]))
        elif rtype == _R_END:
            expect, = struct.unpack_from("<I", buf, p)
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
