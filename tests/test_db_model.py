"""mtcprof model: the workflow YAML from a traced run, and the schema loader's checks."""
import copy
import shutil
import threading
import time
import sys

import pytest
import yaml

from mtcio.db import ingest as ing
from mtcio.db import ingest_read
from mtcio.db import workflow_model as wm
from mtcio.db.api import Store
from mtcio.db import model
from helpers.cli import run_model
from helpers.tracing import make_run, quiet, traced


@pytest.fixture
def wf_yaml(tmp_path, capsys):
    d, logs = make_run(tmp_path)
    db = tmp_path / "x.db"
    ing.ingest(str(db), str(logs), gfwhere_cmd=None, warn=quiet)
    out = tmp_path / "wf.yaml"
    rc, err = run_model(["--db", str(db), "--run", "R", "-o", str(out)], capsys)
    assert rc == 0, err
    return out, db


def test_model_values(wf_yaml):
    out, db = wf_yaml
    wf = wm.load(str(out))
    assert wf.run == "R" and [s.name for s in wf.stages] == ["S1", "S2"]
    s1, s2 = wf.stage("S1"), wf.stage("S2")
    assert (s1.tasks, s1.hosts, s1.rounds) == (2, 1, 2)
    # S1: t1 reads `in` (12 B, twice) 1-to-1, both read in2 (5000 B) N-to-1
    assert (s1.read.bytes_per_task.min, s1.read.bytes_per_task.mean, s1.read.bytes_per_task.max) == (0, 12, 24)
    assert s1.read.reread_factor == 2.0 and s1.read.files_per_task == 0.5
    assert (s1.shared.files, s1.shared.bytes, s1.shared.bytes_read_per_task) == (1, 5000, 7500)
    assert s1.shared.files_per_task == 1 and s2.shared.files_per_task is None
    # S2 reads what S1 wrote (out3, out): warm; S1 reads inputs that were there before the run
    assert (s2.read.warm_fraction, s1.read.warm_fraction, s1.shared.warm_fraction) == (1.0, 0.0, 0.0)
    # data files per process: S1's five cats/wc open 2, 1, 1, 2, 2 files; S2's cat reads out3, out, writes final
    assert (s1.files_per_process, s2.files_per_process) == (1.6, 3.0)
    assert s1.shared.op_size_quantiles == [5000] * 10 and s2.write.op_size_quantiles == [5012] * 10
    # S2's ops are out3 (5000 B) and out (12 B): each half of the points is a size that occurred, none between
    assert s2.read.op_size_quantiles == [12] * 5 + [5000] * 5
    # t1 opens `in` twice (two cats) and in2 twice, t2 in2 once
    assert (s1.read.opens_per_file, s1.shared.opens_per_file, s2.read.opens_per_file) == (2.0, 1.5, 1.0)
    assert s1.read.alpha is None                      # no Gfarm: locality unknown
    assert s1.write.bytes_per_task.max == 5000 and s1.metadata.creates_per_task == 1.5
    assert s2.write.rewrite_factor == 1.0              # final: 5,012 B written once
    assert (s1.write.redirected_fraction, s2.write.redirected_fraction) == (1.0, 1.0)   # every output a `>`
    assert (s2.tasks, s2.read.bytes_per_task.mean, s2.shared.files, s2.write.bytes_per_task.mean) == (1, 5012, 0, 5012)
    assert s2.envelope.read_file_size == (5000 + 12) // 2
    st = Store(db).stages("R").set_index("stage")
    assert s1.measured.span_s == pytest.approx(st.loc["S1", "span_s"])
    assert s1.metadata.ops_per_task == st.loc["S1", "meta_ops"] / 2
    # dump -> load round trip
    assert wm.from_dict(yaml.safe_load(wm.dump(wf))) == wf


