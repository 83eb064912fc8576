"""Threads, process trees (fork, exec, vfork, posix_spawn, shell pipeline) and the ways a process ends."""
import os
import signal
import subprocess
from collections import defaultdict

import pytest

from mtcio.db.logformat import OP_CODES
from mtcio.preload.testing import env_for, logs, nonzero, prog, run


@pytest.mark.parametrize("trace", [False, True])
def test_threads_exact_totals(tmp_path, trace):
    d, logdir = tmp_path / "d", tmp_path / "logs"
    d.mkdir(), logdir.mkdir()
    n = 100000
    r = run([prog("threads"), str(d), str(n)], str(logdir), env_extra={"MTCPROF_TRACE": "ops"} if trace else {})
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    (log,) = logs(str(logdir))
    f = {os.path.basename(x["path"]): x for x in log.files}
    assert set(f) == {"own0", "own1", "own2", "own3", "shared", "sharedout"}
    for i in range(4):
        assert nonzero(f[f"own{i}"]) == dict(opens=1, creates=1, closes=1, writes=n, bytes_written=16 * n,
                                              max_offset=16 * n)
    sh = f["shared"]
    assert (sh["reads"], sh["bytes_read"], sh["writes"], sh["bytes_written"]) == (4 * n, 32 * n, 1, 4096)
    so = f["sharedout"]
    assert (so["writes"], so["bytes_written"], so["max_offset"]) == (n, 8 * n, 8 * n)
    assert sum(so["hist_write"]) == n and sum(sh["hist_read"]) == 4 * n
    if trace:
        ops = log.ops
        total = 4 * n + 4 * n + n + 1 + 6 + 6          # writes, preads, fwrites, initial write, opens, closes
        assert len(ops) == total and log.process["ops_dropped"] == 0
        assert len(set(ops["tid"].tolist())) == 9
        assert int(ops[ops["op"] == OP_CODES["read"]]["length"].sum()) == 32 * n


def _by_pid(ls):
    d = defaultdict(list)
    for l in ls:
        d[l.process["pid"]].append(l)
    for v in d.values():
        v.sort(key=lambda l: l.process["start_ns"])
    return d


def test_process_tree_one_log_per_process(tmp_path):
    d, logdir = tmp_path / "d", tmp_path / "logs"
    d.mkdir(), logdir.mkdir()
    r = run([prog("proctree"), str(d)], str(logdir), env_extra={"MTCPROF_TASK": "tree-7", "MTCPROF_STAGE": "st"})
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    ls = logs(str(logdir))
    assert all(l.complete for l in ls)
    assert {(l.process["task"], l.process["stage"]) for l in ls} == {("tree-7", "st")}
    pids = _by_pid(ls)
    # every process has exactly one final log; earlier logs of the same pid end in exec (its exec chain)
    for pid, chain in pids.items():
        assert [l.process["ended_by"] for l in chain[:-1]] == ["exec"] * (len(chain) - 1)
        assert chain[-1].process["ended_by"] != "exec"
    # root, fork child, fork+exec, vfork+exec, posix_spawn, sh, cat, sha256sum = 8 processes
    assert len(pids) == 8
    root = [c[-1] for c in pids.values() if c[-1].process["argv"] == [prog("proctree"), str(d)] and
            c[-1].process["origin"] == "exec"]
    assert len(root) == 1
    root = root[0]
    rootpid = root.process["pid"]
    kids = [c for c in pids.values() if c[0].process["ppid"] == rootpid]
    assert len(kids) == 5
    # each file's bytes appear in exactly one log (nothing lost, nothing duplicated)
    written = defaultdict(list)
    for l in ls:
        for f in l.files:
            if f["bytes_written"]:
                written[os.path.basename(f["path"])].append(f["bytes_written"])
    assert dict(written) == {"root_before": [10], "root_after": [30], "forked": [20], "fork_exec": [100],
                             "vfork_exec": [100], "spawned": [100], "pipe_out": [65]}
    # (pipe_out is 68 bytes: sha256sum writes 3 of them with the inline putchar_unlocked macro, see FORMAT.md)
    forked = [c[-1] for c in kids if c[-1].process["origin"] == "fork"]
    assert len(forked) == 1 and forked[0].process["exit_status"] == 3 and forked[0].process["ended_by"] == "exit"
    assert forked[0].process["parent_start_ns"] == root.process["start_ns"]
    assert [os.path.basename(f["path"]) for f in forked[0].files] == ["forked"]
    leaves = sorted(os.path.basename(c[-1].files[0]["path"]) for c in kids if c[-1].process["argv"][1:2] == ["leaf"])
    assert leaves == ["fork_exec", "spawned", "vfork_exec"]
    cat = [c[-1] for c in pids.values() if c[-1].process["argv"][0] == "cat"]
    assert len(cat) == 1 and sum(f["bytes_read"] for f in cat[0].files) == 30
    sha = [c for c in pids.values() if c[-1].process["argv"] == ["sha256sum"]]
    assert len(sha) == 1 and len(sha[0]) == 2      # the sh child that opened the redirect, then sha256sum
    pre, img = sha[0]
    assert pre.process["origin"] == "fork" and nonzero(pre.file_by_path(str(d / "pipe_out")))["creates"] == 1
    assert "inherited" in img.file_by_path(str(d / "pipe_out"))["flags"]


@pytest.mark.parametrize("mode,status,ended_by,sig", [
    ("return", 9, "main_return", 0), ("exit", 7, "exit", 0), ("_exit", 5, "_exit", 0), ("_Exit", 6, "_exit", 0),
    ("sigterm", -1, "signal", signal.SIGTERM), ("segv", -1, "signal", signal.SIGSEGV),
    ("abort", -1, "signal", signal.SIGABRT)])
