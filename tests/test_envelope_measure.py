"""`mtcenvelope measure` on the real testbed: every metric from a small sweep, placement proven
with gfwhere (by the harness and again here), the network visible at 100 Mbit/s, a gfsd killed
mid-sweep, Ctrl-C."""
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from conftest import mtcbed
from mtcio.envelope.export import load
from mtcio.envelope.stats import ci90

CLI = [sys.executable, "-m", "mtcio.envelope.cli", "measure"]
pytestmark = pytest.mark.testbed


def measure(*args, timeout=240):
    cp = subprocess.run(CLI + [str(a) for a in args], capture_output=True, text=True,
                        timeout=timeout)
    assert cp.returncode == 0, cp.stderr[-3000:]
    return cp


def npoints(db):
    if not os.path.exists(db):
        return 0
    try:
        con = sqlite3.connect(db, timeout=5)
        try:
            return con.execute("SELECT COUNT(*) FROM envelope_points").fetchone()[0]
        finally:
            con.close()
    except sqlite3.OperationalError:
        return 0


def test_a_points_rate_is_the_rate_of_its_mean_time():
    """gfarm2fs stalls ~45 ms at random: 140, 21 and 20 ops/s are 35 ms per op on average, 28.6 ops/s."""
    ci = ci90([140.0, 21.0, 20.0])
    t = (1 / 140 + 1 / 21 + 1 / 20) / 3
    assert ci["mean"] == pytest.approx(1 / t, rel=1e-12) and round(ci["mean"], 1) == 28.6
    assert ci["low"] < ci["mean"] < ci["high"] == math.inf        # the time's interval reaches 0
    sd = math.sqrt(sum((1 / v - t) ** 2 for v in (140, 21, 20)) / 2)
    assert ci["rel_halfwidth"] == pytest.approx(2.920 * sd / math.sqrt(3) / t, rel=1e-12)
    steady = ci90([100.0, 100.0])
    assert steady["mean"] == 100.0 and steady["rel_halfwidth"] == 0.0
    assert ci90([5.0]) is None and ci90([0.0, 3.0])["rel_halfwidth"] == math.inf


