"""The shim never changes what a program does: return values, errno, outputs identical traced vs untraced."""
import hashlib
import os
import shutil
import subprocess
import sys

import pytest

from montage_inputs import make_inputs
from mtcio.preload.testing import env_for, logs, prog, run


def _fresh(p):
    shutil.rmtree(p, ignore_errors=True)
    os.makedirs(p)
    return str(p)


def test_return_values_and_errno_identical(tmp_path):
    outs = []
    for mode in ("untraced", "loaded-no-dir", "traced", "traced-ops", "traced-cpu-wait"):
        d = _fresh(tmp_path / "d")
        logdir = _fresh(tmp_path / ("logs-" + mode))
        if mode == "untraced":
            r = run([prog("errno_check"), d])
        elif mode == "loaded-no-dir":
            r = run([prog("errno_check"), d], env_extra={"_loaded_only": True})
            assert "LD_PRELOAD" in env_for(None, _loaded_only=True)
        else:
            extra = {"traced-ops": {"MTCPROF_TRACE": "ops"}, "traced-cpu-wait": {"MTCPROF_CPU_WAIT": "1"}}
            r = run([prog("errno_check"), d], logdir, env_extra=extra.get(mode, {}))
        assert r.returncode == 0 and r.stderr == b"", r.stderr
        outs.append(r.stdout.decode())
        if mode.startswith("traced"):
            (log,) = logs(logdir)
            assert log.complete
            f = next(x for x in log.files if x["path"] == d + "/f")
            assert f["opens"] == 2 and f["creates"] == 1 and f["bytes_written"] == 10 + 4
            assert ("cpu_wait" in log.process) == (mode == "traced-cpu-wait")
        else:
            assert os.listdir(logdir) == []
    assert "errno 4242" in outs[0] and "-> -1 errno 2" in outs[0]      # the script exercises both paths
    assert outs[1:] == [outs[0]] * 4


def _tree(root, n=40):
    os.makedirs(os.path.join(root, "sub"))
    for i in range(n):
        with open(os.path.join(root, "sub" if i % 2 else "", f"f{i}"), "wb") as fh:
            fh.write(os.urandom(100 + 997 * i))


def _digest_tree(root):
    h = {}
    for dp, _, fs in os.walk(root):
        for f in fs:
            p = os.path.join(dp, f)
            h[os.path.relpath(p, root)] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    return h


def test_coreutils_identical_and_counted(tmp_path):
    src = str(tmp_path / "src")
    _tree(src)
    total = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(src) for f in fs)
    results = {}
    for mode in ("untraced", "traced"):
        logdir = _fresh(tmp_path / f"logs-{mode}") if mode == "traced" else None
        dst = str(tmp_path / f"dst-{mode}")
        big = os.path.join(src, "sub", "f39")
        catout = str(tmp_path / f"cat-{mode}")
        r1 = run(["cp", "-r", src, dst], logdir)
        with open(catout, "wb") as fh:
            r2 = run(["cat", big, os.path.join(src, "f0")], logdir, stdout=fh, capture_output=False, stderr=subprocess.PIPE)
        r3 = run(["sha256sum", big, os.path.join(src, "sub", "f1")], logdir)
        r4 = run(["sha256sum"], logdir, input=b"abc\n")
        for r in (r1, r2, r3, r4):
            assert r.returncode == 0 and not r.stderr, r.stderr
        results[mode] = (_digest_tree(dst), open(catout, "rb").read(), r3.stdout, r4.stdout)
        if mode == "traced":
            ls = logs(logdir)
            assert len(ls) == 4
            bycmd = {os.path.basename(l.process["exe"]) + str(len(l.process["argv"])): l for l in ls}
            cp = bycmd["cp4"]
            rd = sum(f["bytes_read"] for f in cp.files if f["path"].startswith(src + "/"))
            wr = sum(f["bytes_written"] for f in cp.files if f["path"].startswith(dst + "/"))
            assert rd == total and wr == total
            assert sum(f["creates"] for f in cp.files if f["path"].startswith(dst + "/")) == 40
            cat = bycmd["cat3"]
            sizes = os.path.getsize(big) + os.path.getsize(os.path.join(src, "f0"))
            out = next(f for f in cat.files if f["path"] == catout)
            assert "inherited" in out["flags"] and out["bytes_written"] == sizes
            assert sum(f["bytes_read"] for f in cat.files if f["path"].startswith(src)) == sizes
            sh = bycmd["sha256sum3"]
            assert next(f for f in sh.files if f["path"] == big)["bytes_read"] == os.path.getsize(big)
    assert results["traced"] == results["untraced"]


PYPROG = r"""
import os, sys, json
d = sys.argv[1]
with open(os.path.join(d, "a.txt"), "w") as f:
    for i in range(1000): f.write(f"line {i}\n")
with open(os.path.join(d, "a.txt")) as f: n = sum(1 for _ in f)
os.rename(os.path.join(d, "a.txt"), os.path.join(d, "b.txt"))
st = os.stat(os.path.join(d, "b.txt"))
try: open(os.path.join(d, "missing"))
except FileNotFoundError as e: err = e.errno
print(json.dumps({"n": n, "size": st.st_size, "err": err, "ls": sorted(os.listdir(d))}))
"""


def test_python_program_identical(tmp_path):
    outs = []
    for mode in ("untraced", "traced"):
        d = _fresh(tmp_path / f"d-{mode}")
        logdir = _fresh(tmp_path / "logs") if mode == "traced" else None
        r = run([sys.executable, "-c", PYPROG, d], logdir)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout)
    assert outs[0] == outs[1]
    (log,) = logs(str(tmp_path / "logs"))
    a = next(f for f in log.files if f["path"].endswith("/a.txt"))
    size = len("".join(f"line {i}\n" for i in range(1000)))
    assert a["bytes_written"] == size and a["bytes_read"] == size and a["creates"] == 1 and a["renames"] == 1


@pytest.mark.skipif(not shutil.which("mProjectPP"), reason="Montage not installed")
def test_mprojectpp_identical(tmp_path):
    inp = make_inputs(str(tmp_path / "in"), n=1, size=48)
    img, tmpl = inp["images"][0], inp["template"]
    outs = {}
    for mode in ("untraced", "traced"):
        logdir = _fresh(tmp_path / "logs") if mode == "traced" else None
        out = str(tmp_path / f"out-{mode}.fits")
        r = run(["mProjectPP", img, out, tmpl], logdir)
        assert r.returncode == 0 and b'stat="OK"' in r.stdout, r.stdout
        outs[mode] = (open(out, "rb").read(), open(out.replace(".fits", "_area.fits"), "rb").read())
    assert outs["traced"] == outs["untraced"]
    (log,) = logs(str(tmp_path / "logs"))
    out = str(tmp_path / "out-traced.fits")
    f_out = next(f for f in log.files if f["path"] == out)
    f_area = next(f for f in log.files if f["path"] == out.replace(".fits", "_area.fits"))
    assert f_out["bytes_written"] == os.path.getsize(out) and f_out["creates"] == 1
    assert f_area["bytes_written"] == os.path.getsize(out.replace(".fits", "_area.fits"))
    f_in = next(f for f in log.files if f["path"] == img)
    assert f_in["max_offset"] == os.path.getsize(img) and "stdio" in f_in["flags"]
    assert f_in["bytes_read"] >= os.path.getsize(img)
