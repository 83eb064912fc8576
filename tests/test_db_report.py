"""mtcprof report (HTML page) and mtcprof export --format chrome, on a run traced by the real shim.

The run: stage mProjectPP (4 tasks) then mDiff (3 tasks), on two "hosts" (MTCPROF_HOST), two tasks at a time per
host, then mAdd (1 task: 8 threads doing I/O at once).  Two tasks are traced with MTCPROF_TRACE=ops: p0 (a shell
pipeline) and the mAdd task (threads, whose ops overlap in time)."""
import base64
import json
import os
import re
import struct
import subprocess
import sys

import pytest

from mtcio.db import ingest as ing
from mtcio.db import store
from mtcio.db.api import Store
from mtcio.preload.testing import env_for, log_paths, prog, read_log

MTCPROF = [sys.executable, "-c", "import sys; from mtcio.cli import mtcprof; sys.exit(mtcprof())"]
RUN = "demo"
HDR = 500
THREAD_OPS = 2000
IN_SIZES = [3000 + 150_000 * i for i in range(4)]


def _start(logs, task, stage, host, cmd, **extra):
    env = env_for(str(logs), MTCPROF_TASK=task, MTCPROF_STAGE=stage, MTCPROF_HOST=host, MTCPROF_RUN=RUN, **extra)
    return subprocess.Popen(["sh", "-c", cmd], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _wait(procs):
    for p in procs:
        _, err = p.communicate()
        assert p.returncode == 0, err


@pytest.fixture(scope="module")
def traced_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("run")
    d, logs = base / "data", base / "logs"
    d.mkdir(), logs.mkdir()
    (d / "hdr").write_bytes(b"H" * HDR)
    for i, n in enumerate(IN_SIZES):
        (d / f"in{i}").write_bytes(os.urandom(n))
    hosts = ["nodeA", "nodeB"]
    # stage 1: p_i reads hdr (N-1) and in_i (1-1), writes p_i; p0 is op-traced and has a pipeline
    procs = []
    for i in range(4):
        extra = {"MTCPROF_TRACE": "ops"} if i == 0 else {}
        cmd = f"cat {d}/hdr | wc -c > /dev/null; cat {d}/in{i} > {d}/p{i}; sleep 0.05"
        procs.append(_start(logs, f"p{i}", "mProjectPP", hosts[i % 2], cmd, **extra))
    _wait(procs)
    # stage 2: d_i reads hdr, p_i, p_{i+1}, writes d_i
    _wait([_start(logs, f"d{i}", "mDiff", hosts[i % 2], f"cat {d}/hdr {d}/p{i} {d}/p{i + 1} > {d}/d{i}; sleep 0.05")
           for i in range(3)])
    # stage 3: 8 threads x THREAD_OPS ops at once, op-traced
    (d / "thr").mkdir()
    _wait([_start(logs, "add", "mAdd", "nodeA", f"{prog('threads')} {d}/thr {THREAD_OPS}", MTCPROF_TRACE="ops")])
    db = base / "x.db"
    ing.ingest(str(db), str(logs), gfwhere_cmd=None, warn=lambda *a, **k: None)
    # an empty trace run and an envelope run in the same db, for the error paths
    conn = store.connect(str(db))
    store.get_or_create_run(conn, "empty", "trace")
    store.get_or_create_run(conn, "env1", "envelope")
    conn.commit()
    conn.close()
    n_ops = sum(len(read_log(p).ops) for p in log_paths(str(logs)))
    return {"db": db, "base": base, "n_ops": n_ops}


def cli(*args):
    return subprocess.run(MTCPROF + list(args), capture_output=True, text=True)


# ---- report ------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def page(traced_run):
    out = traced_run["base"] / "report"
    r = cli("report", "--db", str(traced_run["db"]), "--run", RUN, "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(out / "index.html")
    return out, (out / "index.html").read_text(encoding="utf-8")


def _stage_rows(html):
    table = re.search(r'<table class="stages">(.*?)</table>', html, re.S).group(1)
    rows = {}
    for tr in re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1], re.S):
        cells = [re.sub(r"<[^>]+>", " ", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
        rows[cells[0].strip()] = [" ".join(c.split()) for c in cells]
    return rows


def test_report_stage_table_exact_numbers(traced_run, page):
    _, html = page
    # expected from how the run was made, not from the API
    exp = {"mProjectPP": {"tasks": 4, "hosts": 2, "read": 4 * HDR + sum(IN_SIZES), "written": sum(IN_SIZES)},
           "mDiff": {"tasks": 3, "hosts": 2, "read": 3 * HDR + sum(IN_SIZES[i] + IN_SIZES[i + 1] for i in range(3)),
                     "written": sum(HDR + IN_SIZES[i] + IN_SIZES[i + 1] for i in range(3))},
           # threads: 4 x N pread(8 B); 4096 B initial write + 4 x N write(16 B) + 4 x N/4 fwrite(8 B)
           "mAdd": {"tasks": 1, "hosts": 1, "read": 4 * THREAD_OPS * 8,
                    "written": 4096 + 4 * THREAD_OPS * 16 + THREAD_OPS * 8}}
    rows = _stage_rows(html)
    assert list(rows) == ["mProjectPP", "mDiff", "mAdd"]          # in start order
    for stage, e in exp.items():
        cells = rows[stage]
        assert cells[1] == str(e["tasks"]) and cells[2] == str(e["hosts"]), cells     # tasks (N), hosts (C)
        assert f"{e['read']:,} B" in cells[5], cells
        assert f"{e['written']:,} B" in cells[6], cells
        assert cells[8].endswith(("s", "ms", "µs")) and cells[8] != "—"  # time in I/O with a unit
        if stage != "mAdd":
            assert "1-1" in cells[13] and "N-1" in cells[13] and "write" in cells[13]
    st = Store(traced_run["db"]).stages(RUN).set_index("stage")
    assert st.loc["mProjectPP", "bytes_read"] == exp["mProjectPP"]["read"]
    total_read = sum(e["read"] for e in exp.values())
    assert f"{total_read:,} B" in html                      # run total in the summary


def test_report_page_is_self_contained(page):
    out, html = page
    assert html.startswith("<!DOCTYPE html>")
    assert f"run <code>{RUN}</code>" in html and "report made 20" in html
    assert "<script" not in html.lower()
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', html)     # nothing loaded from the network
    assert "<style>" in html
    for s in ("Stages", "Read locality", "Per host", "Busiest files", "Access sizes", "Task timeline"):
        assert s in html
    assert "nodeA" in html and "nodeB" in html
    # busiest files: shown relative to their common folder, the full path as tooltip
    assert re.search(r'<td class="path" title="/[^"]*/data/in3">in3</td>', html)
    assert re.search(r"Paths are under <code>/[^<]*/data/</code>", html)
    assert "KiB" in html and "MiB" in html


def _png_size(png: bytes):
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert png[12:16] == b"IHDR"
    return struct.unpack(">II", png[16:24])


def test_report_embeds_pngs(page):
    out, html = page
    imgs = re.findall(r'<img alt="([^"]*)" src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(imgs) >= 2
    alts = [a for a, _ in imgs]
    assert any("timeline" in a for a in alts) and any("histogram" in a for a in alts)
    for alt, b64 in imgs:
        png = base64.b64decode(b64, validate=True)
        w, h = _png_size(png)
        assert 400 <= w <= 3000 and 100 <= h <= 3000, (alt, w, h)
        assert len(png) > 5000, alt
    tl = base64.b64decode(dict(imgs)[next(a for a in alts if "timeline" in a)])
    assert tl == (out / "timeline.png").read_bytes()                 # also written next to the page


def test_report_histogram_counts_match_store(traced_run, page):
    _, html = page
    h = Store(traced_run["db"]).histograms(RUN, by="stage")
    for stage in ("mProjectPP", "mDiff", "mAdd"):
        for kind in ("read", "write"):
            total = int(h[(h["stage"] == stage) & (h["kind"] == kind)]["count"].sum())
            assert total > 0
            assert re.search(rf"<td>{stage}</td><td>{kind}</td>.*?<td class=\"num\">{total:,}</td></tr>", html)


def test_report_empty_run(traced_run, tmp_path):
    r = cli("report", "--db", str(traced_run["db"]), "--run", "empty", "-o", str(tmp_path / "e"))
    assert r.returncode == 0, r.stderr
    html = (tmp_path / "e" / "index.html").read_text()
    assert "This run has no tasks" in html and "run <code>empty</code>" in html
    assert "<img" not in html


def test_report_bad_input(traced_run, tmp_path):
    db = str(traced_run["db"])
    r = cli("report", "--db", db, "--run", "nope", "-o", str(tmp_path / "x"))
    assert r.returncode == 2
    line, = r.stderr.strip().splitlines()
    assert "nope" in line and "demo" in line and "empty" in line
    assert not (tmp_path / "x").exists()
    r = cli("report", "--db", str(tmp_path / "missing.db"), "--run", RUN, "-o", str(tmp_path / "x"))
    assert r.returncode == 2 and "no such database" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "missing.db").exists()
    r = cli("report", "--db", db, "--run", "env1", "-o", str(tmp_path / "x"))
    assert r.returncode == 2 and "envelope" in r.stderr
    (tmp_path / "junk.db").write_bytes(b"not sqlite at all" * 100)
    r = cli("report", "--db", str(tmp_path / "junk.db"), "--run", RUN, "-o", str(tmp_path / "x"))
    assert r.returncode == 2 and "not an mtcio database" in r.stderr and "Traceback" not in r.stderr
    r = cli("report", "--db", db, "-o", str(tmp_path / "x"))        # --run missing
    assert r.returncode == 2


# ---- export ------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def trace(traced_run):
    out = traced_run["base"] / "trace.json"
    r = cli("export", "--db", str(traced_run["db"]), "--run", RUN, "--format", "chrome", "-o", str(out))
    assert r.returncode == 0, r.stderr
    with open(out) as f:
        return json.load(f)


def test_export_events(traced_run, trace):
    ev = trace["traceEvents"]
    assert trace["otherData"]["run"] == RUN
    x = [e for e in ev if e["ph"] == "X"]
    tasks = [e for e in x if e["cat"] == "task"]
    ops = [e for e in x if e["cat"] == "io"]
    assert traced_run["n_ops"] > 20
    assert len(tasks) == 8 and len(ops) == traced_run["n_ops"]          # one per task + one per traced op
    assert {e["ph"] for e in ev} == {"M", "X"}
    pnames = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    tnames = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert sorted(pnames.values()) == ["nodeA", "nodeB"]
    assert sorted(tnames[(e["pid"], e["tid"])] for e in tasks) == sorted(
        [f"p{i} [mProjectPP]" for i in range(4)] + [f"d{i} [mDiff]" for i in range(3)] + ["add [mAdd]"])
    for e in tasks:                                                   # task on its host's process
        assert pnames[e["pid"]] == e["args"]["host"]
        assert e["name"] == e["args"]["stage"]
    for e in x:
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert (e["pid"], e["tid"]) in tnames and e["pid"] in pnames
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0 and e["dur"] >= 0
    # ops are on their task's host and tracks: p0's and add's only
    p0 = next(e for e in tasks if e["args"]["task"] == "p0")
    p0_ops = [e for e in ops if tnames[(e["pid"], e["tid"])].startswith("p0 [mProjectPP]")]
    add_ops = [e for e in ops if tnames[(e["pid"], e["tid"])].startswith("add [mAdd]")]
    assert len(p0_ops) + len(add_ops) == len(ops) and p0_ops and len(add_ops) > 8 * THREAD_OPS
    assert {e["pid"] for e in p0_ops} == {p0["pid"]} and {pnames[e["pid"]] for e in add_ops} == {"nodeA"}
    assert {"open", "read", "write", "close"} <= {e["name"] for e in p0_ops}
    assert sum(e["name"] == "read" and e["args"]["path"].endswith("/shared") for e in add_ops) == 4 * THREAD_OPS
    reads = [e for e in ops if e["name"] == "read" and e["args"]["path"].endswith("/in0")]
    assert sum(e["args"]["length"] for e in reads) == IN_SIZES[0]


def test_export_tracks_monotone_and_nested(trace):
    """Per track: ts never decreases and complete events nest perfectly (what Perfetto requires of X events)."""
    by_track = {}
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            by_track.setdefault((e["pid"], e["tid"]), []).append(e)
    assert len(by_track) >= 8
    for track, evs in by_track.items():
        ts = [e["ts"] for e in evs]
        assert ts == sorted(ts), track
        stack = []
        for e in evs:
            s, end = round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)
            while stack and stack[-1] <= s:
                stack.pop()
            assert not stack or end <= stack[-1], (track, e)
            stack.append(end)
    # ops of one task that partly overlap (threads) cannot share a track: extra tracks of that task exist
    # exactly when some pair of its ops partly overlaps
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    add = sorted(((round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)) for k, evs in by_track.items()
                  for e in evs if names[k].startswith("add [mAdd]") and e["cat"] == "io"), key=lambda i: (i[0], -i[1]))
    partial, open_ends = False, []
    for s1, e1 in add:                      # laminar (every pair nested or disjoint) <=> one track suffices
        while open_ends and open_ends[-1] <= s1:
            open_ends.pop()
        if open_ends and open_ends[-1] < e1:
            partial = True
            break
        open_ends.append(e1)
    extra = [n for n in names.values() if n.startswith("add [mAdd] #")]
    assert bool(extra) == partial, (partial, extra)
    # the op events nested on p0's main track lie inside the p0 task slice
    ev = trace["traceEvents"]
    p0 = next(e for e in ev if e["ph"] == "X" and e["cat"] == "task" and e["args"]["task"] == "p0")
    inside = [e for e in by_track[(p0["pid"], p0["tid"])] if e["cat"] == "io"]
    assert inside
    assert all(p0["ts"] <= e["ts"] and e["ts"] + e["dur"] <= p0["ts"] + p0["dur"] + 1e-3 for e in inside)


