"""A traced tiny Montage run (4 tiles, 2 hosts, Rake with the mtcio plugin, real Gfarm) exported as WfFormat 1.5
and 1.6: valid against the project's schema, loaded back by wfcommons' own reader (offline, with that schema),
its task and file counts and byte totals those of the db; its Gfarm files only, machines the two hosts; imported
again, its stages have the db's task counts."""
import collections
import json
import os
import shutil
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from montage_example import prepare, run as mrun  # noqa: E402

from mtcio.db import wfformat  # noqa: E402

pytestmark = [pytest.mark.testbed,
              pytest.mark.skipif(shutil.which("rake") is None or shutil.which("mProjectPP") is None,
                                 reason="needs Debian's rake and montage")]
pytest.importorskip("wfcommons")


def _mtcprof(*args):
    return subprocess.run([sys.executable, "-c", "import sys; from mtcio.cli import mtcprof; sys.exit(mtcprof())",
                           *map(str, args)], capture_output=True, text=True)


def _montage_db(testbed, base):
    """The tiny mosaic traced with placement on 2 hosts: (db, hosts, the run's Gfarm folder)."""
    src = str(base / "src")
    prepare.prepare(src, "tiny")
    hosts = testbed.hosts[:2]
    top = f"/wfformat-{os.getpid()}"
    bed = mrun.Bed(testbed.hosts, {h: testbed.mount(h) for h in testbed.hosts}, testbed.user)
    mrun.stage_inputs(bed, top, src, hosts)
    logs = mrun.make_logdir(bed)
    db = str(base / "m.db")
    try:
        res = mrun.run_workflow(bed, top, hosts, run="tiny", db=db, logdir=logs, placement="with", slots=2)
    finally:
        shutil.rmtree(logs, ignore_errors=True)
    assert "mtcprof: run tiny stored in" in res.stderr, res.stderr
    return db, hosts, testbed.mount(hosts[0]) + top


def test_tiny_montage_exported(testbed, tmp_path):
    db, hosts, folder = _montage_db(testbed, tmp_path)
    try:
        for version in ("1.5", "1.6"):
            _check_export(tmp_path, db, hosts, version)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _check_export(base, db, hosts, version):
    out = str(base / f"tiny-{version}.json")
    r = _mtcprof("export", "--db", db, "--run", "tiny", "--format", "wfformat", "--schema-version", version,
                 "-o", out)
    assert r.returncode == 0, r.stderr
    with open(out) as f:
        doc = json.load(f)
    assert doc["schemaVersion"] == version
    assert wfformat.schema_problems(doc) == []

    from mtcio.db.api import Store
    with Store(db) as s:
        tasks = s.tasks("tiny")
        tf = s.task_files("tiny")          # auto: Gfarm files (the run touched some)
    assert tf["on_gfarm"].all() and len(tf)
    tf = tf[tf["read"] | tf["written"]]
    spec, ex = doc["workflow"]["specification"], doc["workflow"]["execution"]
    assert len(spec["tasks"]) == len(tasks) == 30
    assert len(spec["files"]) == tf["key"].nunique()
    assert sum(f["sizeInBytes"] for f in spec["files"]) == int(tf.drop_duplicates("key")["size"].sum())
    assert sum(t["readBytes"] for t in ex["tasks"]) == int(tf["bytes_read"].sum()) > 0
    assert sum(t["writtenBytes"] for t in ex["tasks"]) == int(tf["bytes_written"].sum()) > 0
    assert all(type(t["readBytes"]) is int and type(t["writtenBytes"]) is int for t in ex["tasks"])
    assert sorted({t["machines"][0] for t in ex["tasks"]}) == sorted(hosts)
    assert all(len(t["machines"]) == 1 for t in ex["tasks"])
    assert sorted(m["nodeName"] for m in ex["machines"]) == sorted(hosts)
    assert all(m["cpu"]["coreCount"] >= 1 for m in ex["machines"])
    cats = collections.Counter(t["category"] for t in spec["tasks"])
    assert cats == collections.Counter(tasks["stage"])
    assert cats["mProjectPP"] == 4 and cats["mDiff"] == 6
    # parents from the files: every mDiff reads two mProjectPP outputs, mAdd reads every mBackground's
    by = {t["id"]: t for t in spec["tasks"]}
    for t in spec["tasks"]:
        if t["category"] == "mDiff":
            assert sum(by[p]["category"] == "mProjectPP" for p in t["parents"]) == 2
        if t["category"] == "mAdd":
            assert sum(by[p]["category"] == "mBackground" for p in t["parents"]) == 4
    assert ex["makespanInSeconds"] > 0 and all(t["runtimeInSeconds"] > 0 for t in ex["tasks"])
    assert sum(t["ioTimeInSeconds"] for t in ex["tasks"]) > 0

    from wfcommons.wfinstances import Instance
    wf = Instance(out, schema_file=wfformat.SCHEMA_FILE).workflow
    loaded = [wf.nodes[n]["task"] for n in wf.nodes]
    assert len(loaded) == 30
    assert sum(t.bytes_read for t in loaded) == int(tf["bytes_read"].sum())
    assert len({f.file_id for t in loaded for f in t.input_files + t.output_files}) == len(spec["files"])
    assert collections.Counter(t.category for t in loaded) == cats

    r = _mtcprof("model", "--from-wfformat", out, "--hosts", "2", "--slots", "2", "-o", base / f"m{version}.yaml")
    assert r.returncode == 0, r.stderr
    from mtcio.db.workflow_model import load
    assert {s.name: s.tasks for s in load(str(base / f"m{version}.yaml")).stages} == dict(cats)
