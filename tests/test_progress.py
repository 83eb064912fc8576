"""The progress bars of `mtcenvelope measure` and `mtcprof ingest`: a redrawn bar on a terminal; written to a log
file or a pipe, no bar, only the lines that carry information (a failed step, the end)."""
import io
import os

from mtcio.db.ingest import Progress as IngestProgress
from mtcio.envelope.measure import Progress as MeasureProgress, Step


def steps(n):
    return [Step("local", 4, 1 << 20, 2, rep) for rep in range(n)]


def pty_stream():
    master, slave = os.openpty()
    return os.fdopen(master, "rb", buffering=0), os.fdopen(slave, "w")


def read_all(master, tty) -> str:
    """Everything written to the terminal: the writer's side closed, read until the end (EIO on Linux)."""
    tty.close()
    out = b""
    while True:
        try:
            chunk = master.read(65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    return out.decode()


def test_measure_progress_to_a_file_is_the_failed_steps_and_the_end():
    out = io.StringIO()
    st = steps(120)
    p = MeasureProgress(st, stream=out)
    for i, s in enumerate(st):
        p.update(s, failed=i in (7, 50))
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert [ln.split("steps")[0].split()[-1] for ln in lines] == ["8/120", "51/120", "120/120"]
    assert lines[0].endswith("failed 1") and lines[-1].endswith("failed 2")
    assert lines[-1].startswith("[" + "#" * 30 + "] 100.0% 120/120 steps  T1L 1MiB p2x4 r119")


def test_measure_progress_on_a_terminal_redraws_one_line():
    master, tty = pty_stream()
    st = steps(5)
    p = MeasureProgress(st, stream=tty)
    for s in st:
        p.update(s)
    text = read_all(master, tty)
    # five redraws of one line, ended once (the terminal shows the newline as \r\n)
    assert text.count("\r[") == 5 and text.count("\n") == 1 and text.endswith("5/5 steps  T1L 1MiB p2x4 r4"
                                                                              + text.split("r4")[-1])
    assert text.endswith("left ~0:00\r\n")


def test_measure_progress_disabled_writes_nothing():
    out = io.StringIO()
    st = steps(3)
    p = MeasureProgress(st, stream=out, enabled=False)
    for s in st:
        p.update(s, failed=True)
    assert out.getvalue() == ""


def test_ingest_progress_to_a_pipe_is_one_line(capsys):
    p = IngestProgress(5000, "ingest")
    for _ in range(5000):
        p.update()
    p.done()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\r" not in err
    assert err.startswith("ingest [" + "#" * 30 + "] 5000/5000 (")


def test_ingest_progress_on_a_terminal(monkeypatch):
    master, tty = pty_stream()
    monkeypatch.setattr("sys.stderr", tty)
    p = IngestProgress(3000, "ingest")
    for _ in range(3000):
        p.update()
    p.done()
    monkeypatch.undo()
    text = read_all(master, tty)
    assert text.startswith("\ringest [") and text.count("\n") == 1 and text.endswith("/s)\r\n")
    assert text.split("\r")[-2].startswith("ingest [" + "#" * 30 + "] 3000/3000 (")