def test_redirected_writes_are_told_from_own_writes(tmp_path, capsys):
    """A file created by the shell's `>` and written through the inherited fd 1 is redirected; cp's own is not."""
    d, logs = tmp_path / "d", tmp_path / "logs"
    d.mkdir(), logs.mkdir()
    (d / "in").write_bytes(b"x" * 3000)
    for task, cmd in (("a", "cp in o1 && cat in > o2"), ("b", "cp in o3 && cp in o4")):
        assert traced(logs, ["sh", "-c", f"cd {d} && {cmd}"], task, "S", "R").returncode == 0
    db = tmp_path / "x.db"
    ing.ingest(str(db), str(logs), gfwhere_cmd=None, warn=quiet)
    tf = Store(db).task_files("R").set_index("key")
    assert [bool(tf.loc[str(d / f), "redirected"]) for f in ("o1", "o2", "o3", "o4")] == [False, True, False, False]
    out = tmp_path / "wf.yaml"
    assert run_model(["--db", str(db), "--run", "R", "-o", str(out)], capsys)[0] == 0
    assert wm.load(str(out)).stage("S").write.redirected_fraction == 0.25


def test_files_left_for_exit_to_close_are_told(tmp_path, capsys):
    """A file written through an fd the program opened and never closed (dup'ed, one copy closed) leaves its close to
    the exit, which no traced call times; one it closed does not; a `>` output is redirected, not left open."""
    d, logs = tmp_path / "d", tmp_path / "logs"
    d.mkdir(), logs.mkdir()
    py = ("import os\n"
          "a = os.open('o1', os.O_WRONLY | os.O_CREAT, 0o644); os.write(a, b'x' * 100); os.close(a)\n"
          "b = os.open('o2', os.O_WRONLY | os.O_CREAT, 0o644); c = os.dup(b); os.write(b, b'y' * 50); os.close(b)\n"
          "os.write(1, b'z' * 7)\n"
          "os._exit(0)\n")
    assert traced(logs, ["sh", "-c", f"cd {d} && {sys.executable} -c \"{py}\" > o3"], "a", "S", "R").returncode == 0
    assert [(d / f).stat().st_size for f in ("o1", "o2", "o3")] == [100, 50, 7]
    db = tmp_path / "x.db"
    ing.ingest(str(db), str(logs), gfwhere_cmd=None, warn=quiet)
    tf = Store(db).task_files("R").set_index("key")
    assert [bool(tf.loc[str(d / f), "left_open"]) for f in ("o1", "o2", "o3")] == [False, True, False]
    assert [bool(tf.loc[str(d / f), "redirected"]) for f in ("o1", "o2", "o3")] == [False, False, True]
    out = tmp_path / "wf.yaml"
    assert run_model(["--db", str(db), "--run", "R", "-o", str(out)], capsys)[0] == 0
    w = wm.load(str(out)).stage("S").write
    assert (w.left_open_fraction, w.redirected_fraction) == (0.3333, 0.3333)


