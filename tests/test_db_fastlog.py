"""db/fastlog.py (ingest's fast reader) agrees with the reference reader db/logformat.py on real shim logs, and
declines (returns None) on anything that is not a complete well-formed log."""
import os

import numpy as np

from mtcio.db import fastlog
from mtcio.db import logformat as lf
from mtcio.preload.testing import log_paths, prog, run


def _logs(tmp_path):
    d, logs = tmp_path / "data", tmp_path / "logs"
    d.mkdir(), logs.mkdir()
    assert run([prog("scripted"), str(d)], str(logs), env_extra={"MTCPROF_TRACE": "ops",
                                                                "MTCPROF_TASK": "x"}).returncode == 0
    (d / "in").write_bytes(b"abc" * 1000)
    assert run(["sh", "-c", f"cat {d}/in | wc -c > {d}/o; cat {d}/in > /dev/null"], str(logs)).returncode == 0
    return log_paths(str(logs))


def test_same_as_reference(tmp_path):
    paths = _logs(tmp_path)
    assert len(paths) >= 4
    for p in paths:
        buf = open(p, "rb").read()
        fast = fastlog.parse(buf)
        ref = lf.read_log(p, strict=True)
        assert fast is not None, p
        assert fastlog.proc_dict(fast) == ref.process
        assert len(fast.files) == len(ref.files)
        for (fid, flags, path, vals), f in zip(fast.files, ref.files):
            assert (fid, path) == (f["id"], f["path"])
            assert flags == sum(b for b, n in lf.FILE_FLAGS.items() if n in f["flags"])
            assert list(vals) == [f[c] for c in lf.COUNTERS] + f["hist_read"] + f["hist_write"]
        ops = b"".join(d for _, d in fast.ops)
        assert sum(c for c, _ in fast.ops) == len(ref.ops)
        assert np.array_equal(np.frombuffer(ops, dtype=lf.OP_DTYPE), ref.ops)


def test_declines_bad_logs(tmp_path):
    paths = _logs(tmp_path)
    buf = open(max(paths, key=os.path.getsize), "rb").read()
    for bad in (buf[:-8], buf[:-17], buf[:100], b"", b"x" * 64, buf + b"\0" * 8, buf[:8] + b"\x09" + buf[9:]):
        assert fastlog.parse(bad) is None


def _fields(pr):
    return None if pr is None else (pr.proc, pr.strings, pr.mounts, pr.files, pr.ops)


def test_c_reader_is_built_and_used():
    # `make` builds db/fastlog_c.c; without it ingest would silently run ~4x slower
    assert fastlog._C is not None


def test_c_reader_same_as_python_reader_on_real_and_damaged_logs(tmp_path):
    import random
    paths = _logs(tmp_path)
    bufs = [open(p, "rb").read() for p in paths]
    for b in bufs:
        got = _fields(fastlog.parse(b))
        assert got is not None and got == _fields(fastlog.parse_py(b))
    rnd = random.Random(56)
    declined = 0
    for _ in range(4000):
        b = bytearray(rnd.choice(bufs))
        how = rnd.randrange(4)
        if how == 0:
            b = b[:rnd.randrange(len(b))]
        elif how == 1:
            b[rnd.randrange(len(b))] ^= 1 << rnd.randrange(8)
        elif how == 2:
            for _ in range(3):
                b[rnd.randrange(len(b))] = rnd.randrange(256)
        else:
            i = rnd.randrange(0, len(b) - 8, 8)
            b[i:i + 8] = rnd.randbytes(8)
        c, py = _fields(fastlog.parse(bytes(b))), _fields(fastlog.parse_py(bytes(b)))
        assert c == py
        declined += c is None
    # both kinds occur: damage the readers must decline, and damage inside values they take as they are
    assert 1000 < declined < 3900
