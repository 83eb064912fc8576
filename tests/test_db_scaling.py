"""The scaling model's parts without a testbed: the fits' forms, the host rules, the task-graph reader, and the
refusals of `mtcprof model --size` and `mtcpredict --at` (one line, exit 2, nothing written)."""
import os
import subprocess
import sys

import pytest

from mtcio.db import scaling, taskgraph

BIN = os.path.dirname(sys.executable)


def test_fit_forms():
    f = scaling.fit_values([16, 36], [42, 110])                       # counts: a line through both
    assert (f["form"], f["a"], f["b"], f["residual"]) == ("linear", 3.4, -12.4, 0)
    assert scaling.evaluate(f, 64) == pytest.approx(205.2)
    f = scaling.fit_values([4, 9], [0.1467, 0.136], two_sizes="power")   # a mean over a mix: a factor
    assert f["form"] == "power" and scaling.evaluate(f, 9) == pytest.approx(0.136, rel=1e-5)
    assert scaling.fit_values([4, 9], [100, 100.5])["form"] == "constant"     # within 1 %
    assert scaling.fit_values([4, 4], [10, 10.4], "proportional") == {"form": "proportional", "a": 2.55,
                                                                      "residual": 0.0196, "points": [[4, 10],
                                                                                                     [4, 10.4]]}
    f = scaling.fit_values([1, 2, 4, 8], [1, 4, 16, 64])                # three sizes or more: the better of two
    assert (f["form"], f["a"], f["p"], f["residual"]) == ("power", 1, 2, 0)
    assert scaling.evaluate(scaling.fit_values([1, 2], [10, 5]), 100) == 0      # never below zero


def test_host_rules():
    assert [scaling.local_share(1.0, 2, c) for c in (1, 2, 4, 8)] == [1.0, 1.0, 1.0, 1.0]   # one input: local
    assert scaling.local_share(0.75, 2, 4) == 0.625            # two inputs on random hosts: (1 + 1/C) / 2
    assert scaling.local_share(0.5, 2, 4) == 0.25              # a gather of inputs spread evenly: 1 / C
    assert scaling.local_share(None, 2, 4) is None and scaling.local_share(0.7, 1, 4) == 0.7
    assert scaling.balls_in_bins_max(42, 1) == 42
    assert scaling.balls_in_bins_max(42, 2) == pytest.approx(24.8152, abs=1e-4)   # 21 + sqrt(2 * 21 * 0.5 * ln 2)
    assert scaling.busiest_host(42, 1, 20, 2, 11) == 42
    assert scaling.busiest_host(72, 3, 20, 2, 10) == 24          # traced even: even
    assert scaling.busiest_host(72, 3, 20, 2, 11) == 27          # 0.38 of random's excess: 24 + 0.38 x 5.9
    assert scaling.busiest_host(72, 3, 20, 2, 13) == 30          # as uneven as random
    assert scaling.busiest_host(3, 8, 20, 2, 13) == 2 and scaling.busiest_host(72, 3, 20, 2, None) == 24
    # the I/O density traced at 4 running (2.2 in I/O while any is) gives more at 8, never above 8
    i8 = scaling.io_concurrency(2.2, 4, 8)
    assert 2.2 < i8 < 8 and scaling.io_concurrency(2.2, 4, 4) == pytest.approx(2.2, abs=1e-4)
    assert scaling.io_concurrency(1.0, 1, 1) == 1.0 and scaling.io_concurrency(None, 4, 8) is None


def test_name_shapes_and_the_graph():
    assert scaling.name_shape("diffs/diff.t003.t012.fits") == "diffs/diff.t#.t#.fits"
    g = taskgraph.parse("rake default\n    b.txt\nrake b.txt\n    in/x01\n    in/x02\n    a.tbl\nrake a.tbl\n"
                        "    in/x01\n")
    assert g == {"default": ["b.txt"], "b.txt": ["in/x01", "in/x02", "a.tbl"], "a.tbl": ["in/x01"]}
    sc = {"stages": {"gather": {"task_names": ["b.txt"]}, "table": {"task_names": ["a.tbl"]}}}
    counts, notes = taskgraph.counts_of(g, sc)
    assert counts == {"tasks:gather": 1, "tasks:table": 1, "input:in/x#": 2}
    assert notes == ["graph: 1 task of no traced stage left out (default)"]
    with pytest.raises(taskgraph.GraphError, match=r"line 1: a prerequisite before any task"):
        taskgraph.parse("    a\n")
    with pytest.raises(taskgraph.GraphError, match=r"no task \(expected the output of `rake -P`"):
        taskgraph.parse("\n\n")
    with pytest.raises(taskgraph.GraphError, match="no task of the graph has the name shape of a traced stage"):
        taskgraph.counts_of({"other": []}, sc)