def test_small_sweep_every_metric_placement_checked(testbed, tmp_path):
    db = tmp_path / "e.db"
    cp = measure("--db", db, "--name", "small", "--sizes", "1k,1m", "--procs", "1,2",
                 "--repeat", "1", "--precision", "0", "--keep-files", "--workdir", "/envtest",
                 "--write-compute-ms", "20")
    assert "100.0%" in cp.stderr                  # the progress bar reached the end
    df = load(db, "small")
    assert set(df["metric"]) == {"Tm", "Ts", "Tf", "T1L", "B1L", "T1R", "B1R", "TN", "BN", "TL", "BL"}
    assert df["ok"].all(), df.loc[~df["ok"], "error"].tolist()
    assert (df["value"] > 0).all()
    for m in ("T1L", "T1R", "TN", "TL"):          # 2 sizes x 2 concurrencies each
        assert len(df[df.metric == m]) == 4
    assert (df["hosts"] == 4).all()
    # the machine's load looked at for 0.5 s before the sweep (--look), kept in the run's meta
    con = sqlite3.connect(db)
    seen = json.loads(con.execute("SELECT meta FROM runs WHERE name = 'small'").fetchone()[0])["machine_before"]
    con.close()
    assert set(seen) == {"seconds", "cpu", "disk", "written_Bps", "busy", "waited_s"}
    assert 0.5 <= seen["seconds"] < 1.5 and 0 <= seen["cpu"] <= 1 and 0 <= seen["disk"] <= 1
    # what each point rests on: files per process, ops, bytes per op (envelope/README.md)
    for (m, size, ppn), want in {("TL", 1024, 2): (16, 16), ("T1R", 1 << 20, 1): (2, 2),
                                 ("TN", 1024, 2): (1, 16), ("Tm", 0, 1): (16, 16),
                                 ("Ts", 0, 2): (16, 16), ("Tf", 0, 2): (16, 16)}.items():
        c = df[(df.metric == m) & (df.file_size == size) & (df.procs_per_host == ppn)] \
            .iloc[0].config
        assert (c["files_per_proc"], c["ops_per_proc"]) == want
        assert c["ops"] == want[1] * ppn * 4 and c["bytes_per_op"] == size
        assert c["precision"]["stopped"] == "fixed count (--precision 0)"
    # several ops per process: the share of their time the processes' first ops took, for the later ops' price
    assert all(0 < c["first_op_share"] < 1 for c in df.config)
    # writers compute first when asked (--write-compute-ms), as tasks do; readers never
    assert {c.get("compute_ms_before") for c in df[df.metric.isin(["TL", "BL"])].config} == {20}
    assert all("compute_ms_before" not in c for c in df[~df.metric.isin(["TL", "BL"])].config)
    assert all("hogs_per_host" not in c for c in df.config)
    ts = df[df.metric == "Ts"]
    assert len(ts) == 2 and ts.iloc[0].config["files"] == "the Tm run's, created on the next host"
    # Tf at the smallest size only, on T1L's files; each fstat asked gfarm2fs (~2-7 us when the kernel's cached
    # attributes answer, > 0.2 ms per process when gfarm2fs does)
    tf = df[df.metric == "Tf"]
    assert sorted(tf.procs_per_host) == [1, 2] and tf.iloc[0].config["files"] == "the T1L run's"
    assert all(p.procs_per_host * p.hosts / p.value > 50e-6 for p in tf.itertuples())
    workdir = df["config"].iloc[0]["workdir"]
    try:
        # reads: the harness's own gfwhere check ...
        for _, p in df[df.metric.isin(["T1L", "T1R"])].iterrows():
            pl = p.config["placement"]
            assert pl["check"] == "gfwhere" and pl["as_required"] == pl["files"] > 0
            assert p.config["cache"]["mode"] == "evict"
            pairs = pl["reads_from"].items()
            assert all((r == o) == (p.metric == "T1L") for r, o in pairs)
        # ... and independently here: each host's files hold one replica, on that host, so a
        # reader of its own host's directory reads locally and of the next one's remotely
        one = df[(df.metric == "TL") & (df.file_size == 1024) & (df.procs_per_host == 2)].iloc[0]
        assert one.config["placement"]["on_writer_host_only"] == one.config["placement"]["files"]
        for host in testbed.hosts:
            d = f"{workdir}/s1024/p2h4/r0/{host}"
            names = testbed.exec(host, ["gfls", d]).stdout.split()
            assert len(names) == 2 * 16
            for n in names[:3]:
                assert testbed.where(f"{d}/{n}") == [host]
        t1r = df[(df.metric == "T1R") & (df.file_size == 1024) & (df.procs_per_host == 2)].iloc[0]
        for reader, owner in t1r.config["placement"]["reads_from"].items():
            assert reader not in testbed.where(f"{workdir}/s1024/p2h4/r0/{owner}/f0_0")
        shared = df[df.metric == "TN"].iloc[0].config["placement"]
        assert testbed.where(shared["file"]) == [testbed.hosts[0]]
    finally:
        testbed.exec(testbed.hosts[0], ["gfrm", "-rf", "/envtest"], check=False)


def test_an_envelope_measured_beside_computing_processes(testbed, tmp_path):
    """--hogs-per-host: every run beside that many spinning processes per host, said in every point and in the
    run's meta, where mtcpredict reads it; none of them left running."""
    from mtcio.predictor import envelope_source
    db = tmp_path / "e.db"
    measure("--db", db, "--name", "loaded", "--sizes", "64k", "--procs", "1", "--repeat", "2", "--precision", "0",
            "--metrics", "TL,BL,T1L,B1L", "--block", "8k", "--hogs-per-host", "1", "--quiet")
    df = load(db, "loaded")
    assert df["ok"].all() and len(df) == 8, df[["metric", "ok", "error"]]
    assert [c["hogs_per_host"] for c in df.config] == [1] * 8
    e = envelope_source.load(f"{db}:loaded")
    assert (e.hogs, e.block) == (1, 8192)
    assert subprocess.run(["pgrep", "-f", "mtcengine"], capture_output=True, text=True).stdout == ""


