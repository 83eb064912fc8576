"""mtcenvelope import/export/show/list as a user meets them (no testbed): the export -> import ->
export round trip is exact, an output is imported once, `-o -` is stdout, a closed pipe is quiet,
failed points are listed with their columns, an interrupted run is marked."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mtcio import envelope
from mtcio.db import store as dbstore
from mtcio.envelope.points import Point

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
CLI = [sys.executable, "-m", "mtcio.envelope.cli"]
IOR = FIX / "ior" / "ior-gfarm-fpp-t1m-np2.json"
MDTEST = FIX / "mdtest" / "mdtest-gfarm-n200-np4.txt"


def cli(*args, check=True, **kw):
    cp = subprocess.run(CLI + [str(a) for a in args], capture_output=True, text=True, **kw)
    if check:
        assert cp.returncode == 0, cp.stderr
    return cp


def store(db, name, points, status):
    conn = dbstore.connect(db)
    try:
        dbstore.add_envelope_points(conn, name, points, meta={"tool": "native", "status": status,
                                                              "hosts": ["a", "b"]})
    finally:
        conn.close()


def some_points():
    cfg = {"ops": 32, "files_per_proc": 16, "nested": {"x": [1, 2.5, "é"]}}
    return [Point("T1L", 1024, 2, 2, 1234.5678901234567, "ops/s", 0, "native", "1", cfg),
            Point("B1L", 1024, 2, 2, 1234.5678901234567 * 1024, "bytes/s", 0, "native", "1", cfg),
            Point.failed("TL", 1 << 20, 1, 2, 1, "native", "3 of 4 ops failed: ENOSPC, \"x\"",
                         "1", {"ops": 4}),
            Point("Tm", 0, 1, 2, 0.1 + 0.2, "ops/s", 2, "native", None, {})]


@pytest.mark.parametrize("fmt", ["yaml", "csv"])
def test_export_import_export_is_exact(tmp_path, fmt):
    db = tmp_path / "e.db"
    cli("import", IOR, MDTEST, "--db", db, "--name", "a", "--metric", "T1L")
    store(db, "a", some_points(), "complete")
    first = cli("export", "--db", db, "--name", "a", "--format", fmt).stdout
    f = tmp_path / f"a.{fmt}"
    f.write_text(first)
    cp = cli("import", f, "--db", db, "--name", "b")
    assert "from an envelope export" in cp.stderr and "imported 22 points into run 'b'" in cp.stderr
    second = cli("export", "--db", db, "--name", "b", "--format", fmt).stdout
    # the same points, byte for byte, but for the run's name (and the run's own meta in YAML)
    if fmt == "csv":
        assert second.replace("\nb,", "\na,") == first
    else:
        import yaml
        d1, d2 = yaml.safe_load(first), yaml.safe_load(second)
        assert d1["points"] == d2["points"] and len(d1["points"]) == 22
        assert (d1["run"], d2["run"], d2["status"]) == ("a", "b", "complete")
    a, b = envelope.load(db, "a"), envelope.load(db, "b")
    assert a.drop(columns="run").equals(b.drop(columns="run"))
    # importing the same export again would double it: refused, nothing stored
    cp = cli("import", f, "--db", db, "--name", "b", check=False)
    assert cp.returncode == 2 and "22 of its 22 points are already in run 'b'" in cp.stderr
    assert len(envelope.load(db, "b")) == 22


def test_same_output_twice_is_refused(tmp_path):
    db = tmp_path / "e.db"
    cli("import", IOR, "--db", db, "--name", "r", "--metric", "T1L")
    n = len(envelope.load(db, "r"))
    cp = cli("import", IOR, "--db", db, "--name", "r", "--metric", "T1L", check=False)
    assert cp.returncode == 2
    assert f"{IOR}: already imported into run 'r' (same content" in cp.stderr
    assert "Traceback" not in cp.stderr
    copy = tmp_path / "copy.json"                      # same content under another name
    copy.write_bytes(IOR.read_bytes())
    cp = cli("import", copy, "--db", db, "--name", "r", check=False)
    assert cp.returncode == 2 and "already imported" in cp.stderr
    cp = cli("import", MDTEST, MDTEST, "--db", db, "--name", "r", check=False)
    assert cp.returncode == 2 and "same content as" in cp.stderr
    assert len(envelope.load(db, "r")) == n            # nothing doubled, nothing added
    # another output of the same configuration: its repeats follow the run's
    other = FIX / "ior" / "ior-gfarm-fpp-t1m-np2.txt"
    cp = cli("import", other, "--db", db, "--name", "r", "--metric", "T1L", check=False)
    assert cp.returncode == 2 and "run 'r' already exists" in cp.stderr and "--append" in cp.stderr
    cli("import", other, "--db", db, "--name", "r", "--metric", "T1L", "--append")
    df = envelope.load(db, "r")
    tl = df[(df.metric == "TL") & (df.file_size == 1 << 20)]
    assert tl["repeat"].is_unique and len(tl) == 2 * (n // 4)


def test_export_to_stdout_and_a_closed_pipe(tmp_path):
    db = tmp_path / "e.db"
    cli("import", IOR, "--db", db, "--name", "r", "--metric", "T1L")
    a = cli("export", "--db", db, "--format", "csv", "-o", "-", cwd=tmp_path).stdout
    assert not (tmp_path / "-").exists()
    assert a == cli("export", "--db", db, "--format", "csv").stdout
    assert a.splitlines()[0].endswith(",config,run_status") and len(a.splitlines()) == 13
    p = subprocess.run(" ".join(CLI) + f" export --db {db} -o - | head -c 10", shell=True,
                       capture_output=True, text=True, executable="/bin/bash")
    assert p.stdout == "format: mt" and p.stderr == ""


def test_show_failed_prints_the_columns(tmp_path):
    db = tmp_path / "e.db"
    store(db, "f", some_points(), "complete")
    out = cli("show", "--db", db, "--name", "f", "--failed").stdout
    assert out == ("  TL size=1048576 ppn=1 hosts=2 repeat=1: 3 of 4 ops failed: ENOSPC, "
                   "\"x\"\n")


def test_interrupted_run_is_marked(tmp_path):
    db = tmp_path / "e.db"
    store(db, "done", some_points(), "complete")
    store(db, "cut", some_points(), "interrupted")
    lst = json.loads(cli("list", "--db", db, "--json").stdout)
    assert {r["name"]: r["status"] for r in lst} == {"done": "complete", "cut": "interrupted"}
    assert "interrupted" in cli("list", "--db", db).stdout
    y = cli("export", "--db", db, "--name", "cut").stdout
    assert "\nstatus: interrupted\n" in y
    c = cli("export", "--db", db, "--name", "cut", "--format", "csv").stdout
    assert all(ln.endswith(",interrupted") for ln in c.splitlines()[1:])
    f = tmp_path / "cut.csv"
    f.write_text(c)
    assert envelope.load(f).attrs["status"] == "interrupted"
    assert envelope.load(db, "cut").attrs["status"] == "interrupted"


def test_import_refuses_what_is_not_a_regular_file(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for f, why in ((fifo, "not a regular file"), ("/dev/zero", "not a regular file"),
                   (tmp_path, "cannot read: Is a directory")):
        cp = cli("import", f, "--db", tmp_path / "e.db", "--name", "x", check=False,
                 timeout=20)
        assert (cp.returncode, cp.stderr) == (2, f"mtcenvelope import: {f}: {why}\n")
    assert not (tmp_path / "e.db").exists()


def test_a_measure_on_an_unsteady_machine_is_warned(tmp_path):
    """A tenth or more of a run's op-rate points of 5+ repeats swinging > 2x between their quartiles is warned;
    one stalled repeat of five, bandwidth points and points of fewer repeats do not count."""
    from mtcio.envelope.cli import _swung
    from mtcio.envelope.stats import quartiles, swung
    assert quartiles([5.0, 1.0, 4.0, 2.0, 3.0]) == (2.0, 4.0)
    assert not swung([10.0, 300, 300, 300, 300]) and swung([100.0, 100, 300, 300, 300])
    assert not swung([100.0, 300, 300, 300])

    def pts(cells, swinging):
        out = []
        for i in range(cells):
            vals = (100.0, 100, 300, 300, 300) if i < swinging else (10.0, 300, 300, 300, 300)
            out += [Point("T1L", 1024 * (i + 1), 1, 1, v, "ops/s", r, "native", "1", {}) for r, v in enumerate(vals)]
            out += [Point("B1L", 1024 * (i + 1), 1, 1, 1.0 + 1e6 * (r % 2), "bytes/s", r, "native", "1", {})
                    for r in range(5)]
        return out + [Point("TL", 1024, 1, 1, v, "ops/s", r, "native", "1", {}) for r, v in enumerate((1.0, 9.0, 9.0))]
    store(tmp_path / "a.db", "ten", pts(10, 1), "complete")
    assert _swung(str(tmp_path / "a.db"), "ten").startswith("1 of 10 op-rate points of 5 or more repeats swung")
    store(tmp_path / "b.db", "eleven", pts(11, 1), "complete")
    assert _swung(str(tmp_path / "b.db"), "eleven") is None


@pytest.mark.parametrize("fixture, old, new, said", [
    ("ior/ior-gfarm-fpp-t1m-np1.txt", "write     124.82 ", "write     0.00   ",
     "TL at file size 1048576, 1 per host on 1 hosts, repeat 0: a rate of 0 ops/s is no measurement in this ior "
     "output; nothing imported"),
    ("iozone/iozone-t2-s1m-r128k-write-read.txt", "Parent sees throughput for  2 readers \t\t= 1858566.79 KB/sec",
     "Parent sees throughput for  2 readers \t\t= 0.00 KB/sec",
     "at file size 1048576, 2 per host on 1 hosts, repeat 0: a rate of 0 ops/s is no measurement in this iozone "
     "output; nothing imported"),
])
def test_a_zero_rate_is_refused_naming_the_point(tmp_path, fixture, old, new, said):
    """A rate printed as 0 (nothing moved, or too small to print) was stored as an envelope point."""
    text = (FIX / fixture).read_text()
    assert text.count(old) == 1
    bad = tmp_path / Path(fixture).name
    bad.write_text(text.replace(old, new))
    db = tmp_path / "e.db"
    cp = cli("import", bad, "--db", db, "--name", "r", "--hosts", "1", check=False) if "iozone" in fixture else \
        cli("import", bad, "--db", db, "--name", "r", check=False)
    assert cp.returncode == 2 and len(cp.stderr.splitlines()) == 1, cp.stderr
    assert cp.stderr.startswith(f"mtcenvelope import: {bad}: ") and said in cp.stderr, cp.stderr
    assert not db.exists()           # every file is parsed before the db is opened


def test_a_zero_rate_in_an_export_is_refused(tmp_path):
    db = tmp_path / "e.db"
    store(db, "m", some_points(), "complete")
    out = tmp_path / "x.yaml"
    cli("export", "--db", db, "--name", "m", "-o", out)
    text = out.read_text()
    assert text.count("value: 1234.5678901234567\n") == 1
    out.write_text(text.replace("value: 1234.5678901234567\n", "value: 0.0\n"))
    cp = cli("import", out, "--db", tmp_path / "f.db", "--name", "r", check=False)
    assert cp.returncode == 2 and len(cp.stderr.splitlines()) == 1, cp.stderr
    assert f"{out}: point 1: T1L at file size 1024, 2 per host on 2 hosts, repeat 0: a rate of 0 ops/s is no " \
           f"measurement; nothing imported" in cp.stderr, cp.stderr
