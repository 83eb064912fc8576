"""WfFormat in and out, without the testbed: a small real traced run exported as WfFormat 1.5 and 1.6 (validated
against the project's schema, loaded back by wfcommons' own reader, counts and bytes equal to the db's; names
with a space or a non-UTF-8 byte); generated 1000Genome and Epigenomics instances imported as workflow models
(stage counts per category, shared inputs N-to-1) and predicted; bad instances: one line, exit 2."""
import collections
import json
import os
import random
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from helpers.cli import predict  # noqa: E402
from helpers.tracing import make_run, traced  # noqa: E402

from mtcio.db import wfformat  # noqa: E402

wfcommons = pytest.importorskip("wfcommons")


def mtcprof(*args):
    return subprocess.run([sys.executable, "-c", "import sys; from mtcio.cli import mtcprof; sys.exit(mtcprof())",
                           *map(str, args)], capture_output=True, text=True)


def ingest(logs, db, run):
    r = mtcprof("ingest", logs, "--db", db, "--run", run)
    assert r.returncode == 0, r.stderr


def export(db, run, out, version=None):
    args = ["export", "--db", db, "--run", run, "--format", "wfformat", "-o", out]
    r = mtcprof(*args, *(["--schema-version", version] if version else []))
    assert r.returncode == 0, r.stderr
    with open(out) as f:
        return json.load(f)


def db_truth(db, run):
    """What the db says: tasks, the instance's files (read or written, in the model's scope) and bytes."""
    from mtcio.db.api import Store
    with Store(db) as s:
        t = s.tasks(run)
        tf = s.task_files(run)
    tf = tf[tf["read"] | tf["written"]]
    return {"tasks": len(t), "files": tf["key"].nunique(), "read": int(tf["bytes_read"].sum()),
            "written": int(tf["bytes_written"].sum()),
            "sizes": int(tf.drop_duplicates("key")["size"].sum()), "stages": collections.Counter(t["stage"])}


def wfcommons_load(path):
    from wfcommons.wfinstances import Instance
    return Instance(path, schema_file=wfformat.SCHEMA_FILE).workflow      # offline: the project's schema


@pytest.fixture(scope="module")
def traced_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wf")
    d, logs = make_run(tmp)
    db = str(tmp / "m.db")
    ingest(logs, db, "R")
    return tmp, db


@pytest.mark.parametrize("version", ["1.5", "1.6"])
def test_export_validates_loads_and_counts_equal_the_db(traced_run, version):
    tmp, db = traced_run
    out = str(tmp / f"r{version}.json")
    doc = export(db, "R", out, version)
    assert doc["schemaVersion"] == version
    assert wfformat.schema_problems(doc) == []
    truth = db_truth(db, "R")
    spec, ex = doc["workflow"]["specification"], doc["workflow"]["execution"]
    assert len(spec["tasks"]) == truth["tasks"] == 3
    assert len(spec["files"]) == truth["files"] == 6
    assert sum(f["sizeInBytes"] for f in spec["files"]) == truth["sizes"] == 12 + 5000 + 12 + 5 + 5000 + 5012
    assert all(type(t["readBytes"]) is int and type(t["writtenBytes"]) is int for t in ex["tasks"])
    assert sum(t["readBytes"] for t in ex["tasks"]) == truth["read"]
    assert sum(t["writtenBytes"] for t in ex["tasks"]) == truth["written"]
    assert all(len(t["machines"]) == 1 and t["ioTimeInSeconds"] >= 0 for t in ex["tasks"])
    by = {t["name"]: t for t in spec["tasks"]}
    assert by["t3"]["parents"] == ["t1", "t2"] and by["t1"]["children"] == ["t3"] == by["t2"]["children"]
    assert {t["name"]: t["category"] for t in spec["tasks"]} == {"t1": "S1", "t2": "S1", "t3": "S2"}
    assert ("metrics" in spec) == (version == "1.6")
    wf = wfcommons_load(out)                  # wfcommons' own reader, its semantic checks (1.6 metrics) included
    assert len(wf.nodes) == 3 and sorted(wf.edges) == [("t1", "t3"), ("t2", "t3")]
    tasks = [wf.nodes[n]["task"] for n in wf.nodes]
    assert sum(t.bytes_read for t in tasks) == truth["read"]
    assert sorted({f.file_id for t in tasks for f in t.input_files + t.output_files}) == \
        sorted(f["id"] for f in spec["files"])


def test_export_round_trips_into_a_model(traced_run):
    """The exported instance imported again: the same stages with the db's task counts."""
    tmp, db = traced_run
    out = str(tmp / "rt.json")
    export(db, "R", out)
    r = mtcprof("model", "--from-wfformat", out, "--hosts", "2", "-o", tmp / "rt.yaml")
    assert r.returncode == 0, r.stderr
    from mtcio.db.workflow_model import load
    wf = load(str(tmp / "rt.yaml"))
    assert {s.name: s.tasks for s in wf.stages} == dict(db_truth(db, "R")["stages"]) == {"S1": 2, "S2": 1}
    s2 = wf.stage("S2")
    assert s2.read.files_per_task == 2 and s2.read.bytes_per_task.mean == 5012
    assert s2.read.warm_fraction == 1.0 and s2.write.bytes_per_task.mean == 5012


