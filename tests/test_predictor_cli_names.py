"""mtcpredict --validate on a traced run whose run and stage names are not UTF-8 (bytes the shell passes as they
are): the predictions are stored under the names' exact bytes, the report is written, names are shown as \\xNN."""
import json
import os
import sqlite3
import subprocess
import sys

MTCPROF = [sys.executable, "-c", "import sys; from mtcio.cli import mtcprof; sys.exit(mtcprof())"]
MTCPREDICT = [sys.executable, "-c", "import sys; from mtcio.cli import mtcpredict; sys.exit(mtcpredict())"]
RUN, STAGE = b"r\xfe", b"s\xff"


def _cli(argv, cwd):
    return subprocess.run(argv, capture_output=True, cwd=cwd)


def _traced_model(tmp_path):
    """One traced task (`sh -c 'echo x>a'`) under RUN/STAGE, ingested into t.db and modelled into m.yaml."""
    (tmp_path / "L").mkdir()
    steps = [[*MTCPROF, b"run", b"--dir", b"L", b"--run", RUN, b"--stage", STAGE, b"--", b"sh", b"-c", b"echo x>a"],
             [*MTCPROF, "ingest", "--db", "t.db", "L"],
             [*MTCPROF, b"model", b"--db", b"t.db", b"--run", RUN, b"-o", b"m.yaml"]]
    for argv in steps:
        r = _cli(argv, tmp_path)
        assert r.returncode == 0, r.stderr


def test_validate_stores_and_reports_names_that_are_not_utf8(tmp_path):
    _traced_model(tmp_path)
    predict = [*MTCPREDICT, b"m.yaml", b"--validate", b"t.db:" + RUN, b"--out", b"p", b"--bootstrap", b"0"]
    r = _cli(predict, tmp_path)
    assert r.returncode == 0, r.stderr
    assert b"Traceback" not in r.stderr and b"\\udc" not in r.stderr
    rows = r.stdout.decode().splitlines()
    assert rows[1] == "validated against: r\\xfe"
    assert [ln.split()[:2] for ln in rows[4:6]] == [["s\\xff", "faithful"], ["s\\xff", "refined"]]

    conn = sqlite3.connect(tmp_path / "t.db")
    got = conn.execute("SELECT r.name, p.stage, p.variant, v.measured_s, v.source FROM predictions p "
                       "JOIN runs r ON r.id = p.run_id JOIN validations v ON v.prediction_id = p.id "
                       "ORDER BY p.variant").fetchall()
    result = json.loads((tmp_path / "p" / "prediction.json").read_text())
    measured = result["measured"][STAGE.decode("utf-8", "surrogateescape")]["measured_s"]
    source = b"max over hosts of per-slot traced I/O time; runs " + RUN
    assert got == [(RUN, STAGE, "faithful", measured, source), (RUN, STAGE, "refined", measured, source)]

    page = (tmp_path / "p" / "report.html").read_text(encoding="utf-8")
    # the Stages table's row (N=1, C=1 ...)
    assert page.count("<tr><td class=l>s\\xff</td><td class=l>faithful</td><td>1</td><td>1</td>") == 1
    assert "Validated against traced run(s): r\\xfe." in page
    assert sorted(os.listdir(tmp_path / "p")) == ["dominant.png", "envelope.png", "maps.png", "parity.png",
                                                  "prediction.json", "report.html", "stage_time.png"]

    # predicted again: the earlier predictions of the same run, stage, variant and envelope are replaced
    r = _cli(predict, tmp_path)
    assert r.returncode == 0, r.stderr
    assert conn.execute("SELECT count(*) FROM predictions").fetchone()[0] == 2
    assert conn.execute("SELECT count(*) FROM validations").fetchone()[0] == 2
