"""Bad input met by mtcenvelope and mtcbed (no testbed): a corrupt testbed state file, imports into a run that
exists, import options that cannot apply, outputs that cannot be written, a --db that is not SQLite, --version.
Every case is one line on stderr with the documented exit code, never a traceback."""
import os
from pathlib import Path

import pytest

from mtcio import __version__
from mtcio.db import store as dbstore
from helpers.cli import run_envelope
from mtcio.envelope.export import load
from mtcio.envelope.points import Point

FIX = Path(__file__).resolve().parent / "fixtures"
IOR = FIX / "ior" / "ior-gfarm-fpp-t1m-np2.json"            # 1 node, 2 procs, write + read
IOR1 = FIX / "ior" / "ior-gfarm-fpp-t1m-np1.json"
IOR_SHARED = FIX / "ior" / "ior-gfarm-shared-t1m-b4m-s4-np4.json"
MDTEST = FIX / "mdtest" / "mdtest-gfarm-n200-np4.txt"         # creates only: no read phase
FIO_READ = FIX / "fio" / "fio-read-1m-nj2.json"


run = run_envelope


def one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    return lines[0]


# ---- 1. mtcbed with a corrupt state file -------------------------------------------------------------------------

@pytest.mark.parametrize("content", ["{not json", "[1, 2]"])
def test_bed_status_and_exec_with_a_corrupt_state_file(tmp_path, monkeypatch, capsys, content):
    from mtcio.testbed import cli as bedcli
    from mtcio.testbed import layout
    sf = tmp_path / "state.json"
    sf.write_text(content)
    monkeypatch.setattr(layout, "STATE_FILE", sf)
    want = f"mtcbed: the testbed state file {sf} is corrupt: run `mtcbed down` to tear down whatever is left and " \
           "clear it"
    for argv in (["status"], ["status", "--json"]):
        assert bedcli.main(argv) == 3
        out, err = capsys.readouterr()
        assert (out, one_line(err)) == ("", want)
    monkeypatch.setattr(os, "geteuid", lambda: 0)       # exec wants root; it must stop before running anything
    assert bedcli.main(["exec", "mtc-node1", "--", "true"]) == 3
    out, err = capsys.readouterr()
    assert (out, one_line(err)) == ("", want)
    assert bedcli.main(["up", "--nodes", "2"]) == 3      # stops at the state file: nothing is built
    out, err = capsys.readouterr()
    assert one_line(err) == want and "--reuse" not in err


# ---- 2. import into a run that exists ----------------------------------------------------------------------------

def _native_run(db, name):
    conn = dbstore.connect(str(db))
    try:
        dbstore.add_envelope_points(conn, name, [Point("T1L", 1024, 1, 1, 100.0, "ops/s", 0, "native", "1", {})],
                                    meta={"tool": "native", "status": "complete"})
    finally:
        conn.close()


def test_import_never_mixes_into_a_measured_run(tmp_path, capsys):
    db = tmp_path / "e.db"
    _native_run(db, "bed")
    for extra in ([], ["--append"]):
        rc, _, err = run(capsys, "import", IOR, "--db", db, "--name", "bed", *extra)
        assert (rc, one_line(err)) == (2, f"mtcenvelope import: run 'bed' in {db} holds points measured with "
                                          "native; imported points are not mixed into it: pick another --name")
    assert len(load(db, "bed")) == 1


def test_import_adds_to_an_import_run_only_with_append(tmp_path, capsys):
    db = tmp_path / "e.db"
    rc, _, err = run(capsys, "import", IOR, MDTEST, "--db", db, "--name", "r")   # several files, one new run
    assert rc == 0 and "imported 18 points into run 'r'" in err
    rc, _, err = run(capsys, "import", IOR1, "--db", db, "--name", "r")
    assert (rc, one_line(err)) == (2, f"mtcenvelope import: run 'r' already exists in {db}; pick another --name "
                                      "or give --append")
    assert len(load(db, "r")) == 18
    rc, _, err = run(capsys, "import", IOR1, "--db", db, "--name", "r", "--append")
    assert rc == 0 and len(load(db, "r")) == 30
    rc, _, err = run(capsys, "import", IOR, "--db", db, "--name", "r", "--append")   # still imported once
    assert rc == 2 and "already imported into run 'r'" in err


# ---- 3. import options ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("opt,val,f", [("--hosts", "0", IOR), ("--hosts", "-2", IOR), ("--procs-per-host", "0", IOR),
                                       ("--procs-per-host", "-1", FIO_READ), ("--hosts", "x", FIO_READ)])
def test_import_counts_below_one_are_refused(tmp_path, capsys, opt, val, f):
    rc, _, err = run(capsys, "import", f, "--db", tmp_path / "e.db", "--name", "x", opt, val)
    assert rc == 2 and err.splitlines()[-1] == (f"mtcenvelope import: error: argument {opt}: expected a positive "
                                                f"integer, got '{val}'")
    assert not (tmp_path / "e.db").exists()


