"""The shim in hostile or unusual situations: it records the truth or marks what it cannot know, never writes into
the program's files, keeps its log through chroot and setuid, and refuses a log folder others control."""
import os
import re

import pytest

from mtcio.preload.testing import check_untraced, log_paths, logs, prog, run

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (chown, setuid, chroot)")
NOBODY = 65534


def _logdir(tmp_path, name="logs"):
    d = tmp_path / name
    d.mkdir(mode=0o700)
    return d


def test_relative_open_under_a_cwd_longer_than_path_max_is_marked_not_misplaced(tmp_path):
    d, logdir = tmp_path / "d", _logdir(tmp_path)
    d.mkdir()
    r = run([prog("hardening"), "longcwd", str(d)], str(logdir))
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    [log] = logs(str(logdir))
    assert log.file_by_path("/data") is None
    written = [f for f in log.files if f["bytes_written"]]
    assert len(written) == 1
    st = os.stat(d)   # the deepest folder's identity is not known here; its stand-in has the documented form
    assert re.fullmatch(r"\?cwd=\d+:\d+/data", written[0]["path"]), written[0]["path"]
    assert written[0]["bytes_written"] == 10 and written[0]["creates"] == 1
    assert str(st.st_dev) == written[0]["path"][5:].split(":")[0]


@pytest.mark.parametrize("value, used", [("384307168202282326", 1 << 30), ("99999999999999999999999", 1 << 30),
                                         ("abc", 1 << 22), ("-1", 1 << 22), ("12x", 1 << 22)])
def test_trace_max_parsed_strictly(tmp_path, value, used):
    d, logdir = tmp_path / "d", _logdir(tmp_path)
    d.mkdir()
    # 384307168202282326 * 48 wraps to 32 bytes: the old shim reserved one page for 302 ops and died of SIGSEGV
    r = run([prog("hardening"), "writes", str(d)], str(logdir),
            env_extra={"MTCPROF_TRACE": "ops", "MTCPROF_TRACE_MAX": value})
    assert r.returncode == 0, r
    lines = r.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"mtcprof: warning: MTCPROF_TRACE_MAX={value} ") \
        and lines[0].endswith(f"; using {used}"), lines
    [log] = logs(str(logdir))
    assert log.process["trace_ops"] is True and log.process["ops_dropped"] == 0
    assert log.process["ops_traced"] == len(log.ops) == 302


def test_trace_max_valid_values_quiet(tmp_path):
    d, logdir = tmp_path / "d", _logdir(tmp_path)
    d.mkdir()
    r = run([prog("scripted"), str(d)], str(logdir), env_extra={"MTCPROF_TRACE": "ops", "MTCPROF_TRACE_MAX": "5"})
    assert r.returncode == 0 and r.stderr == b""
    [log] = logs(str(logdir))
    assert log.process["ops_traced"] == 5 and log.process["ops_dropped"] > 0


def test_warning_never_written_into_a_data_file_on_fd_2(tmp_path):
    logdir, data = _logdir(tmp_path), tmp_path / "data.txt"
    r = run([prog("hardening"), "stderr", str(data), str(logdir)], str(logdir))
    assert r.returncode == 0
    assert data.read_bytes() == b"DATA\n"
    assert not logdir.exists()


def test_warning_still_reaches_the_original_stderr(tmp_path):
    logdir = _logdir(tmp_path)
    r = run(["sh", "-c", f"rmdir {logdir}"], str(logdir))
    assert r.returncode == 0
    lines = r.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mtcprof: warning: cannot create log"), lines


@root_only
def test_log_kept_after_setuid(tmp_path):
    d, logdir = tmp_path / "d", _logdir(tmp_path)
    d.mkdir()
    r = run([prog("hardening"), "setuid", str(d)], str(logdir))
    assert r.returncode == 0, r.stderr
    [path] = log_paths(str(logdir))
    lines = r.stderr.decode().splitlines()
    assert lines == [f"mtcprof: warning: setgid() during the run: log written to {path} "
                     "through the folder and file opened before it"]
    assert sorted(os.listdir(logdir)) == [os.path.basename(path)]
    [log] = logs(str(logdir))
    assert log.complete and log.process["exit_status"] == 0
    f = log.file_by_path(str(d / "f"))
    assert f["bytes_written"] == 30 and f["writes"] == 2 and f["closes"] == 1
    assert os.stat(path).st_mode & 0o777 == 0o600 and os.stat(path).st_uid == 0


