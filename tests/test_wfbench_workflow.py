"""wfbench_example without the testbed: a wfcommons recipe's instance through WfBench as a folder, run under plain
Rake on the local disk (real wfbench, real rake): every output file exists with the instance's size; stage counts
are the instance's per task name; scaling keeps a file of > 0 bytes at >= 1 byte; a WfFormat 1.4 instance
(files per task) reads the same; bad input is one line, exit 2."""
import json
import os
import shutil
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytest.importorskip("wfcommons")
from wfbench_example import instance, prepare  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("rake") is None, reason="needs Debian's rake")


@pytest.fixture(scope="module")
def blast():
    return instance.generate("blast", 45, seed=1)


def test_generated_instance_stages(blast):
    assert blast.stage_counts() == {"split_fasta": 1, "blastall": 40, "cat_blast": 1, "cat": 1}
    doc = blast.source["workflow"]["specification"]
    assert len(doc["tasks"]) == 43 and len(blast.inputs()) == 83
    small = blast.scaled(1e-6)
    assert all(small.sizes[f] >= 1 for f, s in blast.sizes.items() if s > 0)
    assert all(small.sizes[f] == 0 for f, s in blast.sizes.items() if s == 0)
    assert blast.pruned(3).stage_counts() == {"split_fasta": 1, "blastall": 3, "cat_blast": 1, "cat": 1}


def test_plain_rake_writes_instance_sizes(blast, tmp_path):
    inst = blast.pruned(3)
    inst = inst.scaled(prepare.factor_for(inst, 1))
    src = str(tmp_path / "w")
    prepare.prepare(src, inst)
    graph = subprocess.run(["rake", "-P"], cwd=src, capture_output=True, text=True, check=True).stdout
    assert graph.count("\nrake ") + graph.startswith("rake ") == sum(len(t.outputs) for t in inst.tasks) + 1
    # what --tasks-from reads of it: each task once (its other outputs are Rake's `file OUT => TASK`), and the
    # files each task lists per source stage as the instance has them
    from mtcio.db import scaling, taskgraph
    g = taskgraph.parse(graph)
    sc = {"stages": {}}
    for t in inst.tasks:
        sc["stages"].setdefault(t.stage, {"task_names": []})["task_names"].append(scaling.name_shape(t.outputs[0]))
    counts, _ = taskgraph.counts_of(g, sc)
    assert {k[6:]: v for k, v in counts.items() if k.startswith("tasks:")} == inst.stage_counts()
    writer = {f: t.stage for t in inst.tasks for f in t.outputs}
    cat = next(t for t in inst.tasks if t.stage == "cat")
    listed = {}
    for f in cat.inputs:        # the pruned tasks' outputs are the workflow's inputs, in raw/
        source = writer.get(f) or taskgraph.INPUT + scaling.name_shape("raw/" + f)
        listed[source] = listed.get(source, 0) + 1
    assert taskgraph.reads_of(g, sc)["cat"] == listed
    assert listed["blastall"] == sum(len(t.outputs) for t in inst.tasks if t.stage == "blastall") == 6
    env = {k: v for k, v in os.environ.items() if not k.startswith("MTCPROF_")}
    r = subprocess.run(["rake", "-m", "-j", "2"], cwd=src, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-500:]
    for t in inst.tasks:
        for f in t.outputs:
            assert os.path.getsize(os.path.join(src, f)) == inst.sizes[f], f
    for f in inst.inputs():
        assert os.path.getsize(os.path.join(src, "raw", f)) == inst.sizes[f]
    back = instance.load(os.path.join(src, "instance.json"))     # the instance as run reads back the same
    assert back.stage_counts() == inst.stage_counts() and back.total_bytes() == inst.total_bytes()


def test_wfformat_14_files_per_task():
    doc = {"name": "w", "workflow": {"tasks": [
        {"name": "a", "id": "a1", "category": "A", "files": [{"link": "input", "name": "in", "size": 5},
                                                             {"link": "output", "name": "x", "size": 7}]},
        {"name": "b", "id": "b1", "files": [{"link": "input", "name": "x", "size": 7},
                                            {"link": "output", "name": "y", "size": 0}]}]}}
    inst = instance.from_dict(doc)
    assert inst.stage_counts() == {"A": 1, "b": 1} and inst.inputs() == ["in"] and inst.total_bytes() == 12


@pytest.mark.parametrize("text, says", [
    ("not json", "Expecting value"),
    ('{"name": "x"}', "no 'workflow' object"),
    ('{"workflow": {"specification": {"tasks": [{"id": "t", "name": "t", "inputFiles": ["f"], "outputFiles": []}],'
     ' "files": [{"id": "f", "sizeInBytes": -3}]}}}', "negative size"),
])
def test_bad_instance_one_line_exit_2(tmp_path, text, says):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    r = subprocess.run([sys.executable, "-m", "wfbench_example.prepare", str(tmp_path / "o"), "--instance", str(bad)],
                       capture_output=True, text=True, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and says in r.stderr, r.stderr


def test_page_lists_every_target_and_stage(tmp_path):
    from wfbench_example import page
    summ = {"median": 12.0, "p90": 40.0, "whole_pct": -3.0, "measured_s": 1.5, "spread_median": 5.0,
            "spread_p90": 9.0, "baseline_median": 8.0, "baseline_p90": 20.0, "pass": True}
    state = {"started": "s", "factors": {"blast": 1e-4}, "instance_alone": "not run",
             "targets": [{"recipe": "blast", "size": 200, "hosts": 2, "traced": ["b50r1", "b50r2"], "summary": summ},
                         {"recipe": "blast", "size": 50, "hosts": 2, "traced": ["b200r1"]}]}   # not scored: left out
    rows = [{"target": "blast-200x2", "stage": "cat<&>", "tasks": 1, "pred": 0.5, "runs": [0.4, 0.6], "err": 0.0,
             "spread": 40.0, "baseline": 1.0}]
    out = tmp_path / "p.html"
    page.write(str(out), state, rows)
    text = out.read_text()
    assert text.count("<td>blast 200 × 2</td>") == 1 and "blast 50 ×" not in text
    assert "cat&lt;&amp;&gt;" in text and "<td class=pass>12 %</td>" in text
    assert oct(out.stat().st_mode & 0o777) == "0o600"


def test_instance_as_run_is_read_by_mtcpredict(blast, tmp_path):
    """The scaled instance.json prepare writes is WfFormat mtcpredict accepts: its stages are the instance's."""
    inst = blast.pruned(3)
    inst.scaled(1e-5).write_wfformat(str(tmp_path / "i.json"))
    mtcpredict = os.path.join(os.path.dirname(sys.executable), "mtcpredict")
    r = subprocess.run([mtcpredict, str(tmp_path / "i.json"), "--hosts", "2", "--slots", "2", "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-400:]
    stages = {p["stage"] for p in json.loads(r.stdout)["predictions"]}
    assert stages == set(inst.stage_counts())
