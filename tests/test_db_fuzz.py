"""Ingest of damaged shim logs, by fuzzing real ones: truncation at every offset, one-byte deletion at every offset,
random byte flips, random bytes.  Whatever the damage, ingest takes the warning path (the reader's LogError with
an offset, the valid prefix kept) and stores a process at most once; it never raises.  Bounded: ~10 s."""
import os
import random
import sqlite3
import time

import pytest

from mtcio.db import ingest as ing
from mtcio.db import store
from mtcio.preload.testing import log_paths, prog, run

SEED = 20261123


@pytest.fixture(scope="module")
def real_logs(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    data, logs = d / "data", d / "logs"
    data.mkdir(), logs.mkdir()
    assert run([prog("scripted"), str(data)], str(logs),
               env_extra={"MTCPROF_TRACE": "ops", "MTCPROF_TASK": "t", "MTCPROF_STAGE": "S"}).returncode == 0
    assert run(["sh", "-c", f"cat {data}/A | wc -c > {data}/o"], str(logs),
               env_extra={"MTCPROF_TASK": "u", "MTCPROF_STAGE": "S"}).returncode == 0
    paths = log_paths(str(logs))
    return {p: open(p, "rb").read() for p in paths}


class Harness:
    """Each mutant through what ingest does with one log (ingest.rows_from_bytes, then _RunWriter, tasks, sizes,
    task I/O), each in a run of its own inside a savepoint that is rolled back: thousands per second."""

    def __init__(self, db):
        self.conn = store.connect(db)
        self.conn.execute("BEGIN")
        self.n = self.stored = self.warned = 0

    def one(self, buf: bytes):
        self.n += 1
        name = f"/fuzz/m{self.n}.mtclog"
        rows, err = ing.rows_from_bytes(buf, name)
        if err is not None:
            assert isinstance(err.offset, int) and 0 <= err.offset <= len(buf), (err.offset, len(buf))
            self.warned += 1
        if rows is None:
            assert err is not None          # nothing stored only on the warning path
            return rows, err
        c = self.conn
        c.execute("SAVEPOINT m")
        rid = store.get_or_create_run(c, f"m{self.n}", "trace")
        w = ing._RunWriter(c, rid)
        w.add(name, rows)
        w.add(name, rows)                   # the same log twice: stored once
        w.flush()
        ing.build_tasks(c, rid)
        ing.fill_sizes(c, rid)
        ing.fill_task_io(c, rid)
        n_proc = c.execute("SELECT count(*) FROM processes WHERE run_id = ?", (rid,)).fetchone()[0]
        n_fa = c.execute("SELECT count(*) FROM file_access fa JOIN processes p ON p.id = fa.process_id "
                         "WHERE p.run_id = ?", (rid,)).fetchone()[0]
        complete = c.execute("SELECT log_complete FROM processes WHERE run_id = ?", (rid,)).fetchone()[0]
        c.execute("ROLLBACK TO m")
        c.execute("RELEASE m")
        assert (n_proc, n_fa) == (1, len(rows.files))
        assert complete == (err is None)
        self.stored += 1
        return rows, err


def test_truncation_and_deletion_at_every_offset(real_logs, tmp_path):
    h = Harness(tmp_path / "f.db")
    path, full = max(real_logs.items(), key=lambda kv: len(kv[1]))
    ref, err = ing.rows_from_bytes(full, path)
    assert err is None and len(ref.files) >= 10 and sum(c for c, _ in ref.ops) > 10
    t0 = time.monotonic()
    for i in range(len(full)):
        rows, err = h.one(full[:i])
        assert err is not None              # every cut is noticed ...
        if rows is not None:                # ... and what is kept is exactly a prefix of the log's file records
            assert rows.files == ref.files[:len(rows.files)]
            assert rows.proc["pid"] == ref.proc["pid"] and not rows.complete
    assert h.one(full)[1] is None
    kept = h.stored
    for i in range(len(full)):
        h.one(full[:i] + full[i + 1:])
    assert h.n == 2 * len(full) + 1
    assert kept >= len(full) // 2           # most cuts keep a process record and a prefix
    assert time.monotonic() - t0 < 60


def test_random_flips_and_random_bytes(real_logs, tmp_path):
    rng = random.Random(SEED)
    h = Harness(tmp_path / "f.db")
    logs = list(real_logs.values())
    t0 = time.monotonic()
    n = 0
    while n < 3000 and time.monotonic() - t0 < 6:
        b = bytearray(rng.choice(logs))
        for _ in range(rng.randint(1, 6)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        h.one(bytes(b))
        n += 1
    for _ in range(1000):
        h.one(os.urandom(rng.randrange(0, 200)))
        h.one(logs[0][:32] + bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300))))   # valid header
    assert n >= 500 and h.n == n + 2000
    assert h.warned >= n // 2 and h.stored > 0


