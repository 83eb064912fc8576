"""A tiny WfBench workflow (a BLAST instance of wfcommons' recipe, 11 tasks: split_fasta, 8 blastall, cat_blast,
cat; sizes scaled to 4 MB in all) on the real testbed under Rake with the mtcio plugin and its placement, 2 hosts:
every task of the instance is in the db exactly once with its stage (the task's category), and the bytes it read
and wrote on Gfarm equal the instance's file sizes (its input files' sizes, its output files' sizes)."""
import json
import os
import shutil
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from montage_example import run as mrun  # noqa: E402

from helpers.wfbench import check_run_matches_instance  # noqa: E402

pytest.importorskip("wfcommons")
from wfbench_example import instance, prepare, run as wrun  # noqa: E402

pytestmark = [pytest.mark.testbed,
              pytest.mark.skipif(shutil.which("rake") is None or shutil.which("stress-ng") is None,
                                 reason="needs Debian's rake and stress-ng")]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    src = str(tmp_path_factory.mktemp("wfbench") / "src")
    inst = instance.generate("blast", 45, seed=1).pruned(8)
    inst = inst.scaled(prepare.factor_for(inst, 4))
    prepare.prepare(src, inst)
    return src, inst


def test_tiny_wfbench_traced_bytes_equal_instance(testbed, tiny, tmp_path):
    src, inst = tiny
    assert len(inst.tasks) == 11
    bed = mrun.Bed(testbed.hosts, {h: testbed.mount(h) for h in testbed.hosts}, testbed.user)
    hosts = testbed.hosts[:2]
    db = str(tmp_path / "mtc.db")
    top = f"/wfbench-test-{os.getpid()}"
    try:
        wrun.run_once(bed, src, hosts, run="tiny", db=db, top=top, keep=True)
        m0 = testbed.mount(hosts[0]) + top
        spec = json.load(open(os.path.join(src, "tasks.json")))
        for t in spec["tasks"]:                   # the files really are there with the instance's sizes
            for f, size in t["outputs"].items():
                assert os.path.getsize(os.path.join(m0, f)) == size, f
    finally:
        testbed.exec(hosts[0], ["rm", "-rf", testbed.mount(hosts[0]) + top], check=False)
    check_run_matches_instance(db, "tiny", spec, inst, hosts)