def test_compute_per_call_is_the_time_outside_io_over_the_calls(tmp_path, capsys):
    """Two dd's of 4 write(2) calls of 8 KiB each, 0.3 s apart, in one task: 10 calls reach the file system (per
    dd: its output's open and 4 writes; /dev/zero is no file, the shell's PATH look-ups no call) and the task spent
    >= 0.3 s outside I/O: >= 30 ms per call."""
    d, logs = tmp_path / "d", tmp_path / "logs"
    d.mkdir(), logs.mkdir()
    dd = "dd if=/dev/zero of={} bs=8k count=4 2>/dev/null"
    cmd = f"cd {d} && {dd.format('o1')}; sleep 0.3; {dd.format('o2')}"
    assert traced(logs, ["sh", "-c", cmd], "a", "S", "R").returncode == 0
    db = tmp_path / "x.db"
    ing.ingest(str(db), str(logs), gfwhere_cmd=None, warn=quiet)
    tf = Store(db).task_files("R")
    calls = tf["writes"].sum() + sum(-(-b // (128 << 10)) for b in tf["bytes_read"]) + tf["opens"].sum()
    assert calls == 10, tf[["key", "opens", "reads", "writes", "bytes_read"]]
    out = tmp_path / "wf.yaml"
    assert run_model(["--db", str(db), "--run", "R", "-o", str(out)], capsys)[0] == 0
    g = wm.load(str(out)).stage("S").compute_per_call_us
    assert 300e3 / 10 <= g < 0.6e6 / 10, g

@pytest.mark.parametrize("path,value,msg", [
    (("stages", 0, "tasks"), 0, r"stages\[0\].tasks: must be >= 1"),
    (("stages", 1, "read", "alpha"), 1.5, r"stages\[1\].read.alpha: must be <= 1"),
    (("stages", 0, "read", "bytes_per_task"), {"min": 5, "mean": 1, "max": 9}, r"stages\[0\].read.bytes_per_task: needs min <= mean"),
    (("stages", 0, "shared", "bytes"), "lots", r"stages\[0\].shared.bytes: must be a number"),
    (("stages", 0, "write", "op_size_quantiles"), [5, 3], r"stages\[0\].write.op_size_quantiles: must be in increasing"),
    (("stages", 0, "write", "op_size_quantiles"), [5, "x"], r"stages\[0\].write.op_size_quantiles\[1\]: must be a num"),
    (("stages", 0, "write", "op_size_quantiles"), 5, r"stages\[0\].write.op_size_quantiles: must be a non-empty list"),
    (("stages", 0, "write", "redirected_fraction"), 1.5, r"stages\[0\].write.redirected_fraction: must be <= 1"),
    (("stages", 0, "wirte"), {}, r"stages\[0\].wirte: unknown field"),
    (("mtcio_workflow",), 7, r"mtcio_workflow: schema version 7 not supported"),
])
def test_model_validation_names_field(wf_yaml, tmp_path, path, value, msg):
    out, _ = wf_yaml
    data = yaml.safe_load(out.read_text())
    bad = copy.deepcopy(data)
    node = bad
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(bad))
    with pytest.raises(wm.ModelError, match=msg):
        wm.load(str(p))


def test_model_missing_required(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text("mtcio_workflow: 1\nstages:\n  - name: a\n    tasks: 3\n")
    with pytest.raises(wm.ModelError, match=r"stages\[0\].hosts: required field missing"):
        wm.load(str(p))
    p.write_text("mtcio_workflow: 1\nstages:\n  - {name: a, tasks: 3, hosts: 2}\n")
    wf = wm.load(str(p))                               # minimal model: defaults for the rest
    assert wf.stages[0].read.bytes_per_task.mean == 0 and wf.stages[0].rounds == 2
    p.write_text(": : :")
    with pytest.raises(wm.ModelError, match="not valid YAML"):
        wm.load(str(p))


def test_model_unknown_run(wf_yaml, tmp_path, capsys):
    _, db = wf_yaml
    rc, err = run_model(["--db", str(db), "--run", "nope", "-o", str(tmp_path / "o.yaml")], capsys)
    assert rc == 2 and "no run named 'nope'" in err


def test_stdio_calls_are_counted_as_the_system_calls_of_their_buffer(tmp_path, capsys):
    """fwrite of 64 B x 1000 is counted as the write(2)s of an 8 KiB stream buffer (glibc's, at gfarm2fs's
    st_blksize): 8, so the model's bytes per call is 64,000 / 8; 1-byte preads are system calls themselves."""
    from mtcio.preload.testing import prog
    d, logs = tmp_path / "d", tmp_path / "logs"
    d.mkdir(), logs.mkdir()
    assert traced(logs, [prog("bench_io"), "fwrite", str(d / "f"), "1000"], "t1", "W", "R").returncode == 0
    assert traced(logs, [prog("bench_io"), "pread", str(d / "f"), "500"], "t2", "P", "R").returncode == 0
    db = tmp_path / "x.db"
    ing.ingest(str(db), str(logs), gfwhere_cmd=None, warn=quiet)
    out = tmp_path / "wf.yaml"
    rc, err = run_model(["--db", str(db), "--run", "R", "-o", str(out)], capsys)
    assert rc == 0, err
    wf = wm.load(str(out))
    assert wf.stage("W").write.bytes_per_call == 8000.0 and wf.stage("W").write.bytes_per_task.mean == 64000
    assert wf.stage("P").read.bytes_per_call == 1.0


def test_stats_cached_fraction_counts_stats_under_20_us():
    import pandas as pd
    cols = ["stats", "unlinks", "renames", "mkdirs", "rmdirs", "truncates", "fsyncs", "seeks", "t_meta_ns"]
    df = pd.DataFrame([[4, 0, 0, 0, 0, 0, 0, 0, 4 * 2_000],         # 4 stats at 2 us: the cache
                       [2, 0, 0, 0, 0, 0, 0, 0, 2 * 150_000],       # 2 at 150 us: gfmd
                       [2, 1, 0, 0, 0, 0, 0, 0, 10_000],            # with an unlink: not told apart, not cached
                       [2, 0, 0, 0, 0, 0, 0, 4, 4_000 + 4 * 9_000],  # and 4 seeks at 9 us: the cache
                       [2, 0, 0, 0, 0, 0, 0, 1, 4_000 + 500_000]],  # a seek that asked gfarm2fs: not told apart
                      columns=cols)
    assert model._stats_cached(df) == 0.5
    assert model._stats_cached(df.iloc[:0]) is None and model._stats_cached(df.assign(stats=0)) is None


def two_tasks_metadata(tmp_path, capsys, d, py):
    """The model's metadata of stage S after two traced tasks ran `py` (paths under d recorded)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for t in ("a", "b"):
        r = traced(logs, [sys.executable, "-c", py], t, "S", "R", MTCPROF_INCLUDE=str(d))
        assert r.returncode == 0, r.stderr
    db = tmp_path / "x.db"
    ing.ingest(str(db), str(logs), gfwhere_cmd=None, warn=quiet)
    out = tmp_path / "wf.yaml"
    assert run_model(["--db", str(db), "--run", "R", "-o", str(out)], capsys)[0] == 0
    return wm.load(str(out)).stage("S").metadata


def test_seeks_to_the_end_are_counted_per_task(tmp_path, capsys):
    """cfitsio seeks to the end of a FITS file after it re-opens it; on gfarm2fs that asks for the file's size. Two
    tasks, each reading a file with two seeks to its end (and one to its start, not counted): 2.0 per task."""
    d = tmp_path / "d"
    d.mkdir()
    (d / "in").write_bytes(b"x" * 100)
    py = (f"import os; fd = os.open({str(d / 'in')!r}, os.O_RDONLY)\n"
          "for wh in (os.SEEK_END, os.SEEK_SET, os.SEEK_END): os.lseek(fd, 0, wh)\n"
          "os.read(fd, 100); os.close(fd)\n")
    md = two_tasks_metadata(tmp_path, capsys, d, py)
    assert (md.seeks_end_per_task, md.stats_per_task, md.failed_per_task) == (2.0, 0.0, 0.0)


def test_failed_lookups_are_counted_per_task(tmp_path, capsys):
    """Names looked up and not found are requests to the metadata server too: a stat and an open of missing names,
    then a write of a file that exists afterwards; two tasks, 2 failures each."""
    d = tmp_path / "d"
    d.mkdir()
    py = (f"import os; os.chdir({str(d)!r})\n"
          "for call in (lambda: os.stat('nope1'), lambda: os.open('nope2', os.O_RDONLY)):\n"
          "    try: call()\n"
          "    except FileNotFoundError: pass\n"
          "fd = os.open('out' + os.environ['MTCPROF_TASK'], os.O_WRONLY | os.O_CREAT, 0o644); os.write(fd, b'x'); "
          "os.close(fd)\n")
    md = two_tasks_metadata(tmp_path, capsys, d, py)
    assert (md.failed_per_task, md.stats_per_task, md.creates_per_task) == (2.0, 0.0, 1.0)


def test_idle_before_ms_is_the_hosts_io_idle_before_a_tasks_first_open(tmp_path, capsys):
    """Task h (stage H, the host's first I/O) holds a open for 1 s; r0 (stage R0) opens b 0.3 s into it: idle 0;
    r4 (stage R4) opens c 0.4 s after h closed a."""
    d, logs = tmp_path / "d", tmp_path / "logs"
    d.mkdir(), logs.mkdir()
    for n in "abc":
        (d / n).write_bytes(b"x" * 100)
    rd = "dd if={} of=/dev/null status=none"
    res = {}

    def task(name, stage, cmd):
        res[name] = traced(logs, ["sh", "-c", f"cd {d} && {cmd}"], name, stage, "I", MTCPROF_INCLUDE=str(d))
    h = threading.Thread(target=task, args=("h", "H", "exec 3<a; sleep 1; exec 3<&-"))
    h.start()
    time.sleep(0.3)
    task("r0", "R0", rd.format("b"))
    h.join()
    task("r4", "R4", f"sleep 0.4 && {rd.format('c')}")
    assert all(r.returncode == 0 for r in res.values()), [r.stderr for r in res.values()]
    db = tmp_path / "x.db"
    ing.ingest(str(db), str(logs), gfwhere_cmd=None, warn=quiet)
    out = tmp_path / "wf.yaml"
    assert run_model(["--db", str(db), "--run", "I", "-o", str(out)], capsys)[0] == 0
    w = wm.load(str(out))
    assert (w.stage("H").idle_before_ms, w.stage("R0").idle_before_ms) == (None, 0.0)
    assert 400 <= w.stage("R4").idle_before_ms < 900


def test_machine_busy_is_the_machines_cpu_share_while_the_stage_ran(tmp_path, capsys):
    """Stage SPIN's task keeps one CPU busy for 0.4 s: the machine was at least 1/CPUs busy while it ran (more if
    anything else ran); stage SHORT's task ends within the clock's 10 ms steps: unknown. Each process's CPU clock is
    the shim's, ordered and on this machine's CPU count."""
    import os
    logs = tmp_path / "logs"
    logs.mkdir()
    spin = f"{sys.executable} -c 'import time; t = time.time() + 0.4\nwhile time.time() < t: pass'"
    assert traced(logs, ["sh", "-c", spin], "s", "SPIN", "B").returncode == 0
    assert traced(logs, ["true"], "t", "SHORT", "B").returncode == 0
    db = tmp_path / "x.db"
    ing.ingest(str(db), str(logs), gfwhere_cmd=None, warn=quiet)
    p = Store(db).processes("B")
    assert len(p) == 3 and (p["cpus"] == os.sysconf("SC_NPROCESSORS_ONLN")).all()
    assert (p["uptime_end_s"] >= p["uptime_start_s"]).all() and (p["idle_end_s"] >= p["idle_start_s"]).all()
    out = tmp_path / "wf.yaml"
    assert run_model(["--db", str(db), "--run", "B", "-o", str(out)], capsys)[0] == 0
    w = wm.load(str(out))
    n = int(p["cpus"].iloc[0])
    assert 1 / n - 0.05 <= w.stage("SPIN").machine_busy <= 1.0
    assert w.stage("SHORT").machine_busy is None


def test_served_concurrency_is_the_overlap_of_the_io_less_its_cpu_wait():
    """Two tasks in I/O through the same second: 2 deep; half of that time waiting for a CPU leaves each in I/O
    at density 0.5: 1 s of I/O over 0.75 s with any in it (1 - 0.5 x 0.5), 4/3 deep. None without clocks."""
    windows = [(0, 10 ** 9, 1.0), (0, 10 ** 9, 1.0)]
    assert model._served_concurrency(windows, 0.0) == 2.0
    assert model._served_concurrency(windows, 0.5) == pytest.approx(4 / 3, abs=1e-4)
    assert model._served_concurrency(windows, None) is None


@pytest.mark.parametrize("text,want", [
    ("2 100.50 150.00 101.50 150.80", (2, 100.5, 150.0, 101.5, 150.8)),
    ("2 100.50 150.00 100.50 150.00", (2, 100.5, 150.0, 100.5, 150.0)),
    (None, (None,) * 5),
    ("2 100.50 150.00 101.50", (None,) * 5),                # a field short
    ("0 100.50 150.00 101.50 150.80", (None,) * 5),         # no CPU
    ("2 101.50 150.00 100.50 150.80", (None,) * 5),         # the clock going back
    ("2 100.50 150.00 101.50 153.00", (None,) * 5),         # more idle than 2 CPUs have in a second
    ("2 100.50 nan 101.50 150.80", (None,) * 5),
    ("two 100.50 150.00 101.50 150.80", (None,) * 5),
])
def test_cpu_clock_strings(text, want):
    assert ingest_read.cpu_clock(text) == want


@pytest.mark.parametrize("text,want", [
    ("100 20 3 2500000100 500000020 13", (2.5, 0.5, 10)),
    ("0 0 1 0 0 1", (0.0, 0.0, 0)),
    (None, (None,) * 3),
    ("100 20 3 2500000100 500000020", (None,) * 3),         # a field short
    ("100 20 3 99 500000020 13", (None,) * 3),              # on-CPU time going back
    ("100 20 3 2500000100 19 13", (None,) * 3),             # the wait going back
    ("100 20 3 2500000100 500000020 x", (None,) * 3),
    ("-1 20 3 2500000100 500000020 13", (None,) * 3),
])
def test_sched_strings(text, want):
    assert ingest_read.sched(text) == want


@pytest.mark.parametrize("text,want", [
    ("250000000 12", (0.25, 12)),
    ("0 0", (0.0, 0)),
    (None, (None, None)),
    ("250000000", (None, None)),                            # a field short
    ("-1 12", (None, None)),
    ("250000000 12 7", (None, None)),
])
def test_call_wait_strings(text, want):
    assert ingest_read.call_wait(text) == want


def test_cpu_wait_from_the_processes_clocks():
    """The stage's figures from its processes' scheduler clocks, exact: three processes of 0.9 s, 0.3 s on a CPU
    and 0.6 s ready without one (never asleep), 0.3 s each in I/O of which 0.2 s timed waiting: 2/3 by each measure;
    one alone, 0.3 s on a CPU: 0; one asleep 0.6 s of its 1 s, 0.2 s on a CPU, 0.2 s waiting, 0.8 s in I/O: it waits
    for a CPU half the time it wants one, inside its I/O only while awake (0.2 s), 0.125 of it. A process without a
    clock (older shim) counts in none; a stage with none has none."""
    import pandas as pd
    s = 10 ** 9
    rows = [(1, 0, 0.9 * s, 0.3, 0.6, 0.3, 0.2)] * 3 + [(2, 0, 0.3 * s, 0.3, 0.0, 0.1, 0.0),
                                                         (3, 0, 1 * s, 0.2, 0.2, 0.8, 0.1),
                                                         (3, 0, 5 * s, None, None, 1.0, 0.1),
                                                         (4, 0, 1 * s, None, None, 1.0, None)]
    procs = pd.DataFrame(rows, columns=["task_id", "start_ns", "end_ns", "sched_cpu_s", "sched_wait_s", "io_s",
                                        "io_cpu_wait_s"], dtype=float)
    assert (model._cpu_wait(procs, [1]), model._io_cpu_wait(procs, [1]),
            model._io_cpu_wait_measured(procs, [1])) == (0.6667, 0.6667, 0.6667)
    assert (model._cpu_wait(procs, [2]), model._io_cpu_wait(procs, [2]),
            model._io_cpu_wait_measured(procs, [2])) == (0.0, 0.0, 0.0)
    assert (model._cpu_wait(procs, [3]), model._io_cpu_wait(procs, [3])) == (0.2, 0.125)
    assert (model._cpu_wait(procs, [4]), model._io_cpu_wait(procs, [4]),
            model._io_cpu_wait_measured(procs, [4])) == (None, None, None)


def test_cpu_wait_is_the_share_of_process_time_without_a_cpu(tmp_path, capsys):
    """Stage CROWD: three traced processes pinned to one CPU at once, each computing 0.3 s of CPU between reads of
    1 MiB from the page cache (never asleep), so each waits for the other two; stage ALONE: one pinned to the other
    CPU. Each process's scheduler clock is the shim's: CPU seconds at least the spin's; with MTCPROF_CPU_WAIT=1 the
    shim also times the wait inside each call. The stage's cpu_wait is its processes' wait over their lives, as
    stored. How much they wait depends on what else the machine runs: the figures (about 2/3 crowded, under 0.2
    alone, on a quiet machine) are tests/bench/cpu_bench.py's."""
    import os
    if os.cpu_count() < 2 or not shutil.which("taskset"):
        pytest.skip("needs 2 CPUs and taskset")
    logs, data = tmp_path / "logs", tmp_path / "data"
    logs.mkdir()
    data.write_bytes(b"d" * (1 << 20))
    spin = (f"import os, time; fd = os.open('{data}', os.O_RDONLY); t = time.process_time() + 0.3\n"
            "while time.process_time() < t:\n    os.pread(fd, 1 << 20, 0)\n    u = time.process_time() + 0.001\n"
            "    while time.process_time() < u: pass")
    res = []
    ts = [threading.Thread(target=lambda i=i: res.append(traced(
        logs, ["taskset", "-c", "0", sys.executable, "-c", spin], f"c{i}", "CROWD", "W", MTCPROF_INCLUDE=str(data),
        MTCPROF_CPU_WAIT="1"))) for i in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    res.append(traced(logs, ["taskset", "-c", "1", sys.executable, "-c", spin], "a", "ALONE", "W",
                      MTCPROF_INCLUDE=str(data), MTCPROF_CPU_WAIT="1"))
    assert [r.returncode for r in res] == [0] * 4, [r.stderr for r in res]
    db = tmp_path / "x.db"
    ing.ingest(str(db), str(logs), gfwhere_cmd=None, warn=quiet)
    p = Store(db).processes("W")
    py = p[p["exe"].str.contains("python")]
    assert len(py) == 4 and (py["sched_cpu_s"] >= 0.3).all()
    crowd = py[py["stage"] == "CROWD"]
    assert (crowd["sched_slices"] >= 10).all() and (crowd["sched_wait_s"] > 0).all()   # switched with the others
    out = tmp_path / "wf.yaml"
    assert run_model(["--db", str(db), "--run", "W", "-o", str(out)], capsys)[0] == 0
    w = wm.load(str(out))
    for stage in ("CROWD", "ALONE"):
        q = p[(p["stage"] == stage) & p["sched_wait_s"].notna() & p["end_ns"].notna()]
        life = ((q["end_ns"] - q["start_ns"]) / 1e9).sum()
        assert w.stage(stage).cpu_wait == round(min(1.0, q["sched_wait_s"].sum() / life), 4)
        assert 0 <= w.stage(stage).io_cpu_wait <= 1
        io = p[(p["stage"] == stage) & (p["io_s"] > 0)]
        assert w.stage(stage).io_cpu_wait_measured == round(min(1.0, io["io_cpu_wait_s"].sum() / io["io_s"].sum()), 4)
    assert (py["io_s"] > 0).all()
    # MTCPROF_CPU_WAIT=1: each call on the data file timed (its open and every pread); the wait inside them is part
    # of the process's wait
    fa = Store(db).file_access("W")
    calls = fa[fa["path"] == str(data)].groupby("process_id")[["opens", "reads"]].sum().sum(axis=1)
    assert (py.set_index("id")["io_cpu_wait_calls"] == calls.reindex(py["id"]).values).all()
    assert ((py["io_cpu_wait_s"] >= 0) & (py["io_cpu_wait_s"] <= py["sched_wait_s"] + 1e-3)).all()


def test_young_fraction_is_the_share_read_within_a_second_of_its_write_on_the_host(tmp_path, capsys):
    """Stage W writes a (1,000 B) and b (3,000 B); stage R's first task reads a at once and c (4,000 B, older than
    the run) with it, its second task b 1.2 s later: 1,000 of the 8,000 bytes R read were young."""
    d, logs = tmp_path / "d", tmp_path / "logs"
    d.mkdir(), logs.mkdir()
    (d / "c").write_bytes(b"c" * 4000)
    rd = "dd if={} of=/dev/null bs=8k status=none"
    steps = (("w", "W", "head -c 1000 /dev/zero > a && head -c 3000 /dev/zero > b"),
             ("r1", "R", f"{rd.format('a')} && {rd.format('c')}"), ("r2", "R", f"sleep 1.2 && {rd.format('b')}"))
    for task, stage, cmd in steps:
        r = traced(logs, ["sh", "-c", f"cd {d} && {cmd}"], task, stage, "R", MTCPROF_INCLUDE=str(d))
        assert r.returncode == 0, r.stderr
    db = tmp_path / "x.db"
    ing.ingest(str(db), str(logs), gfwhere_cmd=None, warn=quiet)
    out = tmp_path / "wf.yaml"
    assert run_model(["--db", str(db), "--run", "R", "-o", str(out)], capsys)[0] == 0
    read = wm.load(str(out)).stage("R").read
    assert (read.bytes_per_task.mean, read.warm_fraction, read.young_fraction) == (4000, 0.5, 0.125)
