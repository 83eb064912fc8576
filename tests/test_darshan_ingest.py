"""`mtcprof ingest --from darshan`: the example logs PyDarshan's wheel ships go into the same tables as shim logs,
with per-file bytes and op counts equal to PyDarshan's own counters and DXT segments as ops; damaged logs give one
warning each and the rest of the run is ingested; task and stage from the plugin's mtcprof-task.env, the log
folder or the executable; without PyDarshan one line naming mtcio[darshan], exit 2."""
import glob
import hashlib
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections import Counter

import darshan
import numpy as np
import pytest

from mtcio.db import darshan_log
from mtcio.db import ingest as ing
from mtcio.db import ingest_writer
from mtcio.db.api import Store

MTCPROF = [sys.executable, "-c", "import sys; from mtcio.cli import mtcprof; sys.exit(mtcprof())"]
PKG = os.path.dirname(darshan.__file__)


def example_logs() -> list[str]:
    """Every Darshan log in the installed PyDarshan package, one per content (the wheel ships some twice)."""
    seen, out = set(), []
    for p in sorted(glob.glob(os.path.join(PKG, "**", "*.darshan"), recursive=True)):
        with open(p, "rb") as f:
            h = hashlib.sha256(f.read()).hexdigest()
        if h not in seen:
            seen.add(h)
            out.append(p)
    return out


def report_of(path):
    r = darshan.DarshanReport(path, read_all=False)
    return r, [m for m in ("POSIX", "STDIO") if m in r.modules]


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
    """The example logs with POSIX or STDIO records, each in its own folder, ingested as one run."""
    root = tmp_path_factory.mktemp("darshan-examples")
    logs = {}
    for i, p in enumerate(example_logs()):
        if report_of(p)[1]:
            d = root / "logs" / f"e{i}"
            d.mkdir(parents=True)
            logs[p] = str(d / os.path.basename(p))
            shutil.copy(p, logs[p])
    db = root / "x.db"
    warnings = []
    res = ing.ingest(str(db), str(root / "logs"), run="ex", gfwhere_cmd=None, warn=warnings.append,
                     source="darshan")
    return {"db": db, "logs": logs, "res": res, "warnings": warnings}


def test_wheel_ships_posix_stdio_and_dxt_examples():
    """The examples the tests below rely on are there: a dozen distinct logs, POSIX, STDIO and DXT among them."""
    logs = example_logs()
    mods = Counter(m for p in logs for m in darshan.DarshanReport(p, read_all=False).modules)
    assert len(logs) >= 12 and mods["POSIX"] >= 10 and mods["STDIO"] >= 8 and mods["DXT_POSIX"] >= 3, mods


def test_every_example_with_posix_or_stdio_ingests(examples):
    """One process per log, complete, no warning; each is its own task with the executable as stage."""
    res, logs = examples["res"], examples["logs"]
    assert examples["warnings"] == [] and res.bad_logs == 0
    assert res.runs["ex"]["logs_added"] == len(logs) == res.runs["ex"]["tasks"]
    assert res.runs["ex"]["task_sources"] == {"log folder": len(logs)}
    s = Store(examples["db"])
    procs = s.processes("ex")
    assert sorted(procs["log_path"]) == sorted(logs.values())
    assert procs["log_complete"].eq(1).all()
    assert all(v.startswith("darshan ") for v in procs["shim_version"])


def _expected(path) -> dict:
    """PyDarshan's own counters per file path, summed over ranks and modules (a negative value: not tracked)."""
    r, mods = report_of(path)
    out = {}
    for m in mods:
        r.mod_read_all_records(m)
        c = r.records[m].to_df()["counters"]
        sums = c.drop(columns=["rank"]).set_index("id").clip(lower=0).groupby(level=0).sum()
        for rid, g in sums.to_dict("index").items():
            e = out.setdefault(r.name_records[rid], Counter())
            col = lambda n: int(g.get(f"{m}_{n}", 0))   # noqa: E731
            e["bytes_read"] += col("BYTES_READ")
            e["bytes_written"] += col("BYTES_WRITTEN")
            e["reads"] += col("READS")
            e["writes"] += col("WRITES")
            e["opens"] += col("OPENS") + col("FDOPENS")
            e["seeks"] += col("SEEKS")
            e["stats"] += col("STATS")
            if m == "POSIX":
                for k, b in enumerate(darshan_log._BINS):
                    e[f"hr{k}"] += col(f"SIZE_READ_{b}")
                    e[f"hw{k}"] += col(f"SIZE_WRITE_{b}")
    return out


