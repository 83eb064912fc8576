"""The native engine (envelope/engine/mtcengine) and its Python wrapper (envelope/engine.py).

POSIX backend on a local tmp dir: exact op counts and bytes, N-to-1, start-at, timeouts,
interrupts, bad arguments. The gfarm backend runs against the testbed (marked testbed)."""
import errno
import glob
import os
import shutil
import signal
import subprocess
import threading
import time

import pytest

from mtcio.envelope import engine as eng
from mtcio.envelope.points import TruncatedOutput


@pytest.fixture(scope="module")
def exe():
    return str(eng.build())


def run(exe, *args, timeout=30):
    # In its own session so a timeout kills the workers too: a worker left blocked would hold stdout open
    # and the read of it would never end.
    p = subprocess.Popen([exe, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise
    cp = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    return cp, (eng.parse_output(cp.stdout) if cp.returncode != 2 else None)


def _fifo_open_anywhere(fifo):
    """True while some process holds `fifo` open (its /proc fd links name it)."""
    for fd in glob.glob("/proc/[0-9]*/fd/*"):
        try:
            if os.readlink(fd) == str(fifo):
                return True
        except OSError:
            pass
    return False


def _open_fifo_for_write(fifo, deadline):
    """Open `fifo` for writing once a reader waits on it, never blocking past `deadline`."""
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:
            if e.errno != errno.ENXIO or time.monotonic() > deadline:
                raise
            time.sleep(0.001)


def _children(pid):
    """{pid: (state, CPU ticks)} of the processes whose parent is pid (/proc/PID/stat)."""
    out = {}
    for st in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(st) as fh:
                f = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(f[1]) == pid:
            out[int(st.split("/")[2])] = (f[0], int(f[11]) + int(f[12]))
    return out


def _holds(pid, path):
    try:
        return any(os.readlink(fd) == str(path) for fd in glob.glob(f"/proc/{pid}/fd/*"))
    except OSError:
        return False


def _schedstat(pid):
    """(ns on a CPU, ns ready to run without one) of pid so far (/proc/PID/schedstat)."""
    with open(f"/proc/{pid}/schedstat") as fh:
        cpu, wait = fh.read().split()[:2]
    return int(cpu), int(wait)


def _voluntary_switches(pid):
    """How often pid has given up its CPU to wait for something (slept) since its fork (/proc/PID/status)."""
    with open(f"/proc/{pid}/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("voluntary_ctxt_switches:"))


def _forked_ns(pid):
    """(earliest, latest) CLOCK_REALTIME ns at which pid can have been forked: /proc/PID/stat's start time is in
    clock ticks of CLOCK_BOOTTIME, rounded down."""
    with open(f"/proc/{pid}/stat") as fh:
        ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
    b0 = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
    real = time.time_ns()
    b1 = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
    tick = 10 ** 9 // os.sysconf("SC_CLK_TCK")
    return ticks * tick + real - b1, (ticks + 1) * tick + real - b0


@pytest.mark.parametrize("procs", [1, 2, 4])
def test_create_write_read_exact(exe, tmp_path, procs):
    pat = str(tmp_path / "f.{rank}.{i}")
    K, S = 3, 100_000
    # create: empty files
    cp, r = run(exe, "--op", "create", "--procs", str(procs), "--files-per-proc", str(K),
                "--path", str(tmp_path / "c.{rank}.{i}"))
    assert cp.returncode == 0, cp.stderr
    assert len(r.records) == procs * K and all(x.ok and x.bytes == 0 for x in r.records)
    assert sorted((x.rank, x.i) for x in r.records) == [(p, i) for p in range(procs)
                                                         for i in range(K)]
    assert all(os.path.getsize(tmp_path / f"c.{p}.{i}") == 0 for p in range(procs)
               for i in range(K))
    # write: S bytes each in 4 KiB calls (the last call is short)
    cp, r = run(exe, "--op", "write", "--procs", str(procs), "--files-per-proc", str(K),
                "--size", str(S), "--block", "4k", "--path", pat, "--fsync")
    assert cp.returncode == 0, cp.stderr
    assert [x.bytes for x in r.records] == [S] * (procs * K)
    assert {x.path for x in r.records} == {str(tmp_path / f"f.{p}.{i}") for p in range(procs)
                                           for i in range(K)}
    for p in range(procs):
        for i in range(K):
            assert os.path.getsize(tmp_path / f"f.{p}.{i}") == S
    assert r.summary["ops"] == str(procs * K) and r.summary["bytes"] == str(procs * K * S)
    # read back, with the expected size checked
    cp, r = run(exe, "--op", "read", "--procs", str(procs), "--files-per-proc", str(K),
                "--size", str(S), "--block", "64k", "--path", pat)
    assert cp.returncode == 0, cp.stderr
    assert all(x.ok and x.bytes == S and x.t_end_ns >= x.t_start_ns > 0 for x in r.records)
    agg = eng.aggregate([r])
    assert (agg.ops, agg.ok, agg.bytes) == (procs * K, procs * K, procs * K * S)
    span = (max(x.t_end_ns for x in r.records) - min(x.t_start_ns for x in r.records)) / 1e9
    assert agg.ops_per_s == pytest.approx(procs * K / span)
    assert agg.bytes_per_s == pytest.approx(procs * K * S / span)
    assert float(r.summary["ops_per_s"]) == pytest.approx(agg.ops_per_s, rel=1e-5)


def test_stat_of_existing_files_and_of_a_missing_one(exe, tmp_path):
    files = ["--procs", "2", "--files-per-proc", "3", "--path", str(tmp_path / "c.{rank}.{i}")]
    cp, r = run(exe, "--op", "create", *files)
    assert cp.returncode == 0, cp.stderr
    cp, r = run(exe, "--op", "stat", *files)
    assert cp.returncode == 0, cp.stderr
    assert len(r.records) == 6 and all(x.ok and x.op == "stat" and x.bytes == 0 for x in r.records)
    pts = eng.points_from_runs("Ts", [r], file_size=0, procs_per_host=2, hosts=1, repeat=0)
    assert [(p.metric, p.ok) for p in pts] == [("Ts", True)] and pts[0].value == pytest.approx(
        eng.aggregate([r]).ops_per_s)
    os.unlink(tmp_path / "c.1.2")
    cp, r = run(exe, "--op", "stat", *files)
    assert cp.returncode == 1
    bad = [x for x in r.records if not x.ok]
    assert [(x.rank, x.i) for x in bad] == [(1, 2)] and "stat: No such file or directory" in bad[0].error


def test_fstat_times_the_fstat_alone(exe, tmp_path):
    """--op fstat: open, read one call, close, open again, fstat, close; only the fstat is timed. On a FIFO each
    open waits for the writer, which opens it twice, 0.2 s apart: the op's time and the span leave those waits out.
    The writer closes at once, so the engine's read ends at EOF only after that close: an open of the engine's
    finding the first writer still there would not wait."""
    fifo = tmp_path / "p"
    os.mkfifo(fifo)

    def writer():
        deadline = time.monotonic() + 20
        for k in range(2):
            if k:   # a writer opening before the engine's first close would meet that first open again
                while _fifo_open_anywhere(fifo) and time.monotonic() < deadline:
                    time.sleep(0.001)
            time.sleep(0.2)
            os.close(_open_fifo_for_write(fifo, deadline))
    t = threading.Thread(target=writer, daemon=True)
    t.start()
    t0 = time.monotonic()
    cp, r = run(exe, "--op", "fstat", "--path", str(fifo), "--timeout", "20")
    wall = time.monotonic() - t0
    t.join(timeout=25)
    assert cp.returncode == 0, cp.stderr
    assert wall >= 0.4                                           # both opens waited for the writer
    (x,) = r.records
    assert x.ok and x.op == "fstat" and x.bytes == 0
    assert x.t_end_ns - x.t_start_ns < 50_000_000 and float(r.summary["span_s"]) < 0.05
    pts = eng.points_from_runs("Tf", [r], file_size=0, procs_per_host=1, hosts=1, repeat=0)
    assert [(p.metric, p.unit, p.ok) for p in pts] == [("Tf", "ops/s", True)]
    cp, r = run(exe, "--op", "fstat", "--files-per-proc", "2", "--path", str(tmp_path / "none{i}"))
    assert cp.returncode == 1 and [x.error for x in r.records] == ["open: No such file or directory"] * 2
    cp, r = run(exe, "--op", "fstat", "--path", str(tmp_path))
    assert cp.returncode == 1 and [x.error for x in r.records] == ["read: Is a directory"]


def test_written_content_is_not_zeros(exe, tmp_path):
    run(exe, "--op", "write", "--size", "1000", "--path", str(tmp_path / "z"))
    data = (tmp_path / "z").read_bytes()
    assert len(data) == 1000 and data.count(0) == 0


def test_n_to_1_read_of_one_file(exe, tmp_path):
    f = tmp_path / "shared"
    f.write_bytes(b"x" * 300_000)
    cp, r = run(exe, "--op", "read", "--procs", "4", "--files-per-proc", "2", "--path", str(f))
    assert cp.returncode == 0
    assert len(r.records) == 8 and {x.path for x in r.records} == {str(f)}
    assert all(x.ok and x.bytes == 300_000 for x in r.records)


def test_file_list_and_rank_base(exe, tmp_path):
    names = [tmp_path / f"L{j}" for j in range(3)]
    for j, n in enumerate(names):
        n.write_bytes(b"y" * (j + 1))
    lst = tmp_path / "list"
    lst.write_text("".join(f"{n}\n" for n in names))
    cp, r = run(exe, "--op", "read", "--procs", "2", "--files-per-proc", "2",
                "--file-list", str(lst))
    assert cp.returncode == 0
    # op i of rank r reads line (r*K + i) mod 3
    assert [(x.rank, x.i, x.path, x.bytes) for x in r.records] == [
        (0, 0, str(names[0]), 1), (0, 1, str(names[1]), 2),
        (1, 0, str(names[2]), 3), (1, 1, str(names[0]), 1)]
    cp, r = run(exe, "--op", "create", "--procs", "2", "--rank-base", "10",
                "--path", str(tmp_path / "g{rank}-{lrank}"))
    assert [x.path for x in r.records] == [str(tmp_path / "g10-0"), str(tmp_path / "g11-1")]


def test_failed_ops_are_reported_and_the_rest_go_on(exe, tmp_path):
    (tmp_path / "f.0").write_bytes(b"a" * 10)
    cp, r = run(exe, "--op", "read", "--files-per-proc", "3", "--size", "10",
                "--path", str(tmp_path / "f.{i}"))
    assert cp.returncode == 1
    ok, missing, missing2 = r.records
    assert ok.ok and ok.bytes == 10
    assert not missing.ok and missing.errno == 2 and "No such file" in missing.error
    (tmp_path / "f.1").write_bytes(b"a" * 5)
    cp, r = run(exe, "--op", "read", "--files-per-proc", "2", "--size", "10",
                "--path", str(tmp_path / "f.{i}"))
    assert not r.records[1].ok and "short read: 5 of 10" in r.records[1].error
    pts = eng.points_from_runs("T1L", [r], file_size=10, procs_per_host=1, hosts=1, repeat=0)
    assert [p.metric for p in pts] == ["T1L", "B1L"]
    assert all(not p.ok and "1 of 2 ops failed" in p.error for p in pts)


def test_timeout_kills_a_blocked_worker(exe, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)          # open(O_RDONLY) blocks forever: no writer
    t = time.monotonic()
    cp, r = run(exe, "--op", "read", "--procs", "2", "--files-per-proc", "2",
                "--path", str(fifo), "--timeout", "0.5")
    assert time.monotonic() - t < 10
    assert cp.returncode == eng.EXIT_TIMEOUT
    assert r.timed_out and len(r.records) == 4 and not any(x.ok for x in r.records)
    running = [x for x in r.records if x.i == 0]
    assert all("timeout: still running" in x.error and x.errno == 110 for x in running)
    assert all("timeout: not started" in x.error for x in r.records if x.i == 1)


def test_interrupt_keeps_what_was_measured(exe, tmp_path):
    """SIGINT while the worker is held in its second op (a read of a FIFO whose writer writes nothing): the first
    op's record is kept, the second is the interrupted one."""
    (tmp_path / "f.0").write_bytes(b"a" * 10)
    os.mkfifo(tmp_path / "f.1")
    p = subprocess.Popen([exe, "--op", "read", "--files-per-proc", "2", "--path",
                          str(tmp_path / "f.{i}")], stdout=subprocess.PIPE, text=True)
    try:
        w = _open_fifo_for_write(tmp_path / "f.1", time.monotonic() + 60)   # the worker is in its second op
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=10)
        os.close(w)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == eng.EXIT_INTERRUPTED
    r = eng.parse_output(out)
    assert r.records[0].ok and r.records[0].bytes == 10
    assert not r.records[1].ok and "interrupted" in r.records[1].error


def test_start_at_synchronises(exe, tmp_path):
    start = time.time_ns() + 400_000_000
    cp, r = run(exe, "--op", "create", "--procs", "3", "--path", str(tmp_path / "s{rank}"),
                "--start-at", str(start))
    assert cp.returncode == 0
    assert all(x.t_start_ns >= start for x in r.records)
    assert min(x.t_start_ns for x in r.records) - start < 200_000_000
    assert int(r.summary["t_go_ns"]) >= start


def test_compute_ms_spins_before_the_first_op_only(exe, tmp_path):
    """Each worker computes (spins, never asleep) for --compute-ms after the go; its first op is timed from then and
    the next ones follow at once. Each worker's first op reads a FIFO, which holds it there until the test writes: by
    then each has been runnable (on a CPU or ready for one, /proc/PID/schedstat) for at least the spin's 300 ms of
    wall time, however busy the machine (a sleep would leave it a few ms). How much of that was CPU time depends on
    what else runs: that figure is tests/bench/cpu_bench.py's."""
    for rank in (0, 1):
        os.mkfifo(tmp_path / f"w{rank}.0")
        for i in (1, 2):
            (tmp_path / f"w{rank}.{i}").write_bytes(b"x" * 4096)
    p = subprocess.Popen([exe, "--op", "read", "--procs", "2", "--files-per-proc", "3", "--size", "4k",
                          "--path", str(tmp_path / "w{rank}.{i}"), "--compute-ms", "300", "--timeout", "120"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        ws = [_open_fifo_for_write(tmp_path / f"w{rank}.0", deadline) for rank in (0, 1)]   # both spun, in an open
        held = {}
        while len(held) < 2:
            assert time.monotonic() < deadline, "the workers never opened their FIFOs"
            held = {rank: k for k in _children(p.pid) for rank in (0, 1) if _holds(k, tmp_path / f"w{rank}.0")}
            time.sleep(0.01)
        seen = time.time_ns()
        runnable = {rank: sum(_schedstat(k)) for rank, k in held.items()}
        wrote = time.time_ns()
        for w in ws:
            os.write(w, b"y" * 4096)
            os.close(w)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
    assert p.returncode == 0, err
    r = eng.parse_output(out)
    assert r.meta["compute_ms"] == "300" and len(r.records) == 6 and all(x.ok and x.bytes == 4096 for x in r.records)
    go = int(r.summary["t_go_ns"])
    for rank in (0, 1):
        # spinning from the go: never asleep (a sleep leaves a few ms); schedstat's sums trail the wall clock by
        # what the scheduler has not yet accounted (0.4 ms seen on a loaded machine), hence 295
        assert runnable[rank] >= 295_000_000, runnable
        recs = sorted((x for x in r.records if x.rank == rank), key=lambda x: x.i)
        assert go + 300_000_000 <= recs[0].t_start_ns <= seen and recs[0].t_end_ns >= wrote
        # no spin before the later ops: one would take 300 ms of wall time, a busy machine or not
        assert all(b.t_start_ns - a.t_end_ns < 300_000_000 for a, b in zip(recs, recs[1:]))
    cp, r = run(exe, "--op", "write", "--size", "4k", "--path", str(tmp_path / "z{i}"))
    assert r.meta["compute_ms"] == "0"
    assert r.records[0].t_start_ns - int(r.summary["t_go_ns"]) < 300_000_000     # not the spin's 300 ms


def test_the_summary_has_the_machines_cpu_time_from_the_go(exe, tmp_path):
    """cpus, cpu_s and idle_s: the machine's CPU seconds and idle seconds from the go to the last worker's end
    (/proc/uptime, 10 ms steps): a worker computing 0.3 s first keeps one CPU busy that long."""
    t0 = time.time_ns()
    cp, r = run(exe, "--op", "write", "--size", "4k", "--path", str(tmp_path / "c{i}"), "--compute-ms", "300")
    t1 = time.time_ns()
    assert cp.returncode == 0, cp.stderr
    n, cpu, idle = int(r.summary["cpus"]), float(r.summary["cpu_s"]), float(r.summary["idle_s"])
    assert n == os.sysconf("SC_NPROCESSORS_ONLN")
    wall = (r.records[0].t_end_ns - int(r.summary["t_go_ns"])) / 1e9
    assert n * (wall - 0.02) <= cpu <= n * ((t1 - t0) / 1e9 + 0.02)    # within the engine's run, a clock step each end
    assert 0 <= idle and cpu - idle >= 0.25


def _held(pid, fifo, n, deadline):
    """The n children of pid holding fifo open, once all n are asleep in it: {child: its /proc/PID/schedstat}."""
    while True:
        kids = {k: st for k, (st, _) in _children(pid).items() if _holds(k, fifo)}
        if len(kids) == n and all(st == "S" for st in kids.values()):
            return {k: _schedstat(k) for k in kids}
        assert time.monotonic() < deadline, f"the workers never all waited in {fifo}: {kids}"
        time.sleep(0.01)


def test_the_summary_has_the_workers_wait_for_a_cpu(exe, tmp_path):
    """op_s, op_cpu_s and op_wait_s: the workers' time in ops, and on a CPU and ready without one over their op
    loops (/proc/self/schedstat). Three readers pinned to one CPU: every one's first op reads FIFO A and its last
    FIFO B, each holding them there until the test closes it; between, 100 reads of 1 MiB from the page cache
    (never asleep). While they wait in A and in B the test takes each one's scheduler clock: their op loops hold
    the stretch between, so the summary's figures are at least the clocks' gains, and at most the workers' lives;
    woken together by A's EOF on one CPU, the others wait while one reads, so some wait is there whatever else the
    machine runs. How large a share of the ops' time they wait (about 2/3, and hardly any for one alone, on a quiet
    machine) is tests/bench/cpu_bench.py's."""
    if os.cpu_count() < 2 or not shutil.which("taskset"):
        pytest.skip("needs 2 CPUs and taskset")
    fa, fb, data = tmp_path / "A", tmp_path / "B", tmp_path / "data"
    os.mkfifo(fa)
    os.mkfifo(fb)
    data.write_bytes(b"d" * (1 << 20))
    K = 102             # as many lines as ops per worker: op i of every rank reads line i
    lst = tmp_path / "list"
    lst.write_text(f"{fa}\n" + f"{data}\n" * (K - 2) + f"{fb}\n")
    p = subprocess.Popen(["taskset", "-c", "0", exe, "--op", "read", "--procs", "3", "--files-per-proc", str(K),
                          "--file-list", str(lst), "--timeout", "120"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        w = _open_fifo_for_write(fa, deadline)
        c0 = _held(p.pid, fa, 3, deadline)
        os.close(w)                                 # EOF: all three wake at once
        w = _open_fifo_for_write(fb, deadline)
        c1 = _held(p.pid, fb, 3, deadline)
        os.close(w)
        out, err = p.communicate(timeout=60)
        t_exit = time.time_ns()
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
    assert p.returncode == 0, err
    r = eng.parse_output(out)
    s = r.summary
    assert s["sched"] == "1" and len(r.records) == 3 * K and all(x.ok for x in r.records)
    assert sorted({x.bytes for x in r.records if 0 < x.i < K - 1}) == [1 << 20]
    assert float(s["op_s"]) == pytest.approx(sum(x.t_end_ns - x.t_start_ns for x in r.records) / 1e9, abs=1e-5)
    assert set(c0) == set(c1)
    cpu = sum(c1[k][0] - c0[k][0] for k in c0) / 1e9
    wait = sum(c1[k][1] - c0[k][1] for k in c0) / 1e9
    assert cpu > 0 and wait > 0
    assert float(s["op_cpu_s"]) >= cpu - 1e-6 and float(s["op_wait_s"]) >= wait - 1e-6
    assert float(s["op_cpu_s"]) + float(s["op_wait_s"]) <= 3 * (t_exit - int(s["t_go_ns"])) / 1e9


def test_hogs_compute_beside_the_workers_and_end_with_them(exe, tmp_path):
    """--hogs N: N more processes spin (user CPU) while the workers do their ops, and are gone when the engine
    exits; the workers' ops are the same. The worker's read of a FIFO holds it in its op until the test writes:
    meanwhile the engine's other children are the 2 hogs, running and gaining CPU time (a busy machine only makes
    that take longer)."""
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    p = subprocess.Popen([exe, "--op", "read", "--size", "4k", "--path", str(fifo), "--hogs", "2", "--timeout", "120"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        w = _open_fifo_for_write(fifo, deadline)        # the worker is in its op's open, and then its read
        while not any(_holds(k, fifo) for k in _children(p.pid)):
            assert time.monotonic() < deadline, "the worker never opened the FIFO"
            time.sleep(0.01)
        kids = _children(p.pid)
        hogs = {k: v for k, v in kids.items() if not _holds(k, fifo)}
        assert len(kids) == 3 and len(hogs) == 2, kids
        assert all(state == "R" for state, _ in hogs.values()), hogs      # spinning: never asleep
        while any(_children(p.pid).get(k, ("", 0))[1] <= t for k, (_, t) in hogs.items()):
            assert time.monotonic() < deadline, "a hog got no CPU time while the worker was in its op"
            time.sleep(0.01)
        assert set(hogs) <= set(_children(p.pid))       # still there while the worker waits
        os.write(w, b"x" * 4096)
        os.close(w)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
    assert p.returncode == 0, err
    r = eng.parse_output(out)
    assert r.meta["hogs"] == "2" and len(r.records) == 1 and r.summary["ok"] == "1" and r.records[0].bytes == 4096
    assert not [k for k in hogs if os.path.exists(f"/proc/{k}")]     # no hog outlives its engine
    cp, r = run(exe, "--op", "write", "--size", "4k", "--path", str(tmp_path / "z{i}"))
    assert r.meta["hogs"] == "0"


def test_hogs_already_run_when_the_first_op_comes(exe, tmp_path):
    """The hogs start before the start wait (a load starting with the first op delayed it by a time slice), and the
    go waits until they have run >= 100 ms. With the start 1 s away the worker's read of a FIFO holds it in its first
    op: the hog then found was forked before the start (the engine had 1 s to launch) and >= 100 ms before the go
    (its start time, /proc/PID/stat), and has never slept since (no voluntary context switch): it spun through the
    wait, however little CPU a busy machine gave it (that figure is tests/bench/cpu_bench.py's). Without
    --start-at the go still comes >= 100 ms after the launch."""
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    start = time.time_ns() + 1_000_000_000
    p = subprocess.Popen([exe, "--op", "read", "--size", "4k", "--path", str(fifo), "--hogs", "1",
                          "--start-at", str(start), "--timeout", "120"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        w = _open_fifo_for_write(fifo, deadline)        # the worker is in its first op
        while not any(_holds(k, fifo) for k in _children(p.pid)):
            assert time.monotonic() < deadline, "the worker never opened the FIFO"
            time.sleep(0.01)
        kids = _children(p.pid)
        hogs = [k for k in kids if not _holds(k, fifo)]
        assert len(kids) == 2 and len(hogs) == 1, kids
        (hog,) = hogs
        forked = _forked_ns(hog)
        state, slept = kids[hog][0], _voluntary_switches(hog)
        os.write(w, b"x" * 4096)
        os.close(w)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
    assert p.returncode == 0, err
    r = eng.parse_output(out)
    assert r.summary["ok"] == "1" and r.records[0].bytes == 4096 and r.records[0].t_start_ns >= start
    go = int(r.summary["t_go_ns"])
    assert forked[1] < start and forked[0] + 100_000_000 <= go, (forked, start, go)
    assert state == "R" and slept == 0, (state, slept)      # runnable from its fork into the worker's op
    t = time.monotonic()
    cp, r = run(exe, "--op", "write", "--size", "4k", "--path", str(tmp_path / "n{i}"), "--hogs", "1")
    assert cp.returncode == 0 and time.monotonic() - t >= 0.1
    assert int(r.summary["t_go_ns"]) - int(r.summary["t_launch_ns"]) >= 100_000_000


def test_gap_spins_between_calls_and_leaves_them_out_of_the_ops(exe, tmp_path):
    """--gap-us N: N us of computing between two data calls of an op (not after the last), left out of the op's
    time and, op after op, out of the worker's later times: 2 files of 10 calls each, 9 gaps of 20 ms per file."""
    t = time.monotonic()
    cp, r = run(exe, "--op", "write", "--size", "80k", "--block", "8k", "--files-per-proc", "2",
                "--path", str(tmp_path / "g{i}"), "--gap-us", "20000")
    wall = time.monotonic() - t
    assert cp.returncode == 0, cp.stderr
    assert r.meta["gap_us"] == "20000" and [x.bytes for x in r.records] == [81920, 81920]
    assert wall >= 0.36                                    # 18 gaps of 20 ms were spun
    a, b = r.records
    assert a.t_end_ns - a.t_start_ns < 90_000_000         # not the 180 ms of its gaps
    assert 0 <= b.t_start_ns - a.t_end_ns < 90_000_000    # the second op starts where the first ended, less the gaps
    assert float(r.summary["span_s"]) < 0.18
    cp, r = run(exe, "--op", "read", "--size", "80k", "--block", "8k", "--path", str(tmp_path / "g0"),
                "--gap-us", "20000")
    assert cp.returncode == 0 and r.records[0].bytes == 81920
    assert r.records[0].t_end_ns - r.records[0].t_start_ns < 90_000_000
    cp, r = run(exe, "--op", "write", "--size", "4k", "--path", str(tmp_path / "z{i}"))
    assert r.meta["gap_us"] == "0"


def test_idle_sleeps_before_every_op_but_the_first_and_leaves_it_out(exe, tmp_path):
    """--idle-ms N: a worker sleeps N ms before each op after its first; the sleeps are out of its times: 3 reads, 2
    sleeps of 150 ms, on two workers."""
    for r_ in range(2):
        for i in range(3):
            (tmp_path / f"d{r_}_{i}").write_bytes(b"y" * 1000)
    t = time.monotonic()
    cp, r = run(exe, "--op", "read", "--procs", "2", "--files-per-proc", "3", "--size", "1000",
                "--path", str(tmp_path / "d{rank}_{i}"), "--idle-ms", "150")
    wall = time.monotonic() - t
    assert cp.returncode == 0, cp.stderr
    assert r.meta["idle_ms"] == "150" and [x.bytes for x in r.records] == [1000] * 6
    assert wall >= 0.3                                     # two sleeps per worker, the workers side by side
    for rank in (0, 1):
        a, b, c = sorted((x for x in r.records if x.rank == rank), key=lambda x: x.i)
        assert 0 <= b.t_start_ns - a.t_end_ns < 100_000_000 and 0 <= c.t_start_ns - b.t_end_ns < 100_000_000
    assert float(r.summary["span_s"]) < 0.2                # not the 300 ms slept
    assert eng.engine_argv("read", path="p", idle_ms=40)[-2:] == ["--idle-ms", "40"]


@pytest.mark.parametrize("args,msg", [
    ([], "--op is required"),
    (["--op", "read", "--path", "x", "--hogs", "-1"], "--hogs"),
    (["--op", "read", "--path", "x", "--compute-ms", "-5"], "--compute-ms"),
    (["--op", "read", "--path", "x", "--gap-us", "-1"], "--gap-us"),
    (["--op", "read", "--path", "x", "--idle-ms", "-1"], "--idle-ms"),
    (["--op", "copy", "--path", "x"], "--op: expected create, write, read, stat or fstat"),
    (["--op", "read"], "exactly one of --path"),
    (["--op", "read", "--path", "x", "--file-list", "y"], "exactly one of --path"),
    (["--op", "write", "--path", "x"], "--op write needs --size"),
    (["--op", "read", "--path", "x", "--procs", "0"], "--procs"),
    (["--op", "read", "--path", "x", "--procs", "two"], "--procs"),
    (["--op", "read", "--path", "x", "--size", "1x"], "--size: not a size"),
    (["--op", "read", "--path", "x", "--backend", "nfs"], "--backend"),
    (["--op", "read", "--path", "x", "--timeout", "-1"], "--timeout"),
    (["--op", "read", "--path", "x", "--start-at", "soon"], "--start-at"),
    (["--op", "read", "--path", "x", "--bogus"], "unknown option"),
    (["--op", "read", "--path", "x", "extra"], "unexpected argument"),
    (["--op", "read", "--file-list", "/nonexistent/list"], "--file-list"),
])
def test_bad_arguments_exit_2(exe, args, msg):
    cp = subprocess.run([exe, *args], capture_output=True, text=True, timeout=10)
    assert cp.returncode == 2
    assert "mtcengine: error:" in cp.stderr and msg in cp.stderr
    assert cp.stdout == ""


def test_gfarm_backend_without_config_fails_cleanly(exe, tmp_path):
    env = dict(os.environ, GFARM_CONFIG_FILE=str(tmp_path / "missing.conf"))
    cp = subprocess.run([exe, "--backend", "gfarm", "--op", "read", "--procs", "2",
                         "--path", "/x"], capture_output=True, text=True, timeout=30, env=env)
    r = eng.parse_output(cp.stdout)
    assert cp.returncode == 1 and len(r.records) == 2
    assert all(not x.ok and ("gfarm_initialize" in x.error or "without libgfarm" in x.error)
               for x in r.records)


# ------------------------------------------------------------------------- Python wrapper
def test_wrapper_argv_launcher_and_points(exe, tmp_path):
    argv = eng.engine_argv("write", path=str(tmp_path / "w{rank}"), procs=2, size=4096,
                           timeout=20, fsync=True, exe=exe)
    assert argv[:5] == [exe, "--backend", "posix", "--op", "write"]
    # a launcher template as the orchestrator gives it; `env` stands in for `mtcbed exec`
    r = eng.run_engine(argv, ["env", "MTC_HOST={host}"], host="h1")
    assert r.host == "h1" and r.returncode == 0 and len(r.records) == 2
    argv = eng.engine_argv("read", path=str(tmp_path / "w{rank}"), procs=2, size=4096,
                           rank_base=0, exe=exe)
    r2 = eng.run_engine(argv)
    pts = eng.points_from_runs("B1L", [r2], file_size=4096, procs_per_host=2, hosts=1,
                               repeat=1, config={"cache": "none dropped"})
    t, b = pts
    assert (t.metric, b.metric, t.ok, b.ok, t.repeat, t.tool) == ("T1L", "B1L", True, True, 1,
                                                                   "native")
    assert b.value == pytest.approx(t.value * 4096)
    assert t.config["cache"] == "none dropped" and t.config["engine_ops"] == 2
    tm = eng.points_from_runs("Tm", [r], file_size=0, procs_per_host=2, hosts=1, repeat=0)
    assert [p.metric for p in tm] == ["Tm"]
    with pytest.raises(eng.EngineError, match="rejected its arguments"):
        eng.run_engine([exe, "--op", "nope", "--path", "x"])
    with pytest.raises(ValueError):
        eng.engine_argv("read")


def test_aggregate_across_hosts(exe, tmp_path):
    # two "hosts" started together with --start-at and distinct rank bases
    start = time.time_ns() + 300_000_000
    procs = []
    for h in range(2):
        argv = eng.engine_argv("write", path=str(tmp_path / "h{rank}.{i}"), procs=2,
                               files_per_proc=2, size=1000, start_at_ns=start,
                               rank_base=2 * h, exe=exe)
        procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, text=True))
    runs = [eng.parse_output(p.communicate(timeout=30)[0]) for p in procs]
    agg = eng.aggregate(runs)
    assert (agg.ops, agg.ok, agg.bytes) == (8, 8, 8000)
    assert sorted({x.rank for r in runs for x in r.records}) == [0, 1, 2, 3]
    assert agg.first_start_ns >= start


def test_parse_output_truncated():
    text = ("#mtcengine\tversion=1\n" + "\t".join(eng.COLUMNS) + "\n"
            "0\t0\tread\t/x\t1\t1\t2\t1\t0\t-\n")
    with pytest.raises(TruncatedOutput, match="#summary"):
        eng.parse_output(text)
    with pytest.raises(TruncatedOutput, match="op lines"):
        eng.parse_output(text + "#summary\tops=2\n")


# ------------------------------------------------------------------------- gfarm backend
@pytest.mark.testbed
def test_gfarm_backend_write_local_read_remote(testbed, exe):
    """Write with libgfarm on host 1, read back over gfarm2fs on host 2: bytes exact, and
    the replica is on host 1 (write-local), per gfwhere."""
    h1, h2 = testbed.hosts[:2]
    size, gdir = 3 * 1024 * 1024 + 123, f"/mtcengine-test-{os.getpid()}"
    testbed.exec(h1, ["gfmkdir", "-p", gdir])
    try:
        w = testbed.exec(h1, eng.engine_argv("write", path=f"{gdir}/f{{rank}}", procs=2,
                                             size=size, backend="gfarm", timeout=60, exe=exe),
                         check=False)
        rw = eng.parse_output(w.stdout)
        assert w.returncode == 0, (w.stdout, w.stderr)
        assert [x.bytes for x in rw.records] == [size, size]
        for r in range(2):
            assert testbed.where(f"{gdir}/f{r}") == [h1]
        mnt = testbed.mount(h2)
        rd = testbed.exec(h2, eng.engine_argv("read", path=f"{mnt}{gdir}/f{{rank}}", procs=2,
                                              size=size, backend="posix", timeout=60, exe=exe),
                          check=False)
        rr = eng.parse_output(rd.stdout)
        assert rd.returncode == 0, (rd.stdout, rd.stderr)
        assert [x.bytes for x in rr.records] == [size, size] and all(x.ok for x in rr.records)
        st = testbed.exec(h2, eng.engine_argv("fstat", path=f"{gdir}/f{{rank}}", procs=2, backend="gfarm",
                                              timeout=60, exe=exe), check=False)
        assert st.returncode == 0, (st.stdout, st.stderr)
        assert [(x.op, x.ok) for x in eng.parse_output(st.stdout).records] == [("fstat", True)] * 2
    finally:
        testbed.exec(h1, ["gfrm", "-rf", gdir], check=False)


def test_run_on_hosts_in_parallel(exe, tmp_path):
    start = eng.start_time(0.3)
    plans = [(h, eng.engine_argv("create", path=str(tmp_path / "{rank}"), procs=2,
                                 rank_base=2 * n, start_at_ns=start, exe=exe))
             for n, h in enumerate(["hA", "hB"])]
    runs = eng.run_on_hosts(plans, ["env", "HOST={host}"])
    assert [r.host for r in runs] == ["hA", "hB"]
    assert sorted(x.rank for r in runs for x in r.records) == [0, 1, 2, 3]
    pts = eng.points_from_runs("Tm", runs, file_size=0, procs_per_host=2, hosts=2, repeat=0)
    assert pts[0].ok and pts[0].config["hosts_run"] == ["hA", "hB"]
    assert pts[0].value == pytest.approx(eng.aggregate(runs).ops_per_s)
