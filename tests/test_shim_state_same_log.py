"""What the shim records does not change when its code is reorganised: a fixed set of programs, run traced, leaves
logs that decode to exactly the records of tests/fixtures/shim/same_log.json (times, pids and machine paths masked),
record for record: the process, every file's counters and flags, the op trace, the order and kind of the records.

The fixture was taken with the shim before its process state moved into one struct (issue 52).  Each case notes the
versions of what it runs (glibc, Python, coreutils); where they differ from the fixture's the case is skipped with
the reason (the counts of a `cp` or of Python's start-up are theirs, not the shim's), and the exact counts asserted
in test_the_recorded_counts_are_exact below still hold.  To take the fixture again, only when a change of what is
recorded is intended:  .venv/bin/python tests/test_shim_state_same_log.py --write
"""
from __future__ import annotations

import json
import os
import re
import resource
import struct
import subprocess
import sys
import tempfile

import pytest

from mtcio.db.logformat import R_DIR, R_END, R_FILE, R_OPS, R_STR, COUNTERS, NBINS, iter_records, ops_as_dicts, \
    parse
from mtcio.preload.testing import PROGS, env_for, prog

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "shim", "same_log.json")
TIMES = {c for c in COUNTERS if c.startswith("t_")} | {"first_open_ns", "last_close_ns"}
TIME_SLOTS = sum(1 << COUNTERS.index(c) for c in TIMES)

# os.* calls only (thin wrappers of the system calls): open/read/write/stat/fstat/lseek/dup/dup2, a fork child that
# uses an inherited fd and then execs, metadata calls in the parent after it
OS_CALLS = r"""
import os, sys
d = sys.argv[1]
p = os.path.join(d, "a")
fd = os.open(p, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
os.write(fd, b"x" * 5000)
os.write(fd, b"y" * 100)
os.fstat(fd)
os.lseek(fd, 0, os.SEEK_SET)
os.read(fd, 1000)
os.lseek(fd, 0, os.SEEK_END)
fd2 = os.dup(fd)
os.dup2(fd, 40)
os.pread(fd2, 10, 4000)
os.stat(p)
try:
    os.open(os.path.join(d, "missing"), os.O_RDONLY)
except FileNotFoundError:
    pass
pid = os.fork()
if pid == 0:
    os.lseek(fd, 0, os.SEEK_SET)
    os.read(fd, 300)
    c = os.open(os.path.join(d, "child"), os.O_CREAT | os.O_WRONLY, 0o600)
    os.write(c, b"c" * 77)
    os.close(c)
    os.execv(sys.executable, [sys.executable, "-I", "-S", "-c",
             "import os, sys; f = os.open(sys.argv[1], os.O_RDONLY); os.read(f, 64); os.read(f, 64); "
             "os.fstat(f); os.close(f); os.stat(sys.argv[2])", os.path.join(d, "child"), p])
os.waitpid(pid, 0)
os.close(40)
os.close(fd2)
os.ftruncate(fd, 10)
os.fsync(fd)
os.close(fd)
os.mkdir(os.path.join(d, "sub"))
os.rename(p, os.path.join(d, "sub", "b"))
os.unlink(os.path.join(d, "sub", "b"))
os.rmdir(os.path.join(d, "sub"))
"""

# opens a file of the case's folder until EMFILE, closes none: the log is written by the shim's short-lived copy
FD_LIMIT = r"""
import os, sys
p = os.path.join(sys.argv[1], "f")
os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o600))
l = []
try:
    while 1: l.append(os.open(p, os.O_RDONLY))
except OSError:
    pass
os.read(l[0], 1)
"""


def _versions() -> dict:
    cp = subprocess.run(["cp", "--version"], capture_output=True, text=True).stdout.splitlines()
    return {"glibc": os.confstr("CS_GNU_LIBC_VERSION"), "python": "%d.%d.%d" % sys.version_info[:3],
            "coreutils": cp[0] if cp else "?"}


def _tree(src: str) -> None:
    for i in range(3):
        sub = os.path.join(src, "d%d" % i)
        os.makedirs(sub)
        for j in range(4):
            with open(os.path.join(sub, "f%d" % j), "wb") as fh:
                fh.write(bytes((i * 4 + j) % 251 for _ in range(100 + 3000 * j + 50000 * i)))


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))


PY = [sys.executable, "-I", "-S"]
# name: (the versions it depends on, argv given the case's folder d, extra environment, its preexec_fn)
CASES = {
    "scripted": (("glibc",), lambda d: [prog("scripted"), d], {"MTCPROF_TRACE": "ops"}, None),
    "os_calls": (("glibc", "python"), lambda d: PY + ["-c", OS_CALLS, d],
                 {"MTCPROF_TRACE": "ops", "MTCPROF_GFARM_MOUNTS": "/g/one:/g/two", "MTCPROF_RUN": "r1",
                  "MTCPROF_TASK": "t1", "MTCPROF_STAGE": "s1"}, None),
    "cat": (("glibc", "coreutils"), lambda d: ["sh", "-c", 'cat "$1/src/d0/f1" "$1/src/d1/f2" > "$1/out"', "sh", d],
            {"MTCPROF_TRACE": "ops"}, None),
    "cp_r": (("glibc", "coreutils"), lambda d: ["cp", "-r", os.path.join(d, "src"), os.path.join(d, "dst")],
             {"MTCPROF_EXCLUDE": "/nowhere:%(d)s/src/d2/f3"}, None),
    "fd_limit": (("glibc", "python"), lambda d: PY + ["-c", FD_LIMIT, d], {}, _limit),
}