def test_ingest_of_a_folder_of_damaged_logs(real_logs, tmp_path):
    """The real entry point: one ingest of the intact logs and damaged copies of them (sorted before them, so the
    damaged copy of a process comes first): one warning per damaged log naming it and an offset, every intact log
    stored once and complete, the rest of the run ingested."""
    rng = random.Random(SEED + 1)
    logs = tmp_path / "logs"
    logs.mkdir()
    for p, b in real_logs.items():
        (logs / os.path.basename(p)).write_bytes(b)
    (big_name, big), = [(p, b) for p, b in real_logs.items() if len(b) == max(map(len, real_logs.values()))]
    damaged = {"a-cut.mtclog": big[:len(big) // 2], "a-cut-end.mtclog": big[:-8],
               "a-zero-record.mtclog": big[:-16] + bytes(8), "a-short-record.mtclog": big[:-24] + bytes([2, 0, 0, 0]) +
               bytes(4),
               "a-deleted.mtclog": big[:40] + big[41:], "a-noise.mtclog": os.urandom(300),
               "a-empty.mtclog": b""}
    cut = set(damaged)
    for k in range(20):                      # sorted after the intact logs: an unseen flip is a duplicate, skipped
        b = bytearray(rng.choice(list(real_logs.values())))
        b[rng.randrange(32, len(b))] ^= 1 << rng.randrange(8)
        damaged[f"z-flip{k}.mtclog"] = bytes(b)
    for name, b in damaged.items():
        (logs / name).write_bytes(b)
    bad = {n for n, b in damaged.items() if ing.rows_from_bytes(b, n)[1] is not None}
    assert cut <= bad                        # (a flip inside a counter or a name is not damage a reader can see)
    got = []
    db = tmp_path / "x.db"
    res = ing.ingest(str(db), str(logs), gfwhere_cmd=None, warn=got.append)
    assert res.bad_logs == len(bad) and res.committed
    log_warn = [w for w in got if w.startswith(str(logs))]
    assert len(log_warn) == len(bad)
    for name in bad:
        (w,) = [w for w in log_warn if w.startswith(f"{logs}/{name}:")]
        assert "at byte offset " in w or "cannot read" in w, w
    assert not any("internal reader error" in w for w in got)
    c = sqlite3.connect(db)
    dup = c.execute("SELECT count(*) FROM (SELECT 1 FROM processes GROUP BY run_id, host_id, pid, start_ns "
                    "HAVING count(*) > 1)").fetchone()[0]
    assert dup == 0
    for p in real_logs:                      # every intact log is in, complete (it replaced a damaged copy)
        row = c.execute("SELECT log_complete FROM processes WHERE log_path = ?",
                        (str(logs / os.path.basename(p)),)).fetchone()
        assert row == (1,), p
    assert c.execute("SELECT count(*) FROM ingest_warnings").fetchone()[0] == len(bad)
    # once more: nothing new, no second copy of anything
    before = c.execute("SELECT count(*) FROM processes").fetchone()[0]
    res2 = ing.ingest(str(db), str(logs), gfwhere_cmd=None, warn=lambda m: None)
    assert sum(r["logs_added"] for r in res2.runs.values()) == 0
    assert c.execute("SELECT count(*) FROM processes").fetchone()[0] == before


def test_version1_log_every_offset_and_flips(tmp_path):
    """The same on a version-1 log (other FILE layout, 64-bit values): the reference reader's path."""
    full = open(os.path.join(os.path.dirname(__file__), "fixtures", "shim", "scripted-v1.mtclog"), "rb").read()
    ref, err = ing.rows_from_bytes(full, "v1")
    assert err is None and len(ref.files) == 10
    h = Harness(tmp_path / "f.db")
    for i in range(len(full)):
        rows, err = h.one(full[:i])
        assert err is not None and (rows is None or rows.files == ref.files[:len(rows.files)])
        h.one(full[:i] + full[i + 1:])
    rng = random.Random(SEED + 2)
    for _ in range(1000):
        b = bytearray(full)
        for _ in range(rng.randint(1, 6)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        h.one(bytes(b))
    assert h.n == 2 * len(full) + 1000 and h.stored > len(full)
