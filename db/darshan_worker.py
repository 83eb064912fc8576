"""Reads Darshan logs with PyDarshan's darshan-util bindings in a separate process (started by db/darshan_log.py).

darshan-util aborts the whole process on some damaged logs (a double free in darshan_log_close after a failed
read, measured with PyDarshan 3.5.0 on truncated copies of its own example logs) and reports other damage only
by printing "Error: ..." on stderr while returning fewer records.  So each log is read here, never in ingest:
this process's death costs one log, and the messages darshan-util prints are caught on fd 2 and sent back.

Protocol on stdin/stdout: the parent writes a request (8-byte little-endian length + the log's path as bytes);
this process answers with 8-byte length + a pickled dict (read_log's result).  After a log with an error the
handle is not closed (closing is what crashes) and the process exits; the parent starts a new one.
"""
from __future__ import annotations

import os
import pickle
import struct
import sys

MODULES = ("POSIX", "STDIO")      # the modules whose records become file_access rows
DXT_MODULE = "DXT_POSIX"
_LEN = struct.Struct("<Q")
_SEG_DTYPE = [("offset", "<i8"), ("length", "<i8"), ("start", "<f8"), ("end", "<f8")]   # struct segment_info


def _messages() -> list[str]:
    """darshan-util's messages printed on fd 2 since the last _clear_messages()."""
    size = os.lseek(2, 0, os.SEEK_END)
    text = os.pread(2, min(size, 1 << 16), 0).decode("utf-8", "replace") if size else ""
    return [ln.strip() for ln in text.splitlines() if ln.strip()]


def _clear_messages() -> None:
    try:
        os.ftruncate(2, 0)
        os.lseek(2, 0, os.SEEK_SET)
    except OSError:         # fd 2 is not a file (run by hand): messages are then not collected
        pass


def _text(cdata, ffi) -> str:
    return ffi.string(cdata).decode("utf-8", "surrogateescape")