COMPARED = ("bytes_read", "bytes_written", "reads", "writes", "opens", "seeks", "stats") + \
    tuple(f"hr{k}" for k in range(10)) + tuple(f"hw{k}" for k in range(10))


def test_per_file_bytes_and_ops_equal_pydarshans_counters(examples):
    con = sqlite3.connect(examples["db"])
    n_files = 0
    for src, copy in examples["logs"].items():
        want = _expected(src)
        rows = con.execute(
            f"SELECT f.path, {', '.join('fa.' + c for c in COMPARED)} FROM file_access fa JOIN files f ON "
            f"f.id = fa.file_id JOIN processes p ON p.id = fa.process_id WHERE p.log_path = ?", (copy,)).fetchall()
        got = {r[0]: Counter({c: v for c, v in zip(COMPARED, r[1:]) if v}) for r in rows}
        want = {k: Counter({c: v for c, v in e.items() if v}) for k, e in want.items()}
        assert got == want, os.path.basename(src)
        n_files += len(got)
    assert n_files > 1000          # sample-badost alone has its 2,048 ranks' files


def test_dxt_segments_become_ops_with_the_same_offsets_and_lengths(examples):
    s = Store(examples["db"])
    ops = s.ops("ex")
    procs = s.processes("ex").set_index("log_path")
    n_dxt = 0
    for src, copy in examples["logs"].items():
        r = darshan.DarshanReport(src, read_all=False)
        if "DXT_POSIX" not in r.modules:
            continue
        r.mod_read_all_dxt_records("DXT_POSIX")
        want = Counter()
        for rec in r.records["DXT_POSIX"]:
            name = r.name_records[rec["id"]]
            want.update((name, "read", s_["offset"], s_["length"]) for s_ in rec["read_segments"])
            want.update((name, "write", s_["offset"], s_["length"]) for s_ in rec["write_segments"])
        mine = ops[ops["process_id"] == procs.loc[copy, "id"]]
        got = Counter(zip(mine["path"], mine["op"].astype(str), mine["offset"].tolist(), mine["length"].tolist()))
        assert got == want and len(want) > 0, os.path.basename(src)
        assert int(procs.loc[copy, "ops_traced"]) == sum(want.values())
        n_dxt += 1
    assert n_dxt >= 3


