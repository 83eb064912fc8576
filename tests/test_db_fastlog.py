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