def read_log(path: bytes) -> dict:
    """Everything ingest needs from one log, as plain Python / numpy values.  'errors': darshan-util's failures
    (a return code or its printed messages); whatever was read before them is returned too."""
    import numpy as np
    from darshan.backend import cffi_backend as cb
    ffi, lib = cb.ffi, cb.libdutil
    out = {"errors": [], "modules": {}, "records": {}, "dxt": [], "names": {}, "closed": False}
    _clear_messages()
    h = lib.darshan_log_open(path)
    if h == ffi.NULL:
        out["errors"] = _messages() or ["not a Darshan log (darshan-util cannot open it)"]
        out["open_failed"] = True
        return out
    jobrec = ffi.new("struct darshan_job *")
    if lib.darshan_log_get_job(h, jobrec) < 0:
        out["errors"].append("cannot read the job record")
        return out
    j = jobrec[0]
    runtime = ffi.new("double *")      # darshan-util's: end - start, + 1 s for logs of second resolution
    lib.darshan_log_get_job_runtime(h, j, runtime)
    meta = {}
    for kv in _text(j.metadata, ffi).split("\n"):
        if "=" in kv:
            k, v = kv.split("=", 1)
            meta[k] = v
    out["job"] = {"uid": j.uid, "start_sec": j.start_time_sec, "start_nsec": j.start_time_nsec,
                  "end_sec": j.end_time_sec, "end_nsec": j.end_time_nsec, "nprocs": j.nprocs, "jobid": j.jobid,
                  "run_time": runtime[0],
                  "metadata": meta, "log_ver": ffi.string(ffi.cast("char *", h)).decode("ascii", "replace")}
    exe = ffi.new("char[]", 4096)
    out["exe"] = _text(exe, ffi) if lib.darshan_log_get_exe(h, exe) >= 0 else ""
    mnts, cnt = ffi.new("struct darshan_mnt_info **"), ffi.new("int *")
    out["mounts"] = []
    if lib.darshan_log_get_mounts(h, mnts, cnt) >= 0:
        out["mounts"] = [(_text(mnts[0][i].mnt_path, ffi), _text(mnts[0][i].mnt_type, ffi)) for i in range(cnt[0])]
        lib.darshan_free(mnts[0])
    mods, cnt = ffi.new("struct darshan_mod_info **"), ffi.new("int *")
    lib.darshan_log_get_modules(h, mods, cnt)
    for i in range(cnt[0]):
        m = mods[0][i]
        out["modules"][ffi.string(m.name).decode("ascii", "replace")] = {
            "idx": m.idx, "len": m.len, "ver": m.ver, "partial": bool(m.partial_flag)}
    if cnt[0]:
        lib.darshan_free(mods[0])
    nrecs, cnt = ffi.new("struct darshan_name_record **"), ffi.new("int *")
    lib.darshan_log_get_name_records(h, nrecs, cnt)
    for i in range(cnt[0]):
        out["names"][nrecs[0][i].id] = _text(nrecs[0][i].name, ffi)
        lib.darshan_free(nrecs[0][i].name)
    if cnt[0]:
        lib.darshan_free(nrecs[0])
    for mod in MODULES:
        info = out["modules"].get(mod)
        if info is None:
            continue
        typ = cb._structdefs[mod]
        ids, ranks, cs, fs = [], [], [], []
        while True:
            buf = ffi.new("void **")       # NULL: darshan-util allocates (it would write into a non-NULL one)
            r = lib.darshan_log_get_record(h, info["idx"], buf)
            if r < 0:      # the module's data fails to inflate: its records read so far may be garbage too
                out["errors"].append(f"cannot read the {mod} records (none of them kept)")
                ids, ranks, cs, fs = [], [], [], []
                break
            if r == 0:
                break
            rb = ffi.cast(typ, buf)
            ids.append(rb[0].base_rec.id)
            ranks.append(rb[0].base_rec.rank)
            cs.append(np.frombuffer(ffi.buffer(rb[0].counters), dtype=np.int64).copy())
            fs.append(np.frombuffer(ffi.buffer(rb[0].fcounters), dtype=np.float64).copy())
            lib.darshan_free(buf[0])
        cn, fn = list(cb.counter_names(mod)), list(cb.fcounter_names(mod))
        out["records"][mod] = {
            "id": np.array(ids, dtype=np.uint64), "rank": np.array(ranks, dtype=np.int64),
            "counters": np.array(cs, dtype=np.int64).reshape(len(ids), len(cn)),
            "fcounters": np.array(fs, dtype=np.float64).reshape(len(ids), len(fn)),
            "counter_names": cn, "fcounter_names": fn}
    info = out["modules"].get(DXT_MODULE)
    if info is not None:
        head = ffi.sizeof("struct dxt_file_record")
        while True:
            buf = ffi.new("void **")
            r = lib.darshan_log_get_record(h, info["idx"], buf)
            if r < 0:
                out["errors"].append(f"cannot read the {DXT_MODULE} records (none of them kept)")
                out["dxt"] = []
                break
            if r == 0:
                break
            fr = ffi.cast("struct dxt_file_record **", buf)[0]
            nw, nr = fr.write_count, fr.read_count
            segs = np.frombuffer(ffi.buffer(ffi.cast("char *", buf[0]) + head, 32 * (nw + nr)),
                                 dtype=_SEG_DTYPE).copy()
            out["dxt"].append({"id": fr.base_rec.id, "rank": fr.base_rec.rank,
                               "hostname": _text(fr.hostname, ffi), "writes": segs[:nw], "reads": segs[nw:]})
            lib.darshan_free(buf[0])
    out["errors"] += [m for m in _messages() if m.startswith("Error")]
    if not out["errors"]:
        lib.darshan_log_close(h)       # after an error darshan-util's close may free twice: left to the exit
        out["closed"] = True
    return out


def main() -> None:
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)          # darshan-util prints some messages on stdout: keep them off the protocol pipe
    try:
        import darshan.backend.cffi_backend  # noqa: F401 - only whether it imports
    except ImportError as e:
        res = {"no_darshan": str(e)}
        blob = pickle.dumps(res)
        proto_out.write(_LEN.pack(len(blob)) + blob)
        proto_out.flush()
        return
    while True:
        head = proto_in.read(_LEN.size)
        if len(head) < _LEN.size:
            return
        path = proto_in.read(_LEN.unpack(head)[0])
        try:
            res = read_log(path)
        except Exception as e:    # noqa: BLE001 - a decoding surprise on a damaged log: that log's error
            res = {"errors": [f"unreadable ({type(e).__name__})"], "modules": {}, "records": {}, "dxt": [],
                   "names": {}, "closed": False}
        blob = pickle.dumps(res, protocol=pickle.HIGHEST_PROTOCOL)
        proto_out.write(_LEN.pack(len(blob)) + blob)
        proto_out.flush()
        if not res.get("closed"):
            os._exit(0)        # a handle left open after an error: start afresh for the next log


if __name__ == "__main__":
    main()
    sys.exit(0)
