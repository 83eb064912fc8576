"""Ingest of damaged shim logs, by fuzzing real ones: truncation at every offset, one-byte deletion at every offset,
random byte flips, values of the string records and the FILE records' counts rewritten, random bytes.  Whatever the
damage, ingest takes the warning path (the reader's LogError with an offset, the valid prefix kept) and stores a
process at most once; it never raises.

The random mutants are counted, not timed: MTCIO_FUZZ_MUTANTS (default 3,000 per kind, a few seconds in `make test`)
sets how many, MTCIO_FUZZ_SEED the seed.  A long run, 1,000,000 random mutants of four kinds and 250,000 flips of a
version-1 log (~10 min):
    MTCIO_FUZZ_MUTANTS=250000 nice -n 19 .venv/bin/python -m pytest --timeout=0 tests/test_db_fuzz.py"""
import os
import random
import sqlite3
import struct

import pytest

from mtcio.db import ingest as ing
from mtcio.db import ingest_read
from mtcio.db import ingest_tasks
from mtcio.db import ingest_writer
from mtcio.db import logformat as lf
from mtcio.db import store
from mtcio.preload.testing import log_paths, prog, run

SEED = int(os.environ.get("MTCIO_FUZZ_SEED", "20261123"))
MUTANTS = int(os.environ.get("MTCIO_FUZZ_MUTANTS", "3000"))
TEXT = b" \t\n0123456789.-+eEnaifx"      # what a clock or count string could be garbled into


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
    """Each mutant through what ingest does with one log (ingest_read.rows_from_bytes, then RunWriter, tasks, sizes,
    task I/O), each in a run of its own inside a savepoint that is rolled back: thousands per second."""

    def __init__(self, db):
        self.conn = store.connect(db)
        self.conn.execute("BEGIN")
        self.n = self.stored = self.warned = 0

    def one(self, buf: bytes):
        self.n += 1
        name = f"/fuzz/m{self.n}.mtclog"
        rows, err = ingest_read.rows_from_bytes(buf, name)
        if err is not None:
            assert isinstance(err.offset, int) and 0 <= err.offset <= len(buf), (err.offset, len(buf))
            self.warned += 1
        if rows is None:
            assert err is not None          # nothing stored only on the warning path
            return rows, err
        c = self.conn
        c.execute("SAVEPOINT m")
        rid = store.get_or_create_run(c, f"m{self.n}", "trace")
        w = ingest_writer.RunWriter(c, rid)
        w.add(name, rows)
        w.add(name, rows)                   # the same log twice: stored once
        w.flush()
        ingest_tasks.build_tasks(c, rid)
        ingest_writer.fill_sizes(c, rid)
        ingest_tasks.fill_task_io(c, rid)
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
    ref, err = ingest_read.rows_from_bytes(full, path)
    assert err is None and len(ref.files) >= 10 and sum(c for c, _ in ref.ops) > 10
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


def _strings(buf: bytes) -> list:
    """(payload offset, length) of each STR record's value."""
    out = []
    for rtype, p, _n, bo in lf.iter_records(buf):
        if rtype == lf.R_STR:
            out.append((p, struct.unpack_from(bo + "I", buf, p + 4)[0]))
    return out


def _file_heads(buf: bytes) -> list:
    return [p for rtype, p, _n, _bo in lf.iter_records(buf) if rtype == lf.R_FILE]


def test_random_flips_and_random_bytes(real_logs, tmp_path):
    rng = random.Random(SEED)
    h = Harness(tmp_path / "f.db")
    logs = list(real_logs.values())
    strings = [(b, _strings(b)) for b in logs]
    heads = [(b, _file_heads(b)) for b in logs if _file_heads(b)]
    for _ in range(MUTANTS):            # bytes anywhere
        b = bytearray(rng.choice(logs))
        for _ in range(rng.randint(1, 6)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        h.one(bytes(b))
    for _ in range(MUTANTS):            # a string's value garbled or cut (the log stays well framed)
        base, strs = rng.choice(strings)
        b = bytearray(base)
        p, n = rng.choice(strs)
        if rng.random() < 0.3:
            struct.pack_into("<I", b, p + 4, rng.randrange(n + 1))        # shorter: the rest is padding
        for _ in range(rng.randint(1, 4)):
            if n:
                b[p + 8 + rng.randrange(n)] = rng.choice(TEXT)
        h.one(bytes(b))
    for _ in range(MUTANTS):            # a FILE record's counter and bin counts, mask and wide
        base, ps = rng.choice(heads)
        b = bytearray(base)
        p = rng.choice(ps)
        k = rng.choice((12, 13, 16, 24))
        if k in (12, 13):
            b[p + k] = rng.choice((0, 1, 9, 10, 11, 28, 29, 30, 31, 64, 255, rng.randrange(256)))
        else:
            b[p + k + rng.randrange(8)] ^= 1 << rng.randrange(8)
        h.one(bytes(b))
    for k in range(MUTANTS):            # noise, and noise after a valid header
        h.one(os.urandom(rng.randrange(0, 200)) if k % 2 else
              logs[0][:32] + bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300))))
    assert h.n == 4 * MUTANTS
    assert h.warned >= MUTANTS and h.stored > MUTANTS


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
    bad = {n for n, b in damaged.items() if ingest_read.rows_from_bytes(b, n)[1] is not None}
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
    assert c.execute("PRAGMA foreign_key_check").fetchall() == []     # a replaced copy's rows went with it
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
    ref, err = ingest_read.rows_from_bytes(full, "v1")
    assert err is None and len(ref.files) == 10
    h = Harness(tmp_path / "f.db")
    for i in range(len(full)):
        rows, err = h.one(full[:i])
        assert err is not None and (rows is None or rows.files == ref.files[:len(rows.files)])
        h.one(full[:i] + full[i + 1:])
    rng = random.Random(SEED + 2)
    for _ in range(MUTANTS):
        b = bytearray(full)
        for _ in range(rng.randint(1, 6)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        h.one(bytes(b))
    assert h.n == 2 * len(full) + MUTANTS and h.stored > len(full)