def test_an_envelope_measured_beside_computing_processes_per_kernel(testbed, tmp_path):
    """--hogs-per-kernel: the testbed's hosts share one kernel, so only the first host's engine runs the spinners;
    said in every point and in the run's meta; none of them left running."""
    from mtcio.predictor import envelope_source
    db = tmp_path / "e.db"
    measure("--db", db, "--name", "busy", "--sizes", "16k", "--procs", "1", "--host-counts", "2", "--repeat", "1",
            "--precision", "0", "--metrics", "Tm,T1L,B1L", "--block", "8k", "--hogs-per-kernel", "2", "--quiet")
    df = load(db, "busy")
    assert df["ok"].all() and sorted(df.metric) == ["B1L", "T1L", "Tm"], df[["metric", "ok", "error"]]
    h1, h2 = testbed.hosts[:2]
    assert [c["hogs_by_host"] for c in df.config] == [{h1: 2, h2: 0}] * 3
    assert [c["hogs_per_kernel"] for c in df.config] == [2] * 3
    assert all("hogs_per_host" not in c for c in df.config)
    assert all(0 <= c["idle_s"] <= c["cpu_s"] for c in df.config)     # the machine's clock over the two engines
    # the workers' clocks over their op loops: waits within their ops' time, CPU time beside it
    assert all(c["op_s"] > 0 and 0 <= c["op_wait_s"] <= c["op_s"] and c["op_cpu_s"] > 0 for c in df.config)
    e = envelope_source.load(f"{db}:busy")
    assert e.hogs == 0            # not a loaded twin per host: mtcpredict may take it as its main envelope
    assert e.meta["hogs_per_kernel"] == 2
    assert subprocess.run(["pgrep", "-f", "mtcengine"], capture_output=True, text=True).stdout == ""


def test_an_envelope_of_calls_apart(testbed, tmp_path):
    """--call-gap-us: every engine run computes that long between two calls, said in every point and in the run's
    meta, where mtcpredict reads it."""
    from mtcio.predictor import envelope_source
    db = tmp_path / "e.db"
    measure("--db", db, "--name", "apart", "--sizes", "64k", "--procs", "1", "--repeat", "1", "--precision", "0",
            "--metrics", "TL,T1L", "--block", "8k", "--call-gap-us", "200", "--quiet")
    df = load(db, "apart")
    assert df["ok"].all() and len(df) == 2, df[["metric", "ok", "error"]]
    assert [c["call_gap_us"] for c in df.config] == [200, 200]
    assert envelope_source.load(f"{db}:apart").call_gap_us == 200


def test_an_envelope_of_young_reads(testbed, tmp_path):
    """--young: T1L/B1L only, read at once after their write run (files written on the reader's host well under
    FUSE's 1 s timeouts before), no cache dropped, the replicas checked after the read; said in the run's meta,
    where mtcpredict reads it. Other metrics are refused."""
    from mtcio.predictor import envelope_source
    db = tmp_path / "e.db"
    measure("--db", db, "--name", "young", "--sizes", "4k", "--procs", "2", "--host-counts", "2", "--repeat", "2",
            "--precision", "0", "--ops-per-proc", "1", "--young", "--quiet")
    df = load(db, "young")
    assert df["ok"].all() and sorted(df.metric) == ["B1L", "B1L", "T1L", "T1L"], df[["metric", "ok", "error"]]
    for c in df.config:
        assert c["young"] and c["cache"]["mode"] == "kept" and 0 < c["age_s"] < 1
        assert "first_op_share" not in c                     # one op per process: no first-op share
        assert c["placement"]["check"] == "gfwhere after the read" and c["placement"]["as_required"] == 4
    assert envelope_source.load(f"{db}:young").young
    cp = subprocess.run(CLI + ["--db", str(db), "--name", "y2", "--young", "--metrics", "TL"], capture_output=True,
                        text=True, timeout=60)
    assert cp.returncode == 2 and "--young measures T1L and B1L only" in cp.stderr


