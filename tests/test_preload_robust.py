"""A bad log folder never changes the program: it runs untraced with exactly one warning on stderr."""
import os

import pytest

from mtcio.preload.testing import check_untraced, logs, prog, run

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to mount a tmpfs")


def test_missing_log_dir(tmp_path):
    check_untraced(tmp_path, tmp_path / "nope")
    assert not (tmp_path / "nope").exists()


def test_log_dir_is_a_file(tmp_path):
    (tmp_path / "afile").write_text("x")
    check_untraced(tmp_path, tmp_path / "afile")
    assert (tmp_path / "afile").read_text() == "x"


@root_only
def test_read_only_log_dir(tmp_path, tmpfs):
    mnt = tmpfs("ro,size=1m")
    check_untraced(tmp_path, mnt)


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
    lines = check_untraced(tmp_path, mnt)
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


def test_fd_opened_by_untraced_route_is_adopted(tmp_path):
    """An fd the shim did not see opened (here a raw openat syscall) is looked at on its first traced use."""
    data, logdir = tmp_path / "data", tmp_path / "logs"
    data.write_bytes(b"q" * 1234)
    logdir.mkdir()
    r = run([prog("rawopen"), str(data)], str(logdir))
    assert r.returncode == 0 and r.stdout.strip() == b"1234"
    (log,) = logs(str(logdir))
    f = log.file_by_path(str(data))
    assert f["flags"] == ["inherited"] and f["opens"] == 0 and f["closes"] == 1
    assert f["bytes_read"] == 1234 and f["reads"] == 14       # 13 of 100 bytes, one of 34, then EOF


def test_gfarm_mounts_from_environment(tmp_path):
    """MTCPROF_GFARM_MOUNTS (set once by `mtcprof run`) replaces reading /proc/self/mounts in every process."""
    logdir = tmp_path / "logs"
    logdir.mkdir()
    r = run(["true"], str(logdir), env_extra={"MTCPROF_GFARM_MOUNTS": "/gfarm:/mnt/g f"})
    assert r.returncode == 0
    (log,) = logs(str(logdir))
    assert log.process["gfarm_mounts"] == ["/gfarm", "/mnt/g f"]


def test_cpus_online_from_environment(tmp_path):
    """MTCPROF_CPUS_ONLINE (set once by `mtcprof run`) gives cpu_clock's CPU count instead of reading sysfs in every
    process; a value that is not a CPU list is ignored (the sysfs file is read as without it)."""
    with open("/sys/devices/system/cpu/online") as fh:
        n_sys = sum(int(b) - int(a) + 1 for a, _, b in (r.partition("-") if "-" in r else (r, "", r)
                                                        for r in fh.read().strip().split(",")))
    for value, cpus in (("0-3,7", 5), ("12", 1), ("0-", n_sys), ("x1", n_sys), ("", n_sys)):
        logdir = tmp_path / f"logs{len(list(tmp_path.iterdir()))}"
        logdir.mkdir()
        r = run(["true"], str(logdir), env_extra={"MTCPROF_CPUS_ONLINE": value})
        assert r.returncode == 0 and r.stderr == b""
        (log,) = logs(str(logdir))
        assert log.process["cpu_clock"].split(" ")[0] == str(cpus), (value, log.process["cpu_clock"])


def test_shim_env_lists_online_cpus(tmp_path):
    from mtcio.preload.run import cpus_online, shim_env
    f = tmp_path / "online"
    f.write_text("0-1,4\n")
    assert cpus_online(str(f)) == "0-1,4" and cpus_online(str(tmp_path / "missing")) is None
    with open("/sys/devices/system/cpu/online") as fh:
        assert shim_env({"PATH": "/bin"}, dir=str(tmp_path))["MTCPROF_CPUS_ONLINE"] == fh.read().strip()
    assert shim_env({"MTCPROF_CPUS_ONLINE": "0"}, dir=str(tmp_path))["MTCPROF_CPUS_ONLINE"] == "0"


def test_shim_env_lists_gfarm_mounts(tmp_path):
    from mtcio.preload.run import gfarm_mounts, shim_env
    m = tmp_path / "mounts"
    m.write_text("gfarm2fs /mnt/g\\040x fuse.gfarm2fs rw 0 0\n/dev/vda / ext4 rw 0 0\ngfarm2fs /gfarm fuse.gfarm2fs rw 0 0\n")
    assert gfarm_mounts(str(m)) == ["/mnt/g x", "/gfarm"]
    env = shim_env({"PATH": "/bin"}, dir=str(tmp_path))
    assert env["MTCPROF_GFARM_MOUNTS"] == ":".join(gfarm_mounts())
    assert shim_env({"MTCPROF_GFARM_MOUNTS": "/x"}, dir=str(tmp_path))["MTCPROF_GFARM_MOUNTS"] == "/x"