def run_case(name: str, root: str) -> list:
    """Run case `name` traced in a fresh folder under root; its logs decoded and masked."""
    _, argv, extra, pre = CASES[name]
    d, logdir = os.path.join(root, "d"), os.path.join(root, "logs")
    os.makedirs(d), os.makedirs(logdir)
    if name in ("cat", "cp_r"):
        _tree(os.path.join(d, "src"))
    extra = {k: v % {"d": d} for k, v in extra.items()}
    env = env_for(logdir, MTCPROF_HOST="golden", MTCPROF_INCLUDE=d, **extra)
    if "MTCPROF_GFARM_MOUNTS" not in extra:
        env.pop("MTCPROF_GFARM_MOUNTS", None)
    r = subprocess.run(argv(d), env=env, cwd=root, capture_output=True, timeout=120, preexec_fn=pre)
    assert r.returncode == 0 and r.stderr == b"", (name, r.returncode, r.stderr.decode()[-2000:])
    return decode(logdir, d, root, mounts_given="MTCPROF_GFARM_MOUNTS" in extra)


def decode(logdir: str, d: str, root: str, mounts_given: bool) -> list:
    names = sorted(os.listdir(logdir))
    assert all(re.fullmatch(r"golden\.\d+\.\d+\.mtclog", n) for n in names), names    # no temp file left
    bufs = [open(os.path.join(logdir, n), "rb").read() for n in names]
    logs = sorted(((parse(b, strict=True), b) for b in bufs), key=lambda lb: lb[0].process["start_ns"])
    pid_label: dict = {}
    start_label = {lg.process["start_ns"]: i for i, (lg, _) in enumerate(logs)}
    for lg, _ in logs:
        pid_label.setdefault(lg.process["pid"], "P%d" % len(pid_label))
    subs = [(d, "<D>"), (root, "<R>"), (os.path.realpath(sys.executable), "<PYEXE>"), (sys.executable, "<PY>"),
            (PROGS, "<PROGS>")]

    def s(v):
        if isinstance(v, str):
            for a, b in subs:
                v = v.replace(a, b)
            return v
        if isinstance(v, list):
            return [s(x) for x in v]
        return v

    out = []
    for lg, buf in logs:
        assert lg.complete and not lg.kept_out
        p = dict(lg.process)
        pid = p.pop("pid")
        p["pid"] = pid_label[pid]
        p["ppid"] = pid_label.get(p["ppid"], "outside")
        ps = p.pop("parent_start_ns")
        p["parent"] = start_label.get(ps, "outside") if ps else None
        del p["start_ns"], p["end_ns"]
        p["uid_is_mine"] = p.pop("uid") == os.getuid()
        for k in ("cpu_clock", "sched"):           # machine readings: only how many fields
            if k in p:
                p[k] = len(p[k].split())
        if not mounts_given:                       # read from /proc/self/mounts: the machine's
            p["gfarm_mounts"] = "<machine's>"
        p = {k: s(v) for k, v in sorted(p.items())}
        files = []
        for f in lg.files:
            f = {k: (bool(v) if k in TIMES else s(v)) for k, v in f.items()}
            files.append(f)
        ops = []
        for o in ops_as_dicts(lg):
            o = dict(o)
            o["tid"] = "main" if o["tid"] == pid else "other"
            del o["start_ns"]
            o["dur_ns"] = bool(o["dur_ns"])
            o["path"] = s(o["path"])
            ops.append(o)
        # one STR record per gfarm2fs mount the machine has (a testbed up or not): not the program's doing
        recs = records(buf, s)
        if not mounts_given:
            n = sum(r == ["str", GFARM_MOUNT_KEY] for r in recs)
            recs = [r for r in recs if r != ["str", GFARM_MOUNT_KEY]]
            recs = [["end", r[1] - n] if r[0] == "end" else r for r in recs]     # END counts the records before it
        out.append({"process": p, "files": files, "ops": ops, "records": recs})
    return out


GFARM_MOUNT_KEY = 8       # preload/FORMAT.md, STR keys