def test_an_envelope_of_reads_after_idling(testbed, tmp_path):
    """--idle-ms: reads only, each reader sleeping before each op after its first; the first op (after the launch)
    is dropped, its mean time kept as first_op_s: 3 ops per process, 2 timed, on 2 hosts."""
    db = tmp_path / "i.db"
    t = time.monotonic()
    measure("--db", db, "--name", "idle", "--sizes", "4k", "--procs", "1", "--host-counts", "2", "--repeat", "1",
            "--precision", "0", "--ops-per-proc", "3", "--idle-ms", "300", "--metrics", "T1L,B1L,T1R,B1R", "--quiet")
    assert time.monotonic() - t >= 1.2                     # 2 reads x 2 sleeps of 0.3 s, one after the other
    df = load(db, "idle")
    assert df["ok"].all() and sorted(df.metric) == ["B1L", "B1R", "T1L", "T1R"], df[["metric", "ok", "error"]]
    for c in df.config:
        assert c["idle_ms"] == 300 and c["engine_ops"] == 4 and c["ops"] == 4 and c["first_op_s"] > 0
        assert c["ops_per_proc"] == 3 and c["op"].endswith("300 ms idle before each; each process's first op dropped")
        assert c["span_s"] < 0.3                           # the sleeps are out of the times
        assert "first_op_share" not in c                     # its first ops are dropped, their time is first_op_s
    for args, msg in [(["--metrics", "TL"], "measure reads only, not TL"),
                      (["--ops-per-proc", "1"], "needs 2 or more ops per process"),
                      (["--young"], "--idle-ms and --young: give one")]:
        cp = subprocess.run(CLI + ["--db", str(db), "--name", "i2", "--idle-ms", "50", *args], capture_output=True,
                            text=True, timeout=60)
        assert cp.returncode == 2 and msg in cp.stderr, cp.stderr


@pytest.mark.parametrize("counts,expect", [("1..all", [1, 2, 3, 4]), ("4,2", [4, 2])])
def test_host_counts_sweep(testbed, tmp_path, counts, expect):
    """Every host count writes and reads its own files (the cleanup of one host count used to
    remove the next one's directories: every write after the first failed, exit 0)."""
    db = tmp_path / "h.db"
    cp = measure("--db", db, "--name", "hc", "--host-counts", counts, "--sizes", "1k,128k",
                 "--procs", "1", "--repeat", "1", "--precision", "0",
                 "--metrics", "TL,BL,T1L,B1L,T1R,B1R", "--quiet")
    df = load(db, "hc")
    assert df["ok"].all(), df.loc[~df["ok"], "error"].tolist()[:3]
    assert sorted(set(df["hosts"])) == sorted(expect)
    for h in expect:
        got = df[df.hosts == h]
        assert set(got["metric"]) == ({"TL", "BL", "T1L", "B1L"} if h == 1 else
                                      {"TL", "BL", "T1L", "B1L", "T1R", "B1R"})
        assert set(got["file_size"]) == {1024, 128 << 10}
    assert "(0 failed)" in cp.stderr


def test_precision_target_repeats_until_the_interval_is_narrow(testbed, tmp_path):
    """Each point is repeated beyond --repeat until its 90 % interval is within +-5 % or its
    time is spent; the interval, the op count and why it stopped are stored with it."""
    db = tmp_path / "p.db"
    measure("--db", db, "--name", "prec", "--sizes", "1k", "--procs", "1", "--repeat", "3",
            "--max-repeat", "8", "--time-budget", "30", "--metrics", "Tm,TL,BL,T1L,B1L",
            "--quiet")
    df = load(db, "prec")
    assert df["ok"].all(), df.loc[~df["ok"], "error"].tolist()[:3]
    reps = {}
    for m, g in df.groupby("metric"):
        precs = [c["precision"] for c in g["config"]]
        assert all(p == precs[0] for p in precs)          # one interval for the point
        p = precs[0]
        reps[m] = len(g)
        assert p["repeats"] == p["repeats_ok"] == len(g) and 3 <= len(g) <= 8
        assert sorted(g["repeat"]) == list(range(len(g)))
        ci = ci90(list(g["value"]))
        fin = lambda x: x if math.isfinite(x) else None  # noqa: E731  (JSON: an unbounded end is null)
        assert p["ci90"] == [ci["low"], fin(ci["high"])] and p["mean"] == ci["mean"]
        assert p["rel_halfwidth"] == fin(ci["rel_halfwidth"])
        assert p["ops"] == sum(c["ops"] for c in g["config"]) == len(g) * 16 * 4
        assert p["met"] == (p["rel_halfwidth"] is not None and p["rel_halfwidth"] <= 0.05) and p["target"] == 0.05
        if m in ("Tm", "TL", "T1L"):
            if p["met"]:
                assert p["stopped"] == "target met"
            elif m == "TL" and p["stopped"].startswith("target met, then"):
                assert reps["TL"] > 3          # met at some point, went on for T1L's inputs
            else:
                assert p["stopped"] == "max repeats (8)" if len(g) == 8 else \
                    p["stopped"].startswith("time budget spent")
    assert reps["TL"] >= reps["T1L"]           # every T1L repeat reads its own write run
    assert reps["BL"] == reps["TL"] and reps["B1L"] == reps["T1L"]