def test_names_with_a_space_or_a_non_utf8_byte(tmp_path):
    d, logs = tmp_path / "d", tmp_path / "logs"
    d.mkdir(), logs.mkdir()
    odd = os.fsdecode(b"st\xe9p")                 # a task name that is not UTF-8
    (d / "in put").write_bytes(b"x" * 100)
    src, dst = str(d / "in put"), os.fsdecode(os.fsencode(str(d)) + b"/out\xff")
    assert traced(logs, ["cp", src, dst], "my task", "copy", "N").returncode == 0
    assert traced(logs, ["cat", dst], odd, "copy", "N").returncode == 0
    assert traced(logs, ["cat", dst], "my_task", "copy", "N").returncode == 0     # its legal id is taken
    db = str(tmp_path / "n.db")
    ingest(logs, db, "N")
    doc = export(db, "N", str(tmp_path / "n.json"))
    assert wfformat.schema_problems(doc) == []
    spec = doc["workflow"]["specification"]
    ids = [t["id"] for t in spec["tasks"]]
    assert all(wfformat.TASK_ID.match(i) for i in ids) and len(set(ids)) == 3
    by = {t["name"]: t for t in spec["tasks"]}
    assert set(by) == {"my task", "st\\xe9p", "my_task"}
    assert by["st\\xe9p"]["nameHex"] == b"st\xe9p".hex() and by["st\\xe9p"]["id"] == "st_p"
    assert {by["my task"]["id"], by["my_task"]["id"]} == {"my_task", "my_task#2"}
    assert "nameHex" not in by["my task"]
    files = {f.get("name", f["id"]): f for f in spec["files"]}
    assert all(wfformat.FILE_ID.match(f["id"]) for f in spec["files"])
    assert files[src]["id"] == src.replace(" ", "_") and files[src]["sizeInBytes"] == 100
    bad = [f for f in spec["files"] if f.get("nameHex")]
    assert len(bad) == 1 and bytes.fromhex(bad[0]["nameHex"]) == os.fsencode(dst)
    assert by["st\\xe9p"]["parents"] == [by["my task"]["id"]]
    wf = wfcommons_load(str(tmp_path / "n.json"))
    assert sorted(wf.nodes) == sorted(ids)


def generated(recipe, n, path):
    """A WfCommons recipe's instance of about n tasks, generated offline (seeded: the same graph and sizes)."""
    import numpy as np
    from wfcommons import WorkflowGenerator
    random.seed(7)
    np.random.seed(7)
    WorkflowGenerator(recipe.from_num_tasks(n)).build_workflow().write_json(path)
    with open(path) as f:
        return json.load(f)


def instance_truth(doc):
    """Per category (the task's category, else its name): tasks, and the files read by >= 2 of its tasks."""
    ex = {t["id"]: t for t in doc["workflow"].get("execution", {}).get("tasks", [])}
    cat = {t["id"]: ex.get(t["id"], {}).get("category") or t.get("category") or t["name"]
           for t in doc["workflow"]["specification"]["tasks"]}
    counts = collections.Counter(cat.values())
    readers = collections.defaultdict(collections.Counter)
    for t in doc["workflow"]["specification"]["tasks"]:
        for f in set(t.get("inputFiles", [])) - set(t.get("outputFiles", [])):
            readers[cat[t["id"]]][f] += 1
    shared = {c: sorted(f for f, k in r.items() if k >= 2) for c, r in readers.items()}
    return counts, shared