def test_model_and_report_read_a_darshan_run(examples, tmp_path):
    """The same tables: `mtcprof model` and `report` work on the run unchanged; the report names the gaps."""
    db = str(examples["db"])
    r = subprocess.run(MTCPROF + ["model", "--db", db, "--run", "ex", "-o", str(tmp_path / "m.yaml")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    from mtcio.db import workflow_model
    wf = workflow_model.load(str(tmp_path / "m.yaml"))
    assert sum(st.tasks for st in wf.stages) == len(examples["logs"])
    r = subprocess.run(MTCPROF + ["report", "--db", db, "--run", "ex", "-o", str(tmp_path / "rep")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    html = (tmp_path / "rep" / "index.html").read_text()
    n = len(examples["logs"])
    assert f"an image replaced by exec leaves no log ({n} of {n} processes)" in html
    gaps = Store(examples["db"]).capture_gaps("ex")
    assert (gaps["kind"] == "not_wrapped").sum() == n


def _run_folder(tmp_path, names):
    """A run folder with copies of example logs by basename."""
    by_name = {os.path.basename(p): p for p in example_logs()}
    d = tmp_path / "run"
    d.mkdir(parents=True)
    for n in names:
        shutil.copy(by_name[n], d / n)
    return d


def test_truncated_and_corrupt_logs_warn_once_each_and_the_others_are_ingested(tmp_path):
    d = _run_folder(tmp_path, ["example.darshan", "sample-goodost.darshan"])
    data = open(os.path.join(PKG, "examples", "example_logs", "dxt.darshan"), "rb").read()
    (d / "cut-header.darshan").write_bytes(data[:100])              # darshan-util cannot open it
    (d / "cut-dxt.darshan").write_bytes(data[:50_000])              # POSIX and STDIO whole, DXT cut
    flipped = bytearray(open(os.path.join(PKG, "tests", "input", "sample-dxt-simple.darshan"), "rb").read())
    flipped[3000:3064] = bytes(b ^ 0x5A for b in flipped[3000:3064])  # inside its POSIX region
    (d / "flipped.darshan").write_bytes(bytes(flipped))
    (d / "random.darshan").write_bytes(np.random.default_rng(7).bytes(4096))
    db = tmp_path / "x.db"
    r = subprocess.run(MTCPROF + ["ingest", "--from", "darshan", str(d), "--db", str(db), "--run", "r",
                                  "--gfwhere-cmd", "none"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    warns = [ln for ln in r.stderr.splitlines() if ": warning: " in ln]
    bad = ["cut-header", "cut-dxt", "flipped", "random"]
    assert len(warns) == len(bad) and all(sum(f"{b}.darshan" in w for w in warns) == 1 for b in bad), warns
    assert "4 truncated or corrupt logs" in r.stderr
    con = sqlite3.connect(db)
    stored = dict(con.execute("SELECT log_path, log_complete FROM processes"))
    assert stored == {str(d / "example.darshan"): 1, str(d / "sample-goodost.darshan"): 1,
                      str(d / "cut-dxt.darshan"): 0, str(d / "flipped.darshan"): 0}
    # the cut log's POSIX and STDIO counters are whole (equal to the complete log's), its DXT is not kept
    cut = _expected(os.path.join(PKG, "examples", "example_logs", "dxt.darshan"))
    rows = con.execute("SELECT f.path, fa.bytes_read, fa.bytes_written FROM file_access fa JOIN files f ON "
                       "f.id = fa.file_id JOIN processes p ON p.id = fa.process_id WHERE p.log_path = ?",
                       (str(d / "cut-dxt.darshan"),)).fetchall()
    assert {p: (br, bw) for p, br, bw in rows} == {p: (e["bytes_read"], e["bytes_written"]) for p, e in cut.items()}
    assert con.execute("SELECT count(*) FROM ingest_warnings").fetchone()[0] == 4
    # the two good logs are as they are alone
    alone = tmp_path / "alone.db"
    ing.ingest(str(alone), str(_run_folder(tmp_path / "b", ["example.darshan", "sample-goodost.darshan"])),
               run="r", gfwhere_cmd=None, warn=lambda m: None, source="darshan")
    q = ("SELECT sum(fa.bytes_read), sum(fa.bytes_written), count(*) FROM file_access fa JOIN processes p ON "
         "p.id = fa.process_id WHERE p.log_path LIKE '%example.darshan' OR p.log_path LIKE '%goodost.darshan'")
    assert con.execute(q).fetchone() == sqlite3.connect(alone).execute(q).fetchone()


def test_a_worker_killed_mid_log_costs_that_log_only(tmp_path):
    d = _run_folder(tmp_path, ["example.darshan", "sample-goodost.darshan", "noposixopens.darshan"])
    with darshan_log.Reader() as rd:
        rows, w = rd.read(str(d / "example.darshan"), str(d))
        assert rows is not None and w is None
        os.kill(rd.proc.pid, signal.SIGKILL)
        rd.proc.wait()
        rows, w = rd.read(str(d / "noposixopens.darshan"), str(d))
        assert rows is None and w[0] == f"{d / 'noposixopens.darshan'}: damaged Darshan log: darshan-util killed " \
                                        f"by signal 9; skipped"
        rows, w = rd.read(str(d / "sample-goodost.darshan"), str(d))
        assert rows is not None and w is None and rows.complete


def test_task_and_stage_from_plugin_record_folder_or_executable(tmp_path):
    src = {os.path.basename(p): p for p in example_logs()}
    logs = tmp_path / "logs"
    # the plugin's layout: a folder per command with mtcprof-task.env, Darshan's year/month/day under it
    c1 = logs / "darshan" / "mProject-1" / "c1"
    (c1 / "2026" / "5" / "17").mkdir(parents=True)
    (c1 / "mtcprof-task.env").write_bytes(b"MTCPROF_TASK=p/a b.fits\0MTCPROF_STAGE=mProject\0MTCPROF_RUN=wf1\0"
                                          b"MTCPROF_HOST=node7\0")
    shutil.copy(src["sample-goodost.darshan"], c1 / "2026" / "5" / "17")
    # a site's own layout: LOGS/<stage>/<task>/
    (logs / "gather" / "t9").mkdir(parents=True)
    shutil.copy(src["example.darshan"], logs / "gather" / "t9")
    shutil.copy(src["noposixopens.darshan"], logs)                   # neither: the executable names the stage
    db = tmp_path / "x.db"
    r = subprocess.run(MTCPROF + ["ingest", "--from", "darshan", str(logs), "--db", str(db), "--gfwhere-cmd",
                                  "none"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # the plugin's record names its run (wf1); the others take the folder's name
    assert "run wf1: task and stage from plugin record (1 logs)" in r.stderr
    assert "run logs: task and stage from executable name (1 logs), log folder (1 logs)" in r.stderr
    con = sqlite3.connect(db)
    got = con.execute("SELECT r.name, t.name, t.stage, h.name FROM tasks t JOIN runs r ON r.id = t.run_id "
                      "JOIN hosts h ON h.id = t.host_id ORDER BY t.stage").fetchall()
    rows = {g[2]: g for g in got}
    assert len(got) == 3
    assert rows["mProject"] == ("wf1", "p/a b.fits", "mProject", "node7")
    assert rows["gather"] == ("logs", "gather/t9", "gather", darshan_log.UNKNOWN_HOST)
    assert rows["1116507695"][0] == "logs" and rows["1116507695"][1].startswith("pid2568372269@")
    assert rows["1116507695"][3] == darshan_log.UNKNOWN_HOST
    gaps = dict(con.execute("SELECT p.log_path, count(*) FROM capture_gaps g JOIN processes p ON p.id = "
                            "g.process_id WHERE g.kind = 'host_unknown' GROUP BY p.log_path"))
    assert sorted(os.path.basename(p) for p in gaps) == ["example.darshan", "noposixopens.darshan"]


def test_without_pydarshan_one_line_naming_the_extra_exit_2(tmp_path):
    d = _run_folder(tmp_path, ["example.darshan"])
    block = ("import sys; sys.modules['darshan'] = None; from mtcio.cli import mtcprof; "
             f"sys.exit(mtcprof(['ingest', '--from', 'darshan', {str(d)!r}, '--db', {str(tmp_path / 'x.db')!r}]))")
    r = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.splitlines() == ["mtcprof ingest: reading Darshan logs needs PyDarshan: "
                                     "pip install 'mtcio[darshan]'"]
    assert not (tmp_path / "x.db").exists()


def test_small_batches_store_the_same_gaps_and_count_each_log_once(examples, tmp_path, monkeypatch):
    """The batched writer's other path for Darshan rows: a batch breaking the process key (a log given twice)
    redone log by log keeps every capture gap once and counts each log's task source once."""
    logs = tmp_path / "logs"
    shutil.copytree(os.path.dirname(os.path.dirname(next(iter(examples["logs"].values())))), logs)
    first = sorted(examples["logs"].values())[0]
    (logs / "again").mkdir()
    shutil.copy(first, logs / "again" / os.path.basename(first))
    monkeypatch.setattr(ingest_writer, "BATCH", 2)
    db = tmp_path / "small.db"
    res = ing.ingest(str(db), str(logs), run="ex", gfwhere_cmd=None, warn=lambda m: None, source="darshan")
    n = len(examples["logs"])
    assert (res.runs["ex"]["logs_added"], res.runs["ex"]["logs_skipped"]) == (n, 1)
    assert res.runs["ex"]["task_sources"] == {"log folder": n}      # the copy skipped as stored is not counted
    gaps = "SELECT p.log_path, g.fid, g.kind, g.detail FROM capture_gaps g JOIN processes p ON p.id = g.process_id"
    big = sqlite3.connect(examples["db"])
    want = Counter((os.path.basename(r[0]),) + r[1:] for r in big.execute(gaps))
    big.close()
    con = sqlite3.connect(db)
    assert Counter((os.path.basename(r[0]),) + r[1:] for r in con.execute(gaps)) == want
    assert con.execute("SELECT count(*) FROM capture_gaps").fetchone()[0] == sum(want.values()) > n
    con.close()
