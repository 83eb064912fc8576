"""A bad log folder never changes the program: it runs untraced with exactly one warning on stderr."""
import os
import subprocess

import pytest

from mtcio.preload.testing import prog, run

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to mount a tmpfs")


def _check_untraced(tmp_path, logdir, expect_warning=True):
    d_un, d_tr = tmp_path / "un", tmp_path / "tr"
    d_un.mkdir(), d_tr.mkdir()
    ref = run([prog("errno_check"), str(d_un)])
    r = run([prog("errno_check"), str(d_tr)], str(logdir))
    assert r.returncode == ref.returncode == 0
    assert r.stdout.decode().replace(str(d_tr), "D") == ref.stdout.decode().replace(str(d_un), "D")
    lines = r.stderr.decode().splitlines()
    if expect_warning:
        assert len(lines) == 1 and lines[0].startswith("mtcprof: warning:") and "untraced" in lines[0], lines
    return lines


def test_missing_log_dir(tmp_path):
    _check_untraced(tmp_path, tmp_path / "nope")
    assert not (tmp_path / "nope").exists()


def test_log_dir_is_a_file(tmp_path):
    (tmp_path / "afile").write_text("x")
    _check_untraced(tmp_path, tmp_path / "afile")
    assert (tmp_path / "afile").read_text() == "x"


@pytest.fixture
def tmpfs(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    mounted = []

    def mount(opts):
        subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(mnt)], check=True)
        mounted.append(mnt)
        return mnt
    yield mount
    for m in mounted:
        subprocess.run(["umount", str(m)], check=False)


@root_only
def test_read_only_log_dir(tmp_path, tmpfs):
    mnt = tmpfs("ro,size=1m")
    _check_untraced(tmp_path, mnt)


@root_only
def test_disk_full(tmp_path, tmpfs):
    mnt = tmpfs("size=64k")
    fd = os.open(mnt / "filler", os.O_CREAT | os.O_WRONLY)
    try:
        while os.write(fd, b"\0" * 4096) > 0:
            pass
    except OSError:
        pass
    os.close(fd)
    lines = _check_untraced(tmp_path, mnt)
    assert "cannot" in lines[0]
    assert sorted(os.listdir(mnt)) == ["filler"]          # the partial log was removed


def test_process_tree_with_bad_dir_warns_once_per_process(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    r = run([prog("proctree"), str(d)], str(tmp_path / "nope"))
    assert r.returncode == 0
    lines = r.stderr.decode().splitlines()
    # one warning per process image (7 exec'd images; the plain fork child shares its parent's)
    assert len(lines) == 7 and all(l.startswith("mtcprof: warning: log folder missing") for l in lines)


def test_shim_loaded_without_dir_is_silent(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    r = run([prog("proctree"), str(d)], env_extra={"_loaded_only": True})
    assert r.returncode == 0 and r.stderr == b""