@pytest.mark.parametrize("recipe_name,n", [("GenomeRecipe", 54), ("EpigenomicsRecipe", 50)])
def test_generated_instance_imported(tmp_path, recipe_name, n):
    from wfcommons.wfchef import recipes
    path = tmp_path / "inst.json"
    doc = generated(getattr(recipes, recipe_name), n, path)
    counts, shared = instance_truth(doc)
    assert 40 <= sum(counts.values()) <= 60
    r = mtcprof("model", "--from-wfformat", path, "--hosts", "4", "--slots", "2", "-o", tmp_path / "m.yaml")
    assert r.returncode == 0, r.stderr
    assert "default: bytes_per_call = 1048576" in r.stderr and "placement rule" in r.stderr
    from mtcio.db.workflow_model import load
    wf = load(str(tmp_path / "m.yaml"))
    assert {s.name: s.tasks for s in wf.stages} == dict(counts)
    sizes = {f["id"]: f["sizeInBytes"] for f in doc["workflow"]["specification"]["files"]}
    gathers = [c for c, fs in shared.items() if fs]
    assert gathers, "the recipe's instance has no file read by several tasks of a stage"
    for s in wf.stages:
        assert s.shared.files == len(shared.get(s.name, [])), s.name
        assert s.shared.bytes == sum(sizes[f] for f in shared.get(s.name, [])), s.name
        assert s.hosts == min(4, s.tasks) and s.procs_per_host == min(2, -(-s.tasks // s.hosts))
        assert s.write.local_fraction in (1.0, None)
    for c in gathers:        # a shared input read by tasks spread over 4 hosts: on the host of a quarter of them
        assert wf.stage(c).shared.alpha == 0.25 if wf.stage(c).hosts == 4 else True
    with open(tmp_path / "m.yaml") as f:
        assert "x-defaults:" in f.read()
    p = predict(path, "--hosts", "4", "--slots", "2", "--bootstrap", "0", "--json")
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert "WfFormat 1.6 instance" in p.stderr
    assert sorted({row["stage"] for row in res["predictions"]}) == sorted(counts)
    assert all(row["total_s"] > 0 for row in res["predictions"])


def _bad_instances(tmp):
    import copy
    base = {"name": "w", "schemaVersion": "1.5", "workflow": {"specification": {
        "tasks": [{"name": "a", "id": "a", "parents": [], "children": ["b"], "inputFiles": ["f"],
                   "outputFiles": ["g"]},
                  {"name": "b", "id": "b", "parents": ["a"], "children": [], "inputFiles": ["g"]}],
        "files": [{"id": "f", "sizeInBytes": 10}, {"id": "g", "sizeInBytes": 20}]}}}
    cyc = copy.deepcopy(base)
    cyc["workflow"]["specification"]["tasks"][0]["parents"] = ["b"]
    cyc["workflow"]["specification"]["tasks"][1]["children"] = ["a"]
    neg = copy.deepcopy(base)
    neg["workflow"]["specification"]["files"][1]["sizeInBytes"] = -20
    ver = dict(copy.deepcopy(base), schemaVersion="9.9")
    cases = {"notjson.json": (b"{not json", "not JSON (line 1 column 2"),
             "notwf.json": (b'{"tasks": []}', "not a WfFormat instance"),
             "cycle.json": (json.dumps(cyc).encode(), "a cycle in parents/children: 2 tasks"),
             "negative.json": (json.dumps(neg).encode(), "file 'g' (workflow.specification.files[1]): negative "
                                                         "size -20"),
             "version.json": (json.dumps(ver).encode(), "unknown WfFormat schemaVersion '9.9'")}
    good = tmp / "good.json"
    good.write_text(json.dumps(base))
    for name, (data, _) in cases.items():
        (tmp / name).write_bytes(data)
    return good, {tmp / k: v[1] for k, v in cases.items()}


def test_bad_instances_one_line_exit_2(tmp_path):
    good, bad = _bad_instances(tmp_path)
    r = mtcprof("model", "--from-wfformat", good)
    assert r.returncode == 0, r.stderr
    assert [s["tasks"] for s in __import__("yaml").safe_load(r.stdout)["stages"]] == [1, 1]
    for path, words in bad.items():
        for r in (mtcprof("model", "--from-wfformat", path, "-o", tmp_path / "out.yaml"), predict(path)):
            assert r.returncode == 2, (path, r.stderr)
            lines = r.stderr.strip().splitlines()
            assert len(lines) == 1 and words in lines[0], (path, r.stderr)
            assert not r.stdout
        assert not (tmp_path / "out.yaml").exists()


def test_options_that_do_not_fit(tmp_path, traced_run):
    _, db = traced_run
    good, _ = _bad_instances(tmp_path)
    r = mtcprof("model", "--from-wfformat", good, "--db", db)
    assert r.returncode == 2 and "give one of them" in r.stderr
    r = mtcprof("model", "--db", db, "--run", "R", "-o", tmp_path / "x.yaml", "--hosts", "3")
    assert r.returncode == 2 and "--hosts and --slots are for --from-wfformat" in r.stderr
    r = mtcprof("model", "--from-wfformat", good, "--hosts", "0")
    assert r.returncode == 2 and r.stderr.strip() == "mtcprof model: --hosts 0: give a count >= 1"
    r = mtcprof("export", "--db", db, "--run", "R", "--schema-version", "1.6", "-o", tmp_path / "t.json")
    assert r.returncode == 2 and "is for --format wfformat" in r.stderr
    r = mtcprof("export", "--db", db, "--run", "R", "--format", "wfformat", "--schema-version", "1.4", "-o", "x")
    assert r.returncode == 2 and "invalid choice: '1.4'" in r.stderr
    r = predict(os.path.join(os.path.dirname(__file__), "..", "montage_example", "montage.yaml"), "--hosts", "2")
    assert r.returncode == 2 and "--hosts and --slots are for a WfFormat instance" in r.stderr