@root_only
def test_setuid_that_changes_nothing_leaves_no_trace(tmp_path):
    d, logdir = tmp_path / "d", _logdir(tmp_path)
    d.mkdir()
    r = run([prog("hardening"), "setsame", str(d)], str(logdir))
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    assert len(os.listdir(logdir)) == 1
    [log] = logs(str(logdir))
    assert log.complete and log.file_by_path(str(d / "f"))["bytes_written"] == 4


@root_only
def test_log_kept_after_chroot_with_paths_seen_from_outside(tmp_path):
    jail, logdir = tmp_path / "jail", _logdir(tmp_path)
    jail.mkdir()
    exe = prog("hardening")
    r = run([exe, "chroot", str(jail)], str(logdir))
    assert r.returncode == 0, r.stderr
    [path] = log_paths(str(logdir))
    assert r.stderr.decode().splitlines() == [
        f"mtcprof: warning: chroot() during the run: log written to {path} outside the new root "
        "(paths after it have the new root in front)"]
    assert not any(n.endswith(".mtclog") for _, _, fs in os.walk(jail) for n in fs)
    [log] = logs(str(logdir))
    got = {f["path"]: f["bytes_written"] for f in log.files if f["bytes_written"]}
    assert got == {str(jail / "pre"): 3, str(jail / "x"): 7, str(jail / "y"): 5}
    assert log.process["exe"] == exe


@pytest.mark.parametrize("host, start", [(".hidden", "_.hidden."), ("..", "_..."), ("a.b", "a.b.")])
def test_log_name_never_hidden(tmp_path, host, start):
    d, logdir = tmp_path / "d", _logdir(tmp_path)
    d.mkdir()
    r = run([prog("scripted"), str(d)], str(logdir), env_extra={"MTCPROF_HOST": host})
    assert r.returncode == 0 and r.stderr == b""
    [name] = os.listdir(logdir)
    assert name.startswith(start) and name.endswith(".mtclog")
    [log] = logs(str(logdir))
    assert log.process["host"] == host


def _refused(tmp_path, logdir, reason):
    """The program runs as it does untraced, with one warning naming the problem, and no log is written."""
    assert check_untraced(tmp_path, logdir) == [
        f"mtcprof: warning: log folder {reason} {logdir}: errno 1 (running untraced)"]
    assert not [n for n in os.listdir(os.path.realpath(logdir)) if n.endswith((".mtclog", ".tmp"))]


def test_log_folder_writable_by_others_refused(tmp_path):
    logdir = _logdir(tmp_path)
    os.chmod(logdir, 0o777)
    _refused(tmp_path, logdir, "writable by others:")


@root_only
@pytest.mark.parametrize("mode", [0o700, 0o1777])
def test_log_folder_of_another_user_refused(tmp_path, mode):
    logdir = _logdir(tmp_path)
    os.chmod(logdir, mode)
    os.chown(logdir, NOBODY, NOBODY)
    _refused(tmp_path, logdir, "owned by another user:")


@root_only
def test_log_folder_symlink_of_another_user_refused(tmp_path):
    target = _logdir(tmp_path, "target")
    link = tmp_path / "link"
    link.symlink_to(target)
    os.lchown(link, NOBODY, NOBODY)
    _refused(tmp_path, link, "is a symlink owned by another user:")


def test_sticky_shared_folder_accepted(tmp_path):
    logdir = _logdir(tmp_path)
    os.chmod(logdir, 0o1777)
    d = tmp_path / "d"
    d.mkdir()
    r = run([prog("scripted"), str(d)], str(logdir))
    assert r.returncode == 0 and r.stderr == b""
    assert len(log_paths(str(logdir))) == 1