def test_process_endings_leave_readable_log(tmp_path, mode, status, ended_by, sig):
    logdir = tmp_path / "logs"
    logdir.mkdir()
    out = tmp_path / "out"
    r_un = run([prog("endings"), mode, str(tmp_path / "out-untraced")])
    r = run([prog("endings"), mode, str(out)], str(logdir))
    assert r.returncode == r_un.returncode == (status if status >= 0 else -sig)
    (log,) = logs(str(logdir))
    assert log.complete
    p = log.process
    assert (p["exit_status"], p["ended_by"], p["signal"]) == (status, ended_by, sig)
    assert nonzero(log.file_by_path(str(out))) == dict(opens=1, creates=1, writes=1, bytes_written=10, max_offset=10)


def test_killed_by_sigterm_from_outside(tmp_path):
    logdir = tmp_path / "logs"
    logdir.mkdir()
    out = tmp_path / "out"
    p = subprocess.Popen([prog("endings"), "kill", str(out)], env=env_for(str(logdir)), stdout=subprocess.PIPE)
    assert p.stdout.readline() == b"ready\n"
    p.send_signal(signal.SIGTERM)
    assert p.wait(10) == -signal.SIGTERM
    (log,) = logs(str(logdir))
    assert log.complete and log.process["ended_by"] == "signal" and log.process["signal"] == signal.SIGTERM
    assert log.file_by_path(str(out))["bytes_written"] == 10


def test_argv_is_recorded_as_the_program_started(tmp_path):
    # GNU getopt permutes argv in place; the log must show the command line as given
    run(["sh", "-c", "echo x | head -3 >/dev/null; echo y | sort -r -k1 >/dev/null"], logdir=str(tmp_path))
    argvs = sorted(log.process["argv"] for log in logs(str(tmp_path)) if log.process["argv"][0] != "sh")
    assert argvs == [["head", "-3"], ["sort", "-r", "-k1"]]


@pytest.mark.parametrize("mode", ["untraced", "loaded", "traced"])
def test_vfork_stays_vfork(tmp_path, mode):
    """The child of a vfork shares the parent's memory (the shim must not turn it into a fork) and its close() of an
    inherited fd neither closes the parent's nor lands in the parent's record."""
    logdir = tmp_path / "logs"
    logdir.mkdir()
    out = tmp_path / "out"
    traced = mode == "traced"
    r = run([prog("vforkshare"), str(out)], str(logdir) if traced else None,
            env_extra={"_loaded_only": True} if mode == "loaded" else None)
    assert (r.returncode, r.stdout, r.stderr) == (0, b"42\n", b"")
    assert out.read_bytes() == b"abcdefg"
    if traced:
        (log,) = logs(str(logdir))
        assert nonzero(log.file_by_path(str(out))) == dict(opens=1, creates=1, closes=1, writes=2, bytes_written=7,
                                                          max_offset=7)


def test_start_clocks_of_a_fork_child_and_of_exec_images(tmp_path):
    """The kernel's counters at a start and at the end (FORMAT.md STR 14 cpu_clock, 15 sched), read at the image's
    start whether or not it makes a file call: a fork child's schedstat at its fork is the kernel's "0 0 0"; the end
    never before the start."""
    logdir, data = tmp_path / "logs", tmp_path / "data"
    logdir.mkdir()
    data.write_bytes(b"x" * 100)
    r = run(["sh", "-c", f'/bin/true; cat "{data}" >/dev/null; (read l < "{data}"; exit 4); :'], str(logdir))
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    ls = logs(str(logdir))
    by = {("fork" if l.process["origin"] == "fork" else l.process["argv"][0]): l.process for l in ls}
    assert sorted(by) == ["/bin/true", "cat", "fork", "sh"] and len(ls) == 4
    clocks = {k: (p["cpu_clock"].split(), [int(x) for x in p["sched"].split()]) for k, p in by.items()}
    for k, (cpu, sch) in clocks.items():
        assert len(cpu) == 5 and int(cpu[0]) == os.cpu_count() and len(sch) == 6, k
        assert float(cpu[1]) <= float(cpu[3]) and float(cpu[2]) <= float(cpu[4]), k
        assert all(a <= b for a, b in zip(sch[:3], sch[3:])), k
    assert clocks["fork"][1][:3] == [0, 0, 0] and by["fork"]["exit_status"] == 4
    assert sum(clocks["fork"][1][3:]) > 0
    assert [f["bytes_read"] for f in ls[[l.process["origin"] for l in ls].index("fork")].files] == [100]


def test_a_failed_exec_log_is_written_again_under_the_same_name(tmp_path):
    """The log written before an exec that fails is replaced by the image's final log under the same name, with
    what the image did before and after the exec."""
    logdir, before, after = tmp_path / "logs", tmp_path / "before", tmp_path / "after"
    logdir.mkdir()
    code = ("import os, sys\n"
            f"open({str(before)!r}, 'w').write('b' * 5)\n"
            "try:\n    os.execv('/nonexistent/prog', ['prog'])\nexcept OSError:\n    pass\n"
            f"open({str(after)!r}, 'w').write('a' * 7)\n")
    r = run(["/usr/bin/python3", "-S", "-c", code], str(logdir))
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    (log,) = logs(str(logdir))
    assert len(os.listdir(logdir)) == 1 and log.complete and log.process["ended_by"] == "main_return"
    assert log.file_by_path(str(before))["bytes_written"] == 5 and log.file_by_path(str(after))["bytes_written"] == 7
