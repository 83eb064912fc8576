"""mProjectPP on a gfarm2fs mount of the testbed, traced: bytes read cover the input exactly, bytes written equal
the output files' sizes, and the log maps the paths onto the mount."""
import os
import shutil
import tempfile

import pytest

from montage_inputs import make_inputs
from mtcio.db.logformat import OP_CODES
from mtcio.preload.testing import LIB, ensure_built, logs

pytestmark = pytest.mark.testbed


def _covered(ops, fid):
    """Distinct bytes covered by the successful read ops of file fid (union of [offset, offset+length))."""
    sel = ops[(ops["file"] == fid) & (ops["op"] == OP_CODES["read"]) & (ops["err"] == 0) & (ops["length"] > 0)]
    iv = sorted(zip(sel["offset"].tolist(), (sel["offset"] + sel["length"]).tolist()))
    total, end = 0, -1
    for a, b in iv:
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


@pytest.mark.skipif(not shutil.which("mProjectPP"), reason="Montage not installed")
def test_mprojectpp_on_gfarm2fs(testbed):
    ensure_built()
    host = testbed.hosts[0]
    mnt = testbed.mount(host)
    share = tempfile.mkdtemp(prefix="mtcprof-gfarm.")       # readable by the testbed user
    try:
        os.chmod(share, 0o755)
        lib = os.path.join(share, "libmtcprof.so")
        shutil.copy(LIB, lib)
        inp = make_inputs(os.path.join(share, "in"), n=1, size=64)
        for dp, _, fs in os.walk(share):
            os.chmod(dp, 0o755)
            for f in fs:
                os.chmod(os.path.join(dp, f), 0o644)
        logdir = os.path.join(share, "logs")
        os.mkdir(logdir)
        os.chmod(logdir, 0o1777)
        work = f"{mnt}/mtcprof-test-{os.getpid()}"
        testbed.exec(host, ["mkdir", "-p", work])
        img, tmpl = f"{work}/in.fits", f"{work}/template.hdr"
        testbed.exec(host, ["cp", inp["images"][0], img])
        testbed.exec(host, ["cp", inp["template"], tmpl])
        in_size = os.path.getsize(inp["images"][0])

        traced = testbed.exec(host, ["env", f"LD_PRELOAD={lib}", f"MTCPROF_DIR={logdir}", "MTCPROF_TASK=proj-0",
                                     "MTCPROF_STAGE=mProjectPP", "MTCPROF_TRACE=ops",
                                     "mProjectPP", img, f"{work}/out.fits", tmpl])
        assert 'stat="OK"' in traced.stdout, traced.stdout + traced.stderr
        plain = testbed.exec(host, ["mProjectPP", img, f"{work}/ref.fits", tmpl])
        assert 'stat="OK"' in plain.stdout
        testbed.exec(host, ["cmp", f"{work}/out.fits", f"{work}/ref.fits"])
        testbed.exec(host, ["cmp", f"{work}/out_area.fits", f"{work}/ref_area.fits"])
        sizes = {n: int(testbed.exec(host, ["stat", "-c", "%s", f"{work}/{n}"]).stdout)
                 for n in ("out.fits", "out_area.fits")}

        (log,) = logs(logdir)
        p = log.process
        assert log.complete and p["task"] == "proj-0" and p["stage"] == "mProjectPP"
        assert p["host"] == host and mnt in p["gfarm_mounts"]
        f_in = log.file_by_path(img)
        assert f_in is not None and f_in["max_offset"] == in_size
        assert _covered(log.ops, f_in["id"]) == in_size          # every input byte read, none missed
        assert f_in["bytes_read"] >= in_size and f_in["writes"] == 0
        for n, size in sizes.items():
            f = log.file_by_path(f"{work}/{n}")
            assert f["bytes_written"] == size and f["creates"] == 1 and f["reads"] == 0, n
        assert log.file_by_path(tmpl)["bytes_read"] > 0
        io_files = [f["path"] for f in log.files
                    if (f["bytes_read"] or f["bytes_written"]) and "inherited" not in f["flags"]]
        assert sorted(io_files) == sorted([img, tmpl, f"{work}/out.fits", f"{work}/out_area.fits"])
        testbed.exec(host, ["rm", "-rf", work])
    finally:
        shutil.rmtree(share, ignore_errors=True)