def test_import_counts_that_an_output_records_itself(tmp_path, capsys):
    db = tmp_path / "e.db"
    rc, _, err = run(capsys, "import", IOR, "--db", db, "--name", "a", "--hosts", "3")
    assert (rc, one_line(err)) == (2, f"mtcenvelope import: {IOR}: --hosts 3: this IOR output records its own host "
                                      "count (1); --hosts is for fio and iozone outputs, which do not")
    rc, _, err = run(capsys, "import", MDTEST, "--db", db, "--name", "a", "--procs-per-host", "2")
    assert rc == 2 and "--procs-per-host 2: this mdtest output records its own processes per host (4)" in err
    assert not db.exists()
    # what the output says anyway is no contradiction
    assert run(capsys, "import", IOR, "--db", db, "--name", "a", "--hosts", "1", "--procs-per-host", "2")[0] == 0
    # fio cannot tell: the options set its counts
    assert run(capsys, "import", FIO_READ, "--db", db, "--name", "f", "--hosts", "2", "--procs-per-host", "1")[0] == 0
    df = load(db, "f")
    assert set(zip(df["hosts"], df["procs_per_host"])) == {(2, 1)}


def test_import_metric_that_no_read_phase_takes(tmp_path, capsys):
    db = tmp_path / "e.db"
    rc, _, err = run(capsys, "import", MDTEST, "--db", db, "--name", "m", "--metric", "T1L")
    assert (rc, one_line(err)) == (2, f"mtcenvelope import: --metric T1L: {MDTEST} has no read phase it applies to "
                                      "(its points: BL, TL); leave --metric out")
    rc, _, err = run(capsys, "import", IOR_SHARED, "--db", db, "--name", "m", "--metric", "T1R")
    assert rc == 2 and "shared-file reads are N-to-1 whatever it says" in err
    assert not db.exists()
    # one of the files has reads: the option does something
    assert run(capsys, "import", IOR, MDTEST, "--db", db, "--name", "m", "--metric", "T1R")[0] == 0
    assert {"T1R", "B1R", "TL", "BL"} == set(load(db, "m")["metric"])
    assert run(capsys, "import", FIO_READ, "--db", db, "--name", "f", "--metric", "T1R")[0] == 0


def test_import_api_refuses_counts_below_one(tmp_path):
    from mtcio.envelope.importer import parse_files
    with pytest.raises(ValueError, match="--hosts: expected a positive integer, got 0"):
        parse_files([str(FIO_READ)], hosts=0)


# ---- 4. outputs that cannot be written ---------------------------------------------------------------------------

@pytest.fixture
def imported(tmp_path, capsys):
    db = tmp_path / "e.db"
    assert run(capsys, "import", IOR, "--db", db, "--name", "r")[0] == 0
    return db


def test_export_to_a_path_that_cannot_be_written(imported, tmp_path, capsys):
    a_file = tmp_path / "f"
    a_file.write_text("x")
    for out, why in ((tmp_path / "nodir" / "x.yaml", f"no such folder {tmp_path / 'nodir'}"),
                     (a_file / "x.yaml", "a part of its path is a file, not a folder"),
                     (tmp_path, "it is a folder")):
        rc, stdout, err = run(capsys, "export", "--db", imported, "-o", out)
        assert (rc, stdout, one_line(err)) == (1, "", f"mtcenvelope export: cannot write {out}: {why}")


def test_plot_into_a_file(imported, tmp_path, capsys):
    a_file = tmp_path / "f"
    a_file.write_text("x")
    rc, _, err = run(capsys, "plot", "--db", imported, "-o", a_file)
    assert (rc, one_line(err)) == (1, f"mtcenvelope plot: cannot write {a_file}: it is a file, not a folder")
    rc, _, err = run(capsys, "plot", "--db", imported, "-o", a_file / "sub")
    assert rc == 1 and "a part of its path is a file, not a folder" in err
    # a missing --db is still bad input, not an output failure
    rc, _, err = run(capsys, "plot", "--db", tmp_path / "none.db", "-o", tmp_path / "fig")
    assert rc == 2 and not (tmp_path / "fig").exists()


# ---- 5. a --db that is not SQLite --------------------------------------------------------------------------------

@pytest.mark.parametrize("content", [b"garbage\n", b"\x00\x9f\xfe\xffbinary" * 8, b"a: [\n"],
                         ids=["text", "binary", "broken-yaml"])
def test_a_db_that_is_not_sqlite(tmp_path, capsys, content):
    fake = tmp_path / "fake.db"
    fake.write_bytes(content)
    for cmd in ("list", "show", "export"):
        rc, out, err = run(capsys, cmd, "--db", fake)
        assert rc == 2 and out == ""
        assert one_line(err).startswith(f"mtcenvelope {cmd}: {fake}: not an mtcio database (not an SQLite file)")


# ---- 6. --version ------------------------------------------------------------------------------------------------

def test_version(capsys):
    for argv in (["--version"], ["list", "--version"], ["import", "--version"]):
        rc, out, err = run(capsys, *argv)
        assert (rc, out, err) == (0, f"mtcenvelope (mtcio) {__version__}\n", "")
    rc, out, _ = run(capsys, "--help")
    assert rc == 0 and "--version" in out and "print the version and exit" in out


def test_show_of_a_single_repeat_has_no_nan(tmp_path, capsys):
    db = tmp_path / "x.db"
    _native_run(db, "bed")
    rc, out, err = run(capsys, "show", "--db", db, "--name", "bed")
    assert rc == 0, err
    head, row = out.splitlines()
    assert row.split() == ["T1L", "1.0", "KiB", "1", "1", "1", "ops/s", "1", "0", "100", "-", "100", "100", "-", "-"], out