def records(buf: bytes, s) -> list:
    """The records in the order written: kind and what does not depend on times (FILE: id, flags, folder, counts,
    which slots are present and which non-time slots are 64-bit)."""
    out = []
    for rtype, off, length, bo in iter_records(buf):
        if rtype == R_STR:
            out.append(["str", struct.unpack_from(bo + "I", buf, off)[0]])
        elif rtype == R_DIR:
            did, n = struct.unpack_from(bo + "II", buf, off)
            out.append(["dir", did, s(buf[off + 8:off + 8 + n].decode())])
        elif rtype == R_FILE:
            fid, flags, nlen, did, nc, nb, _r, mask, wide = struct.unpack_from(bo + "IHHIBBHQQ", buf, off)
            assert (nc, nb) == (len(COUNTERS), NBINS)
            out.append(["file", fid, flags, nlen, did, mask, wide & ~TIME_SLOTS])
        elif rtype == R_OPS:
            out.append(["ops", struct.unpack_from(bo + "I", buf, off)[0]])
        elif rtype == R_END:
            out.append(["end", struct.unpack_from(bo + "I", buf, off)[0]])
        else:
            out.append(["proc" if rtype == 1 else rtype, length])
    return out


def _fixture() -> dict:
    with open(FIXTURE) as fh:
        return json.load(fh)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_log_is_the_fixtures(tmp_path, name):
    want = _fixture()[name]
    now = _versions()
    differ = [k for k in CASES[name][0] if want["versions"][k] != now[k]]
    if differ:
        pytest.skip("%s: %s here, %s in the fixture" % (name, [now[k] for k in differ],
                                                         [want["versions"][k] for k in differ]))
    got = run_case(name, str(tmp_path))
    assert len(got) == len(want["logs"])
    for g, w in zip(got, want["logs"]):
        assert g["process"] == w["process"]
        assert g["records"] == w["records"]
        assert g["files"] == w["files"]
        assert g["ops"] == w["ops"]


def test_the_recorded_counts_are_exact(tmp_path):
    """Counts that hold whatever the versions: each file of the copy read and written once in full (the one
    excluded left out), and the os.* calls of OS_CALLS counted in parent, fork child and its exec'd image."""
    logs = run_case("cp_r", str(tmp_path / "cp"))
    (lg,) = logs
    files = {f["path"]: f for f in lg["files"]}
    for i in range(3):
        for j in range(4):
            size = 100 + 3000 * j + 50000 * i
            src, dst = "<D>/src/d%d/f%d" % (i, j), "<D>/dst/d%d/f%d" % (i, j)
            if (i, j) == (2, 3):
                assert src not in files
                continue
            assert (files[src]["opens"], files[src]["closes"], files[src]["bytes_read"]) == (1, 1, size), src
            assert (files[dst]["opens"], files[dst]["creates"], files[dst]["closes"],
                    files[dst]["bytes_written"]) == (1, 1, 1, size), dst
    assert files["<D>/dst/d0"]["mkdirs"] == 1

    parent, child, image = run_case("os_calls", str(tmp_path / "os"))
    assert [x["process"]["ended_by"] for x in (parent, child, image)] == ["main_return", "exec", "main_return"]
    assert (child["process"]["origin"], child["process"]["parent"], image["process"]["pid"]) == ("fork", 0, "P1")
    pf = {f["path"]: f for f in parent["files"]}
    a = pf["<D>/a"]
    assert (a["opens"], a["creates"], a["writes"], a["bytes_written"], a["reads"], a["bytes_read"]) == (1, 1, 2, 5100,
                                                                                                        2, 1010)
    assert (a["seeks"], a["seeks_end"], a["dups"], a["stats"], a["closes"], a["truncates"], a["fsyncs"],
            a["renames"]) == (2, 1, 2, 2, 3, 1, 1, 1)
    assert pf["<D>/missing"]["errors"] == 1 and pf["<D>/sub/b"]["unlinks"] == 1
    assert (pf["<D>/sub"]["mkdirs"], pf["<D>/sub"]["rmdirs"]) == (1, 1)
    cf = {f["path"]: f for f in child["files"]}
    assert (cf["<D>/a"]["reads"], cf["<D>/a"]["bytes_read"], cf["<D>/a"]["flags"]) == (1, 300, ["inherited", "posix"])
    assert (cf["<D>/child"]["creates"], cf["<D>/child"]["bytes_written"]) == (1, 77)
    imf = {f["path"]: f for f in image["files"]}
    assert (imf["<D>/child"]["reads"], imf["<D>/child"]["bytes_read"], imf["<D>/child"]["stats"]) == (2, 77, 1)
    assert imf["<D>/a"]["stats"] == 1
    assert parent["process"]["gfarm_mounts"] == ["/g/one", "/g/two"]
    assert (parent["process"]["run"], parent["process"]["task"], parent["process"]["stage"]) == ("r1", "t1", "s1")


def write_fixture() -> None:
    out = {}
    v = _versions()
    for name in sorted(CASES):
        with tempfile.TemporaryDirectory(prefix="same_log.") as root:
            out[name] = {"versions": {k: v[k] for k in CASES[name][0]}, "logs": run_case(name, root)}
    with open(FIXTURE, "w") as fh:
        json.dump(out, fh, indent=1, sort_keys=True)
        fh.write("\n")
    print("wrote", FIXTURE)


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        print("usage: test_shim_state_same_log.py --write   (takes the fixture again with the current shim)",
              file=sys.stderr)
        sys.exit(2)
    write_fixture()
