"""`mtcenvelope measure --sizes-from`: a sweep's sizes spanning a workload's file sizes (envelope/sizes_from.py),
from a WfFormat instance and from the workflow model made of it; its bad input (no testbed: every case stops
before anything is measured, one line, exit 2)."""
import json
import subprocess
import sys

import pytest

from helpers.cli import run_envelope
from mtcio.envelope.sizes_from import SizesFromError, sizes_from, span

MTCPROF = [sys.executable, "-c", "import sys; from mtcio.cli import mtcprof; sys.exit(mtcprof())"]


def instance(path, sizes):
    """a -> b: a reads f0 and writes f1..; b reads a's outputs. sizes: the files' sizes, f0 first."""
    files = [{"id": f"f{i}", "sizeInBytes": s} for i, s in enumerate(sizes)]
    outs = [f["id"] for f in files[1:]]
    doc = {"name": "w", "schemaVersion": "1.5", "workflow": {"specification": {
        "tasks": [{"name": "a", "id": "a", "parents": [], "children": ["b"], "inputFiles": ["f0"],
                   "outputFiles": outs},
                  {"name": "b", "id": "b", "parents": ["a"], "children": [], "inputFiles": outs}],
        "files": files}}}
    path.write_text(json.dumps(doc))
    return path


def test_span_is_even_in_log_scale_ends_included():
    assert span([1, 1e6], 4) == [1, 100, 10000, 1000000]
    assert span([0.5, 1, 10, 1000, 1e6], 8) == [1, 7, 52, 373, 2683, 19307, 138950, 1000000]
    assert span([7, 7], 5) == [7]
    assert span([3, 900000], 1) == [900000]
    assert span([1, 3], 8) == [1, 2, 3]           # no more sizes than whole bytes in the span
    with pytest.raises(SizesFromError, match=r"^--size-points: expected >= 1, got 0$"):
        span([1, 2], 0)


def test_sizes_of_an_instance_and_of_its_model(tmp_path):
    inst = instance(tmp_path / "w.json", [1, 0, 1000, 1000000])       # the empty file is no size
    assert sizes_from([str(inst)], 4) == [1, 100, 10000, 1000000]
    assert sizes_from([str(inst)]) == [1, 7, 52, 373, 2683, 19307, 138950, 1000000]
    model = tmp_path / "w.yaml"
    r = subprocess.run(MTCPROF + ["model", "--from-wfformat", str(inst), "-o", str(model)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    assert sizes_from([str(model)], 4) == [1, 100, 10000, 1000000]
    other = instance(tmp_path / "v.json", [10, 20])
    assert sizes_from([str(other)], 3) == [10, 14, 20]
    assert sizes_from([str(other), str(inst)], 4) == [1, 100, 10000, 1000000]    # together


def run(capsys, *argv):
    rc, out, err = run_envelope(capsys, *argv)
    return rc, out, err.splitlines()


def test_bad_input_one_line_exit_2(tmp_path, capsys):
    db = tmp_path / "e.db"
    good = instance(tmp_path / "w.json", [1, 1000])
    empty = instance(tmp_path / "z.json", [0, 0])
    (tmp_path / "notwf.json").write_text('{"tasks": []}')
    (tmp_path / "bad.yaml").write_text("stages: 3\n")
    cases = [(["--sizes-from", tmp_path / "missing.json"], f"{tmp_path / 'missing.json'}: No such file or directory"),
             (["--sizes-from", tmp_path / "notwf.json"], "not a WfFormat instance"),
             (["--sizes-from", tmp_path / "bad.yaml"], str(tmp_path / "bad.yaml")),
             (["--sizes-from", empty], f"{empty}: no file with a size above 0 bytes"),
             (["--sizes-from", good, "--sizes", "1k"], "--sizes and --sizes-from: give one"),
             (["--size-points", "3"], "--size-points needs --sizes-from"),
             (["--sizes-from", good, "--size-points", "0"], "--size-points: expected >= 1, got 0"),
             (["--sizes", "2g", "--block", "whole"], "--block whole: the largest size, 2147483648 bytes, is above "
                                                     "1 GiB")]
    for argv, words in cases:       # a host no launcher reaches: should a check not stop it, nothing is measured
        rc, out, err = run(capsys, "measure", "--db", db, "--hosts", "nohost", "--launcher", "/nonexistent {host}",
                           *argv)
        assert rc == 2 and out == "" and len(err) == 1, (argv, err)
        assert err[0].startswith("mtcenvelope measure: ") and words in err[0], (argv, err)
    assert not db.exists()
