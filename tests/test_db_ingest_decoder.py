"""Ingest's decoder process (db/ingest_decode.py): the same rows as decoding in the ingesting process, on real shim
logs with damaged copies, names that are not UTF-8 and a log left to the parent; a killed decoder stores nothing."""
import os
import signal
import sqlite3
import subprocess

import pytest

from mtcio.db import ingest as ing
from mtcio.db import ingest_decode
from mtcio.preload.testing import env_for

from helpers.tracing import make_run, quiet, traced

# names of files, a folder, a task and a host that are not UTF-8 (as tests/test_db_robust.py makes them)
SCRIPT = (b"printf abc > \"$(printf 'f\\377x')\"; mkdir \"$(printf 'sub\\376')\"; "
          b"cat \"$(printf 'f\\377x')\" > \"$(printf 'sub\\376')/g\"; printf 12 > \"$(printf 'a\\nb')\"")


def _logs(tmp_path):
    """make_run's 3 tasks, a task with non-UTF-8 names, a task traced op by op, a truncated and a corrupt copy of
    logs (named to come first, before the logs they copy)."""
    d, logs = make_run(tmp_path)
    cwd = os.fsencode(tmp_path) + b"/d\xffir"
    os.mkdir(cwd)
    env = {os.fsencode(k): os.fsencode(v) for k, v in env_for(str(logs)).items()}
    env.update({b"MTCPROF_TASK": b"t\xfe1", b"MTCPROF_HOST": b"h\xffost", b"MTCPROF_RUN": b"R"})
    r = subprocess.run([b"sh", b"-c", SCRIPT], cwd=cwd, env=env, capture_output=True)
    assert r.returncode == 0, r.stderr
    (d / "big").write_bytes(os.urandom(200_000))
    assert traced(logs, ["cat", str(d / "big")], "ops", "S", "R", MTCPROF_TRACE="ops").returncode == 0
    paths = sorted(os.path.join(logs, n) for n in os.listdir(logs))
    blob = open(paths[0], "rb").read()
    (logs / "0-truncated.mtclog").write_bytes(blob[:len(blob) // 2])
    bad = bytearray(open(paths[1], "rb").read())
    bad[32 + 8 + 16:32 + 8 + 24] = b"\xff" * 8                     # PROC end_ns = 2^64 - 1
    (logs / "0-corrupt.mtclog").write_bytes(bytes(bad))
    return logs


def _tables(db) -> dict:
    c = sqlite3.connect(db)
    out = {}
    for (t,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"):
        cols = [r[1] for r in c.execute(f"PRAGMA table_info({t})") if (t, r[1]) != ("runs", "created")]
        out[t] = c.execute(f"SELECT {', '.join(cols)} FROM {t} ORDER BY "
                           f"{', '.join(str(i + 1) for i in range(len(cols)))}").fetchall()
    c.close()
    return out


def test_decoder_process_stores_what_ingest_stores_alone(tmp_path, monkeypatch):
    logs = _logs(tmp_path)
    n_logs = len(os.listdir(logs))
    alone, w_alone = tmp_path / "alone.db", []
    monkeypatch.setattr(ing, "DECODER_MIN_LOGS", 1 << 40)
    res_alone = ing.ingest(str(alone), str(logs), gfwhere_cmd=None, warn=w_alone.append)
    monkeypatch.setattr(ing, "DECODER_MIN_LOGS", 0)
    monkeypatch.setattr(ingest_decode, "CHUNK", 3)          # several jobs, and a window shorter than the run
    monkeypatch.setattr(ingest_decode, "WINDOW", 2)
    sizes = sorted(os.path.getsize(logs / n) for n in os.listdir(logs))
    big = sizes[len(sizes) // 2]
    monkeypatch.setattr(ingest_decode, "BIG", big)          # the larger half is decoded by the parent in its turn
    monkeypatch.setattr(ingest_decode, "CHUNK_BYTES", 2 * big)      # and a job's logs past this too
    two, w_two = tmp_path / "two.db", []
    res_two = ing.ingest(str(two), str(logs), gfwhere_cmd=None, warn=w_two.append)
    assert res_two.runs == res_alone.runs and res_two.runs["R"]["logs_added"] == n_logs - 1   # not the corrupt
    assert res_two.runs["R"]["ops"] > 0 and res_two.bad_logs == res_alone.bad_logs == 2
    assert w_two == w_alone and len(w_two) == 2 and "0-corrupt.mtclog" in w_two[0]
    got, want = _tables(two), _tables(alone)
    assert got == want
    assert len(got["processes"]) == n_logs - 2 and len(got["ops"]) == 1     # the truncated copy was replaced
    assert b"h\xffost" in {r[1] for r in got["hosts"]}      # stored as the BLOB of its bytes
    assert sum(isinstance(r[2], bytes) and r[2].endswith(b"/f\xffx") for r in got["files"]) == 1


def _decoder_pids() -> list[int]:
    me = os.getpid()
    kids = []
    for tid in os.listdir(f"/proc/{me}/task"):
        with open(f"/proc/{me}/task/{tid}/children") as f:
            kids += [int(p) for p in f.read().split()]
    out = []
    for pid in kids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"mtcio.db.ingest_decode" in f.read():
                    out.append(pid)
        except FileNotFoundError:
            pass
    return out


@pytest.mark.parametrize("earlier_run", [False, True])
def test_killed_decoder_stores_nothing_of_the_run(tmp_path, monkeypatch, earlier_run):
    """The decoder killed while ingest writes: a one-line DecoderError; the run is rolled back (a db this call
    created is removed; runs stored before are kept); the worker is gone."""
    logs = _logs(tmp_path)
    db = tmp_path / "x.db"
    if earlier_run:
        ing.ingest(str(db), str(logs), run="before", gfwhere_cmd=None, warn=quiet)
    monkeypatch.setattr(ing, "DECODER_MIN_LOGS", 0)
    monkeypatch.setattr(ingest_decode, "CHUNK", 1)          # more jobs than WINDOW after the first warning's log
    monkeypatch.setattr(ingest_decode, "WINDOW", 2)
    killed = []

    def warn(msg):                                          # the first log is damaged: ingest warns while writing
        if not killed:
            (pid,) = _decoder_pids()
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    with pytest.raises(ing.DecoderError) as e:
        ing.ingest(str(db), str(logs), run="now", gfwhere_cmd=None, warn=warn)
    assert str(e.value) == ("the log decoder process ended (killed by signal 9) before it had decoded every log; "
                            "the run being ingested was not stored")
    assert killed and _decoder_pids() == []
    if not earlier_run:
        assert not db.exists()
        return
    c = sqlite3.connect(db)
    assert c.execute("SELECT name FROM runs").fetchall() == [("before",)]
    assert c.execute("SELECT count(DISTINCT run_id), count(*) FROM processes").fetchone() == (1, len(os.listdir(logs))
                                                                                                - 2)