def test_export_no_ops_and_errors(traced_run, tmp_path):
    db = str(traced_run["db"])
    r = cli("export", "--db", db, "--run", RUN, "--no-ops", "-o", "-")
    assert r.returncode == 0, r.stderr
    t = json.loads(r.stdout)
    assert [e["cat"] for e in t["traceEvents"] if e["ph"] == "X"] == ["task"] * 8
    r = cli("export", "--db", db, "--run", "nope", "-o", str(tmp_path / "t.json"))
    assert r.returncode == 2 and "demo" in r.stderr and not (tmp_path / "t.json").exists()
    r = cli("export", "--db", str(tmp_path / "none.db"), "--run", RUN, "-o", str(tmp_path / "t.json"))
    assert r.returncode == 2 and "no such database" in r.stderr
    r = cli("export", "--db", db, "--run", RUN, "--format", "otf2", "-o", str(tmp_path / "t.json"))
    assert r.returncode == 2
    r = cli("export", "--db", db, "--run", "empty", "-o", str(tmp_path / "e.json"))
    assert r.returncode == 0
    assert json.loads((tmp_path / "e.json").read_text())["traceEvents"] == []


def test_place_lanes():
    """Track placement: nested and disjoint intervals share a lane, a partial overlap goes to the next lane."""
    from mtcio.db.export_chrome import place
    lanes = [(1, [100])]                    # a task slice [0, 100] open on lane 0
    assert place(lanes, 10, 50) == 0        # inside the task
    assert place(lanes, 20, 30) == 0        # inside [10, 50]
    assert place(lanes, 40, 60) == 1        # [20, 30] is over; starts in [10, 50] and ends after it: no lane fits
    lanes.append((2, [60]))
    assert place(lanes, 50, 55) == 0        # [10, 50] is over: nests in the task again
    assert place(lanes, 55, 55) == 0        # zero-length, right after [50, 55]
    assert place(lanes, 58, 70) == 0        # after [55, 55], inside the task
    assert place(lanes, 59, 120) == 2       # partial with [58, 70] on lane 0 and with [40, 60] on lane 1
    lanes.append((3, [120]))
    assert place(lanes, 100, 130) == 0      # the task slice ended at 100: top level of lane 0 again
    assert [st for _, st in lanes] == [[130], [60], [120]]