def test_ctrl_c_keeps_the_points_measured_so_far(testbed, tmp_path):
    db = str(tmp_path / "c.db")
    p = subprocess.Popen(CLI + ["--db", db, "--name", "cc", "--sizes", "1k", "--procs", "1,2",
                                "--repeat", "50", "--quiet"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    while npoints(db) < 6 and time.monotonic() - t0 < 60 and p.poll() is None:
        time.sleep(0.2)
    assert npoints(db) >= 6
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 130, err
    assert err.count("interrupted:") == 1 and "files left under" in err, err
    kept = npoints(db)
    assert kept >= 6
    df = load(db, "cc")
    assert df["ok"].all()
    assert df.attrs["status"] == "interrupted"
    lst = subprocess.run([sys.executable, "-m", "mtcio.envelope.cli", "list", "--db", db,
                          "--json"], capture_output=True, text=True).stdout
    assert json.loads(lst)[0]["status"] == "interrupted"
    # no engine of this sweep left behind (its paths name the run: /mtcenvelope/cc-PID-...)
    time.sleep(0.5)
    ps = subprocess.run(["pgrep", "-u", "mtcbed", "-f", f"mtcenvelope/cc-{p.pid}-"],
                        capture_output=True, text=True).stdout
    assert not ps.strip(), ps


def test_gfsd_killed_mid_sweep(testbed, tmp_path):
    """A dead gfsd: its points fail with the reason (short per-point timeout), the sweep goes
    on to the end, nothing hangs."""
    db = str(tmp_path / "k.db")
    args = ["--db", db, "--name", "kill", "--sizes", "1k", "--procs", "1", "--repeat", "6",
            "--precision", "0",
            "--metrics", "TL,BL,T1L,B1L,T1R,B1R", "--timeout", "4", "--quiet"]
    p = subprocess.Popen(CLI + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        t0 = time.monotonic()
        while npoints(db) < 6 and time.monotonic() - t0 < 60 and p.poll() is None:
            time.sleep(0.1)
        st = json.loads(mtcbed("status", "--json").stdout)
        victim = next(h for h in st["hosts"] if h["name"] == testbed.hosts[1])
        assert victim["gfsd_pid"], st
        # the gfsd master and the children serving open connections (gfarm2fs keeps its own)
        kids = subprocess.run(["ps", "-o", "pid=", "--ppid", str(victim["gfsd_pid"])],
                              capture_output=True, text=True).stdout.split()
        for pid in [victim["gfsd_pid"], *map(int, kids)]:
            os.kill(pid, signal.SIGKILL)
        out, err = p.communicate(timeout=150)
    finally:
        if p.poll() is None:
            p.kill()
        mtcbed("down")             # the next test gets a healthy testbed
    assert p.returncode == 1, err[-2000:]         # some points failed: exit 1
    assert "failed) in" in err
    df = load(db, "kill")
    assert len(df) == 6 * 6                       # every planned point is there
    bad = df[~df["ok"]]
    assert len(bad) > 0 and df["ok"].sum() >= 6
    assert bad["error"].map(bool).all()
    print(bad[["metric", "repeat", "error"]].to_string())
    # the failed points name a reason: the timeout, the dead node, or inputs that could not be
    # written there
    assert bad["error"].str.contains(
        "timeout|no filesystem node|inputs not in place|placement|failed", regex=True).all()


def test_link_rate_makes_remote_reads_slower(bare_machine, tmp_path):
    mtcbed("up", "--nodes", "2", "--link-rate", "100mbit")
    db = tmp_path / "n.db"
    measure("--db", db, "--name", "net", "--sizes", "16m", "--procs", "1", "--repeat", "2",
            "--precision", "0",
            "--metrics", "T1L,B1L,T1R,B1R")
    df = load(db, "net")
    assert df["ok"].all(), df["error"].tolist()
    b1l = df[df.metric == "B1L"]["value"].mean()
    b1r = df[df.metric == "B1R"]["value"].mean()
    print(f"B1L {b1l / 2**20:.1f} MiB/s  B1R {b1r / 2**20:.1f} MiB/s")
    assert b1r < 0.5 * b1l
    assert b1r < 2 * 100e6 / 8       # two hosts' links of 100 Mbit/s


def test_block_sets_the_bytes_per_call(testbed, tmp_path):
    db = tmp_path / "b.db"
    measure("--db", db, "--name", "fits", "--metrics", "TL,BL,T1L,B1L", "--sizes", "64k", "--procs", "1",
            "--host-counts", "1", "--repeat", "1", "--precision", "0", "--ops-per-proc", "2", "--block", "2880",
            "--quiet")
    df = load(db, "fits")
    assert sorted(df["metric"]) == ["B1L", "BL", "T1L", "TL"] and df["ok"].all()
    assert {c["block"] for c in df["config"]} == {2880}
    meta = json.loads(sqlite3.connect(db).execute("SELECT meta FROM runs WHERE name = 'fits'").fetchone()[0])
    assert meta["block"] == 2880
    cp = subprocess.run(CLI + ["--db", str(db), "--name", "x", "--block", "0"], capture_output=True, text=True)
    assert cp.returncode == 2 and "--block: expected 1 byte .. 1 GiB, got '0'" in cp.stderr


def test_sizes_from_an_instance_in_one_call_per_file(testbed, tmp_path):
    """--sizes-from: the sweep spans the instance's file sizes (1 byte .. 1 MB, 3 points); --block whole: every
    file in one call, the block the largest size."""
    inst = tmp_path / "w.json"
    inst.write_text(json.dumps({"name": "w", "schemaVersion": "1.5", "workflow": {"specification": {
        "tasks": [{"name": "a", "id": "a", "parents": [], "children": [], "inputFiles": ["f0"],
                   "outputFiles": ["f1", "f2"]}],
        "files": [{"id": "f0", "sizeInBytes": 1}, {"id": "f1", "sizeInBytes": 0},
                  {"id": "f2", "sizeInBytes": 1000000}]}}}))
    db = tmp_path / "w.db"
    measure("--db", db, "--name", "own", "--metrics", "TL,BL,T1L,B1L", "--sizes-from", inst, "--size-points", "3",
            "--block", "whole", "--procs", "1", "--host-counts", "1", "--repeat", "1", "--precision", "0",
            "--ops-per-proc", "1", "--quiet")
    df = load(db, "own")
    assert df["ok"].all() and len(df) == 12
    assert sorted(set(df["file_size"])) == [1, 1000, 1000000]
    assert [c["block"] for c in df["config"]] == list(df["file_size"])     # each point's call: its whole file
    assert sorted({(m, s, c["bytes_per_op"]) for m, s, c in zip(df["metric"], df["file_size"], df["config"])
                   if m in ("TL", "T1L")}) == [(m, s, s) for m in ("T1L", "TL") for s in (1, 1000, 1000000)]
    meta = json.loads(sqlite3.connect(db).execute("SELECT meta FROM runs WHERE name = 'own'").fetchone()[0])
    assert meta["block"] == 1000000


def test_append_adds_repeats_to_a_run_and_is_needed_to_reuse_its_name(testbed, tmp_path):
    """Measuring before and after a workflow into one envelope (--append) continues the repeat numbers, so the
    predictor's mean covers both sweeps; the same name without --append is refused and stores nothing."""
    db = tmp_path / "a.db"
    sweep = ["--db", db, "--name", "env", "--metrics", "TL,BL", "--sizes", "4k", "--procs", "1",
             "--host-counts", "1", "--repeat", "2", "--precision", "0", "--quiet"]
    measure(*sweep)
    cp = subprocess.run(CLI + [str(a) for a in sweep], capture_output=True, text=True, timeout=240)
    assert cp.returncode == 2 and "run 'env' already exists" in cp.stderr and "give --append" in cp.stderr
    assert npoints(str(db)) == 4
    measure(*sweep, "--append")
    df = load(db, "env")
    assert sorted(df.loc[df["metric"] == "TL", "repeat"]) == [0, 1, 2, 3]
    assert sorted(df.loc[df["metric"] == "BL", "repeat"]) == [0, 1, 2, 3]
    assert len(df) == 8 and df["ok"].all()