def test_other_outputs_and_the_files_each_task_lists():
    # a_#: one task each writing two files (the second Rake's `file OUT => TASK`); m_#: a gather done by two tasks,
    # the second also reading the first's output (three prerequisites: a task, not an output)
    g = taskgraph.parse("rake a_1_out_1\n    in_1\nrake a_1_out_2\n    a_1_out_1\nrake a_2_out_3\n    in_2\n"
                        "rake a_2_out_4\n    a_2_out_3\nrake m_3_out_5\n    a_1_out_1\n    a_1_out_2\n"
                        "rake m_4_out_6\n    a_2_out_3\n    a_2_out_4\n    m_3_out_5\n")
    sc = {"stages": {"a": {"task_names": ["a_#_out_#"]}, "m": {"task_names": ["m_#_out_#"]}}}
    counts, notes = taskgraph.counts_of(g, sc)
    assert counts == {"tasks:a": 2, "tasks:m": 2, "input:in_#": 2}
    assert notes == ["graph: 2 entries with one prerequisite of their own shape taken as that task's other "
                     "outputs, not as tasks (a_1_out_2, a_2_out_4)"]
    assert taskgraph.reads_of(g, sc) == {"a": {"input:in_#": 1.0}, "m": {"a": 2.0, "m": 0.5}}
    # the gather traced in one task reading all 2 files of a (200 bytes); the target's a has 8 tasks: the fit
    # gives a task 8 files, the graph lists 2 each, so its files and bytes of a are a quarter of the fit's
    fields = {"read.files": [{"source": "a", "driver": "tasks:a", **scaling.fit_values([2], [2], "proportional")},
                             {"source": "input:c#", "driver": "size", **scaling.fit_values([4], [3])}],
              "read.bytes": [{"source": "a", "driver": "tasks:a", **scaling.fit_values([2], [200], "proportional")}]}
    at = {"tasks:a": 8}
    share = scaling._listed_share(fields, {"a": 2.0, "m": 0.5}, at, 16)
    assert share == {"a": (2.0, 8.0)}
    assert scaling._sum(fields["read.files"], at, 16, share) == pytest.approx(2 + 3)
    assert scaling._sum(fields["read.bytes"], at, 16, share) == pytest.approx(200)
    assert scaling._sum(fields["read.bytes"], at, 16) == pytest.approx(800)


def mtcprof(*args):
    return subprocess.run([os.path.join(BIN, "mtcprof"), *args], capture_output=True, text=True)


@pytest.mark.parametrize("runs,sizes,said", [
    ("a,b", "a=4,c=9", "--size 'c=9': run 'c' is not one of --run (a, b)"),
    ("a,b", "a=4,a=9", "--size: run 'a' given two sizes"),
    ("a,b", "a=4", "--size: no size for run b"),
    ("a,b", None, "--run names 2 runs: give each one's workflow size with --size a=S,b=S"),
    ("a", "a=0", "--size 'a=0': a size is a number > 0"),
    ("a", "a=nan", "--size 'a=nan': a size is a number > 0"),
    ("a,a", "a=4", "--run 'a,a': each run once, names separated by commas"),
])
def test_model_refuses_bad_sizes(tmp_path, runs, sizes, said):
    out = tmp_path / "m.yaml"
    r = mtcprof("model", "--db", str(tmp_path / "none.db"), "--run", runs, *(["--size", sizes] if sizes else []),
                "-o", str(out))
    assert (r.returncode, r.stderr) == (2, f"mtcprof model: {said}\n")
    assert not out.exists() and not (tmp_path / "none.db").exists()


def test_at_needs_a_model_that_scales(tmp_path):
    montage = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "montage_example",
                           "montage.yaml")
    r = subprocess.run([os.path.join(BIN, "mtcpredict"), montage, "--at", "size=64", "--out", str(tmp_path / "o")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith("mtcpredict: --at: ") and "does not scale" in r.stderr
    assert len(r.stderr.splitlines()) == 1 and not (tmp_path / "o").exists()
    r = subprocess.run([os.path.join(BIN, "mtcpredict"), montage, "--what-if", "size=64"], capture_output=True,
                       text=True)
    assert r.returncode == 2 and "--what-if size: this model has no workflow size" in r.stderr
    r = subprocess.run([os.path.join(BIN, "mtcpredict"), montage, "--tasks-from", "g.txt"], capture_output=True,
                       text=True)
    assert (r.returncode, r.stderr) == (2, "mtcpredict: --tasks-from is the target's task graph: give it with "
                                           "--at size=S\n")
