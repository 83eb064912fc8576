"""Log format: truncation and corruption are detected with a byte offset and the valid prefix is readable;
`mtcprof run` / `mtcprof dump` work end to end."""
import json
import os
import struct
import subprocess
import sys

import pytest

from mtcio.db.logformat import LogError, parse, read_log
from mtcio.preload.testing import log_paths, prog, run

MTCPROF = [sys.executable, "-c", "import sys; from mtcio.cli import mtcprof; sys.exit(mtcprof())"]


@pytest.fixture(scope="module")
def good_log(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fmt")
    d, logdir = tmp / "d", tmp / "logs"
    d.mkdir(), logdir.mkdir()
    r = run([prog("scripted"), str(d)], str(logdir), env_extra={"MTCPROF_TRACE": "ops"})
    assert r.returncode == 0
    (p,) = log_paths(str(logdir))
    return open(p, "rb").read()


def test_header_and_records(good_log):
    assert good_log[:8] == b"MTCPLOG\0"
    assert struct.unpack_from("<HHI", good_log, 8) == (3, 32, 0x01020304)
    log = parse(good_log, strict=True)
    assert log.complete and log.version == 3 and len(log.files) == 10 and len(log.ops) > 50


def test_every_truncation_is_detected_and_prefix_readable(good_log):
    full = parse(good_log, strict=True)
    n = len(good_log)
    prev_files = 0
    for cut in list(range(0, 200)) + list(range(200, n, 7)) + [n - 1]:
        buf = good_log[:cut]
        log = parse(buf)
        assert not log.complete and log.error is not None, cut
        assert 0 <= log.error.offset <= cut
        assert f"at byte offset {log.error.offset}" in str(log.error)
        with pytest.raises(LogError):
            parse(buf, strict=True)
        # the prefix is a prefix of the full log
        assert log.files == full.files[:len(log.files)]
        assert len(log.files) >= prev_files
        prev_files = len(log.files)
        if log.process.get("pid") is not None:
            assert log.process["pid"] == full.process["pid"]
        assert (log.ops == full.ops[:len(log.ops)]).all()


def test_corruption_is_reported(good_log):
    bad = bytearray(good_log)
    bad[0:8] = b"NOTALOG\0"
    assert "bad magic" in str(parse(bytes(bad)).error) and parse(bytes(bad)).error.offset == 0
    bad = bytearray(good_log)
    bad[8] = 9
    assert "unsupported format version 9" in str(parse(bytes(bad)).error)
    bad = bytearray(good_log)
    struct.pack_into("<H", bad, 32, 77)            # type of the first record
    e = parse(bytes(bad)).error
    assert e.offset == 32 and "unknown record type 77" in str(e)
    e = parse(good_log + b"\0" * 8).error
    assert e.offset == len(good_log) and "trailing" in str(e)


def test_read_log_file_and_empty(tmp_path, good_log):
    p = tmp_path / "x.mtclog"
    p.write_bytes(good_log[:-16])
    log = read_log(p)
    assert not log.complete and "truncated end record" in str(log.error)
    assert log.process["pid"] > 0 and len(log.ops) == len(parse(good_log).ops)
    (tmp_path / "e.mtclog").write_bytes(b"")
    assert read_log(tmp_path / "e.mtclog").error.offset == 0


def test_cli_run_and_dump(tmp_path):
    logdir = tmp_path / "logs"
    out = tmp_path / "copy"
    r = subprocess.run(MTCPROF + ["run", "--dir", str(logdir), "--task", "T9", "--stage", "cp", "--run", "R",
                                  "--trace-ops", "--", "cp", "/etc/hostname", str(out)], capture_output=True)
    assert r.returncode == 0, r.stderr
    (p,) = log_paths(str(logdir))
    r = subprocess.run(MTCPROF + ["dump", p], capture_output=True, text=True)
    assert r.returncode == 0
    lines = [json.loads(l) for l in r.stdout.splitlines()]
    assert lines[0]["type"] == "process" and lines[0]["task"] == "T9" and lines[0]["stage"] == "cp"
    assert lines[0]["argv"] == ["cp", "/etc/hostname", str(out)] and lines[0]["run"] == "R"
    assert lines[-1] == {"type": "end", "log": p, "complete": True}
    f = [l for l in lines if l["type"] == "file" and l["path"] == str(out)]
    assert len(f) == 1 and f[0]["bytes_written"] == os.path.getsize("/etc/hostname")
    assert any(l["type"] == "op" and l["op"] == "write" for l in lines)
    # a truncated log: valid prefix, then an error line with the byte offset, exit status 1
    data = open(p, "rb").read()
    t = tmp_path / "trunc.mtclog"
    t.write_bytes(data[:len(data) // 2])
    r = subprocess.run(MTCPROF + ["dump", "--no-ops", str(t)], capture_output=True, text=True)
    assert r.returncode == 1
    last = json.loads(r.stdout.splitlines()[-1])
    assert last["type"] == "error" and 0 < last["offset"] <= len(data) // 2
    assert json.loads(r.stdout.splitlines()[0])["type"] == "process"


def test_cli_help_and_exit_status(tmp_path):
    r = subprocess.run(MTCPROF + ["--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "run" in r.stdout and "dump" in r.stdout
    r = subprocess.run(MTCPROF + ["run", "--dir", str(tmp_path), "--", "sh", "-c", "exit 3"], capture_output=True)
    assert r.returncode == 3
    r = subprocess.run(MTCPROF + ["run", "--dir", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2 and "no command" in r.stderr


@pytest.mark.parametrize("version", [1, 2])
def test_older_logs_still_read(tmp_path, version):
    """Logs of the version-1 and version-2 shims (fixtures: the scripted program, run in /tmp/vN/d) read with the
    same counters as today's version-3 log of the same program, less seeks_end (which they lack; the program
    seeks to no end); ingest's fast reader declines them and ingest falls back."""
    from mtcio.db import fastlog
    old = read_log(os.path.join(os.path.dirname(__file__), "fixtures", "shim", f"scripted-v{version}.mtclog"),
                   strict=True)
    assert old.version == version and old.process["task"] == f"v{version}" and len(old.files) == 10
    assert all("seeks_end" not in f for f in old.files)
    assert fastlog.parse(open(old.path, "rb").read()) is None
    d, logdir = tmp_path / "d", tmp_path / "logs"
    d.mkdir(), logdir.mkdir()
    assert run([prog("scripted"), str(d)], str(logdir)).returncode == 0
    (p,) = log_paths(str(logdir))
    now = read_log(p, strict=True)
    assert now.version == 3 and all(f["seeks_end"] == 0 for f in now.files)

    def counts(log, root):
        return {f["path"].replace(root, "D"): {k: v for k, v in f.items() if k not in ("id", "path", "seeks_end")
                                               and not k.startswith("t_") and not k.endswith("_ns")}
                for f in log.files}
    assert counts(old, f"/tmp/v{version}/d") == counts(now, str(d))
    for f in now.files:   # timestamps are absolute again after decoding
        if f["first_open_ns"]:
            assert now.process["start_ns"] <= f["first_open_ns"] <= f["last_close_ns"] <= now.process["end_ns"]


def test_many_files_count_in_process_record(tmp_path):
    """n_files is patched into the PROC record after the FILE records: also right when the write buffer was
    flushed before they ended (a 1,500-file copy writes ~150 KB)."""
    src = tmp_path / "src"
    for i in range(1500):
        (src / f"d{i // 100}").mkdir(parents=True, exist_ok=True)
        (src / f"d{i // 100}" / f"f{i}").write_bytes(b"x" * (i % 50))
    logdir = tmp_path / "logs"
    logdir.mkdir()
    assert run(["cp", "-r", str(src), str(tmp_path / "dst")], str(logdir)).returncode == 0
    (p,) = log_paths(str(logdir))
    log = read_log(p, strict=True)
    assert os.path.getsize(p) > 65536
    assert log.process["n_files"] == len(log.files) == 2 * 1500 + 2 * 16
    got = {f["path"]: f for f in log.files}
    assert got[str(tmp_path / "dst" / "d7" / "f777")]["bytes_written"] == 777 % 50
    assert got[str(src / "d14" / "f1499")]["bytes_read"] == 1499 % 50
