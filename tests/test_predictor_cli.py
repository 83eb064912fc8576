"""mtcpredict as a user meets it: the shipped envelope and Montage model, JSON, the report, what-if, bad input."""
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys

import pytest
import yaml

from mtcio import __version__

from helpers.cli import MONTAGE, predict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STAGES = ["mProjectPP", "mDiff", "mBackground", "mAdd"]


def test_montage_with_the_shipped_envelope_table():
    r = predict(MONTAGE)
    assert r.returncode == 0, r.stderr
    assert "using the envelope shipped with mtcio" in r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "envelope: testbed4 (shipped)"
    rows = [ln.split() for ln in lines[3:-1]]
    assert [(x[0], x[1]) for x in rows] == [(s, v) for s in STAGES for v in ("faithful", "refined")]
    assert [x[2] for x in rows] == ["955", "955", "2770", "2770", "955", "955", "1", "1"]
    # the interval says what it holds: the envelope's spread, not the runs' or the model's
    assert lines[-1].startswith("90% interval (faithful, refined): the envelope's own spread (its repeats "
                                "resampled); not the workflow's")
    assert "Traceback" not in r.stderr
    plain = predict(MONTAGE, "--bootstrap", "0").stdout.splitlines()
    assert len(plain) == len(lines) - 1 and not any(ln.startswith("90% interval") for ln in plain)


def test_json_and_report(tmp_path):
    out = tmp_path / "rep"
    r = predict(MONTAGE, "--json", "--out", out, "--what-if", "hosts=4,8", "alpha=0.5,1")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    preds = res["predictions"]
    assert len(preds) == 8
    for d in preds:
        assert d["total_s"] == pytest.approx(d["read_s"] + d["write_s"] + d["meta_s"])
        assert d["interval"][0] <= d["total_s"] <= d["interval"][1]
        assert sum(d["shares"].values()) == pytest.approx(1.0)
        assert d["lookups"] and all(lk["source"] in ("measured", "interpolated", "clamped", "extrapolated")
                                    for lk in d["lookups"].values())
    f = next(d for d in preds if d["stage"] == "mProjectPP" and d["variant"] == "faithful")
    assert (f["N"], f["C"], f["rounds"], f["alpha"]) == (955, 8, 120, 0.94)
    assert f["write_bound"] in ("bandwidth (1)", "throughput (2)")
    assert len(res["what_if"]) == 2 * 2 * len(STAGES)
    assert {w["what_if"] for w in res["what_if"]} == {"hosts=4 alpha=0.5", "hosts=4 alpha=1", "hosts=8 alpha=0.5",
                                                      "hosts=8 alpha=1"}
    names = sorted(os.listdir(out))
    assert names == ["dominant.png", "envelope.png", "maps.png", "prediction.json", "report.html", "stage_time.png",
                     "whatif.png"]
    for n in names:
        assert stat.S_IMODE(os.stat(out / n).st_mode) == 0o600, n
    page = (out / "report.html").read_text()
    for s in STAGES:
        assert f"<td class=l>{s}</td>" in page
    assert page.count("data:image/png;base64,") == 5
    assert ("90% interval (faithful, refined): the envelope&#x27;s own spread (its repeats resampled); not the "
            "workflow") in page
    assert json.loads((out / "prediction.json").read_text())["predictions"] == preds


def test_report_renders_in_chromium(tmp_path):
    chromium = shutil.which("chromium")
    if not chromium:
        pytest.skip("chromium is not installed (make setup installs it)")
    out = tmp_path / "rep"
    assert predict(MONTAGE, "--out", out, "--bootstrap", "0").returncode == 0
    # a copy of the page with a probe: each image's decoded width once the page has loaded
    probe = ("<script>window.onload = () => { document.body.setAttribute('data-probe', "
             "[...document.images].map(i => i.complete ? i.naturalWidth : -1).join(',')); };</script>")
    check = out / "check.html"
    check.write_text((out / "report.html").read_text() + probe)
    r = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=10000", "--dump-dom",
                        check.as_uri()], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "mtcpredict: predicted I/O time per stage" in r.stdout
    widths = [int(w) for w in r.stdout.split('data-probe="')[1].split('"')[0].split(",")]
    assert len(widths) == 4 and min(widths) > 300, widths


def _write(path, doc):
    path.write_text(yaml.safe_dump(doc) if not isinstance(doc, str) else doc)
    return path


def _montage_doc():
    return yaml.safe_load(open(MONTAGE))


@pytest.mark.parametrize("change, message", [
    (lambda d: d["stages"][0]["read"].__setitem__("alpha", 1.5), "stages[0].read.alpha: must be <= 1"),
    (lambda d: d["stages"][0].__setitem__("hosts", 0), "stages[0].hosts: must be >= 1"),
    (lambda d: d["stages"][0]["write"]["bytes_per_task"].__setitem__("min", -5), "stages[0].write.bytes_per_task.min"),
    (lambda d: d.__setitem__("stages", []), "stages: must be a non-empty list"),
])
def test_impossible_values_one_line_exit_2_nothing_written(tmp_path, change, message):
    doc = _montage_doc()
    change(doc)
    wf = _write(tmp_path / "wf.yaml", doc)
    out = tmp_path / "out"
    r = predict(wf, "--out", out)
    assert r.returncode == 2
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stdout == "" and not out.exists()


def test_malformed_yaml_names_the_line(tmp_path):
    wf = _write(tmp_path / "bad.yaml", "mtcio_workflow: 1\nstages:\n  - name: a\n    tasks: [1, 2\n")
    r = predict(wf)
    assert r.returncode == 2 and "bad.yaml" in r.stderr and "line" in r.stderr and "Traceback" not in r.stderr


def _envelope_db(tmp_path, metrics):
    """A db with one envelope run (through `mtcenvelope import` of an export file)."""
    env = _shipped_envelope()
    env["points"] = [p for p in env["points"] if p["metric"] in metrics]
    env["run"] = "site"
    f = _write(tmp_path / "env.yaml", env)
    db = tmp_path / "env.db"
    r = subprocess.run([sys.executable, "-c", "import sys; from mtcio.cli import mtcenvelope; sys.exit(mtcenvelope())",
                        "import", str(f), "--db", str(db), "--name", "site"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return f, db


def test_envelope_sources_and_errors(tmp_path):
    f, db = _envelope_db(tmp_path, {"Tm", "TL", "BL", "T1L", "B1L", "T1R", "B1R", "TN", "BN"})
    by_file = json.loads(predict(MONTAGE, "--envelope", f, "--json", "--bootstrap", "0").stdout)
    by_db = predict(MONTAGE, "--envelope", f"{db}:site", "--json", "--bootstrap", "0")
    assert by_db.returncode == 0, by_db.stderr
    by_db = json.loads(by_db.stdout)
    assert [d["total_s"] for d in by_db["predictions"]] == pytest.approx([d["total_s"] for d in
                                                                          by_file["predictions"]], rel=1e-9)
    r = predict(MONTAGE, "--envelope", f"{db}:nope")
    assert r.returncode == 2 and "no envelope run 'nope'" in r.stderr and "site" in r.stderr
    r = predict(MONTAGE, "--envelope", tmp_path / "missing.yaml")
    assert r.returncode == 2 and "no such file" in r.stderr
    (tmp_path / "junk.yaml").write_text("just: text\n")
    r = predict(MONTAGE, "--envelope", tmp_path / "junk.yaml")
    assert r.returncode == 2 and "not an mtcio envelope export" in r.stderr


def _shipped_envelope():
    return yaml.safe_load(open(os.path.join(ROOT, "predictor", "data", "envelope-testbed4.yaml")))


def _envelope_twin(path, meta, writes_slower):
    """The shipped envelope with `meta` added and its writes (TL, BL) `writes_slower` times slower, at path."""
    env = _shipped_envelope()
    env["meta"] = {**(env.get("meta") or {}), **meta}
    for p in env["points"]:
        if p["metric"] in ("TL", "BL") and p.get("value"):
            p["value"] /= writes_slower
    return _write(path, env)


def test_second_envelope_at_the_stage_call_size(tmp_path):
    """An envelope measured with 8 KiB calls (writes 4x slower here) serves Montage's 8 KiB writes (cfitsio's
    2,880-byte blocks through a stdio buffer)."""
    big = _write(tmp_path / "big.yaml", _shipped_envelope())
    small = _envelope_twin(tmp_path / "small.yaml", {"block": 8192}, writes_slower=4)

    def stage(*args):
        r = predict(MONTAGE, *args, "--json", "--bootstrap", "0", "--variant", "refined")
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        return doc, next(d for d in doc["predictions"] if d["stage"] == "mProjectPP")
    _, one = stage("--envelope", big)
    doc, two = stage("--envelope", big, "--envelope", small)
    assert two["write_s"] == pytest.approx(4 * one["write_s"], rel=1e-6)
    assert two["read_s"] == pytest.approx(one["read_s"], rel=1e-9)
    assert doc["envelope"]["origin"] == f"{big}+{small}"
    assert any(n.startswith("TL@") and n.endswith("calls=8KiB") for n in two["lookups"]), two["lookups"]
    _, off = stage("--envelope", big, "--envelope", small, "--refine=-call_size")
    assert off["write_s"] == pytest.approx(one["write_s"], rel=1e-9)
    r = predict(MONTAGE, "--envelope", big, "--envelope", big)
    assert r.returncode == 2 and r.stderr == f"mtcpredict: envelope {big} given twice\n", r.stderr
    again = _write(tmp_path / "again.yaml", _shipped_envelope())
    r = predict(MONTAGE, "--envelope", big, "--envelope", again)
    assert r.returncode == 2 and "were both measured with 1,048,576-byte calls, cold reads" in r.stderr, r.stderr


def test_an_envelope_beside_computing_processes_blends_by_cpu_load(tmp_path):
    """An envelope measured with --hogs-per-host 1 (writes 2x slower here), given first: the idle one stays the main
    one, and a stage whose I/O ran beside 0.5 computing tasks per host pays half way; alone it is refused."""
    idle = _write(tmp_path / "idle.yaml", _shipped_envelope())
    loaded = _envelope_twin(tmp_path / "loaded.yaml", {"hogs_per_host": 1}, writes_slower=2)
    doc = _montage_doc()
    doc["stages"][0]["cpu_load"] = 0.5
    wf = _write(tmp_path / "wf.yaml", doc)

    def stages(*args):
        r = predict(wf, *args, "--json", "--bootstrap", "0", "--variant", "refined")
        assert r.returncode == 0, r.stderr
        return {d["stage"]: d for d in json.loads(r.stdout)["predictions"]}
    one = stages("--envelope", idle)
    two = stages("--envelope", loaded, "--envelope", idle)
    first, other = doc["stages"][0]["name"], doc["stages"][1]["name"]
    assert two[first]["write_s"] == pytest.approx(1.5 * one[first]["write_s"], rel=1e-6)
    assert two[first]["read_s"] == pytest.approx(one[first]["read_s"], rel=1e-9)
    assert two[other]["total_s"] == pytest.approx(one[other]["total_s"], rel=1e-9)    # cpu_load unset
    assert any("CPU load: 0.5 tasks per host" in n for n in two[first]["notes"])
    r = predict(wf, "--envelope", loaded)
    assert r.returncode == 2 and "every envelope given was measured beside computing processes" in r.stderr


@pytest.mark.parametrize("meta, said", [
    ({"call_gap_us": 200}, "was measured with calls 200 us apart (mtcenvelope --call-gap-us)"),
    ({"young": True}, "was measured of young reads (mtcenvelope --young)")])
def test_an_envelope_of_calls_apart_or_young_reads_is_ignored(tmp_path, meta, said):
    """The ablation removed call_gap and young_reads (docs/experiments/ablation.md): an envelope of calls apart or
    of young reads (writes 2x slower here), given first beside an idle one, is ignored with one line saying so, and
    every stage is predicted as from the idle one alone; alone it is refused."""
    idle = _write(tmp_path / "idle.yaml", _shipped_envelope())
    other = _envelope_twin(tmp_path / "other.yaml", meta, writes_slower=2)
    doc = _montage_doc()
    doc["stages"][0]["compute_per_call_us"] = 1000
    wf = _write(tmp_path / "wf.yaml", doc)

    def run(*args):
        r = predict(wf, *args, "--json", "--bootstrap", "0", "--variant", "refined")
        assert r.returncode == 0, r.stderr
        return r, json.loads(r.stdout)
    r1, one = run("--envelope", idle)
    r2, two = run("--envelope", other, "--envelope", idle)
    line = (f"mtcpredict: envelope {other} {said}: no refinement uses such an envelope since the ablation "
            "(docs/experiments/ablation.md); ignored\n")
    assert r2.stderr == r1.stderr + line, r2.stderr
    assert two["envelope"]["origin"] == one["envelope"]["origin"] == str(idle)
    assert [d["total_s"] for d in two["predictions"]] == [d["total_s"] for d in one["predictions"]]
    assert [sorted(d["lookups"]) for d in two["predictions"]] == [sorted(d["lookups"]) for d in one["predictions"]]
    r = predict(MONTAGE, "--envelope", other)
    assert r.returncode == 2 and "computing between calls (--call-gap-us) or of young reads (--young): give one of " \
        "idle hosts" in r.stderr


def test_an_envelope_of_reads_after_idling_is_refused(tmp_path):
    idle = _envelope_twin(tmp_path / "idle.yaml", {"idle_ms": 80}, writes_slower=1)
    r = predict(MONTAGE, "--envelope", _write(tmp_path / "e.yaml", _shipped_envelope()), "--envelope", idle)
    assert r.returncode == 2
    assert f"envelope {idle} was measured after 80 ms idle before each read (mtcenvelope --idle-ms)" in r.stderr, \
        r.stderr


def test_envelope_lacking_a_metric_is_named(tmp_path):
    f, _ = _envelope_db(tmp_path, {"Tm", "TL", "BL", "T1L", "B1L", "T1R", "B1R"})
    r = predict(MONTAGE, "--envelope", f)
    assert r.returncode == 2
    assert "stage mProjectPP: the envelope has no ok point of BN, TN" in r.stderr, r.stderr


@pytest.mark.parametrize("args, message", [
    (["--what-if", "hosts=0"], "--what-if hosts: bad value '0' (hosts takes a whole number >= 1)"),
    (["--what-if", "speed=2"], "expected KEY=V1,V2"),
    (["--what-if", "alpha=1.2"], "--what-if alpha: bad value '1.2' (alpha takes a number from 0 to 1)"),
    (["--refine", "faster"], "unknown refinement 'faster'"),
    (["--calibrate"], "--calibrate needs --validate"),
    (["--validate", "/nonexistent.db:run"], "no such db file"),
])
def test_bad_options(args, message):
    r = predict(MONTAGE, *args)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_validate_names_missing_run(tmp_path):
    db = tmp_path / "t.db"
    sqlite3.connect(db).close()
    from mtcio.db import store
    store.connect(str(db)).close()
    r = predict(MONTAGE, "--validate", f"{db}:montage1")
    assert r.returncode == 2 and "no trace run 'montage1'" in r.stderr, r.stderr


def test_help_and_version():
    r = predict("--help")
    assert r.returncode == 0 and "exit codes:\n  0    ok\n" in r.stdout and "faithful" in r.stdout
    r = predict("--version")
    assert r.returncode == 0 and r.stdout == f"mtcpredict (mtcio) {__version__}\n"


def test_stage_names_are_text_in_the_report(tmp_path):
    doc = _montage_doc()
    doc["stages"][0]["name"] = "$\\foo$ <b>x</b>"
    out = tmp_path / "rep"
    r = predict(_write(tmp_path / "wf.yaml", doc), "--out", out, "--bootstrap", "0")
    assert r.returncode == 0, r.stderr
    page = (out / "report.html").read_text()
    assert "<td class=l>$\\foo$ &lt;b&gt;x&lt;/b&gt;</td>" in page and "<b>x</b>" not in page


def test_the_report_shows_the_traced_conditions_of_each_stage(tmp_path):
    """The model's traced conditions (here the machine's busy share and I/O concurrency of one stage) in a table of
    their own; a column no stage has is left out."""
    doc = _montage_doc()
    for st in doc["stages"]:
        for f in ("machine_busy", "io_concurrency", "io_concurrency_served", "cpu_load", "compute_per_call_us",
                  "idle_before_ms", "cpu_wait"):
            st.pop(f, None)
    doc["stages"][0].update(machine_busy=0.53, io_concurrency=1.5, io_concurrency_served=1.25)
    doc["stages"][1].update(cpu_wait=0.125)
    out = tmp_path / "rep"
    r = predict(_write(tmp_path / "wf.yaml", doc), "--out", out, "--bootstrap", "0")
    assert r.returncode == 0, r.stderr
    page = (out / "report.html").read_text()
    table = page.split("<h3>Traced conditions per stage (workflow model)</h3>")[1].split("</table>")[0]
    assert ("<th>tasks in I/O at once</th><th>the same, less their wait for a CPU</th><th>machine&#x27;s CPUs "
            "busy</th><th>processes&#x27; time waiting for a CPU</th></tr>") in table and "computing" not in table
    assert f"<tr><td class=l>{doc['stages'][0]['name']}</td><td>1.5</td><td>1.25</td><td>53 %</td><td>—</td></tr>" \
        in table
    assert f"<tr><td class=l>{doc['stages'][1]['name']}</td><td>—</td><td>—</td><td>—</td><td>12 %</td></tr>" in table


def test_the_report_shows_the_envelopes_wait_for_a_cpu(tmp_path):
    """The main envelope's op time waiting for a CPU (the engine's op_wait_s / op_s summed per metric and hosts x
    processes), B points left out as their T twins' runs; a point without the clock counts for nothing."""
    import sqlite3
    _, db = _envelope_db(tmp_path, {"Tm", "TL", "BL", "T1L", "B1L", "T1R", "B1R", "TN", "BN"})
    with sqlite3.connect(db) as c:
        c.execute("UPDATE envelope_points SET config = '{\"op_s\": 2.0, \"op_wait_s\": 0.5}' "
                  "WHERE metric IN ('TL', 'BL') AND hosts = 2 AND procs_per_host = 1")
        c.execute("UPDATE envelope_points SET config = '{\"op_s\": 1.0, \"op_wait_s\": 0.125}' "
                  "WHERE metric = 'T1L' AND hosts = 4 AND procs_per_host = 1")
    out = tmp_path / "rep"
    r = predict(MONTAGE, "--envelope", f"{db}:site", "--out", out, "--bootstrap", "0")
    assert r.returncode == 0, r.stderr
    page = (out / "report.html").read_text()
    table = page.split("<h3>Envelope site: its ops' time waiting for a CPU</h3>")[1].split("</table>")[0]
    assert "<th>2 hosts x 1</th><th>4 hosts x 1</th></tr>" in table and "BL" not in table
    assert "<tr><td class=l>T1L</td><td>—</td><td>12 %</td></tr>" in table
    assert "<tr><td class=l>TL</td><td>25 %</td><td>—</td></tr>" in table
    r = predict(MONTAGE, "--out", tmp_path / "shipped", "--bootstrap", "0")
    assert r.returncode == 0 and "waiting for a CPU</h3>" not in (tmp_path / "shipped" / "report.html").read_text()


def test_workflow_after_what_if_and_missing_workflow():
    r = predict("--what-if", "hosts=2,4", MONTAGE, "--bootstrap", "0", "--json")
    assert r.returncode == 0, r.stderr
    assert {w["what_if"] for w in json.loads(r.stdout)["what_if"]} == {"hosts=2", "hosts=4"}
    r = predict("--what-if", "hosts=2")
    assert r.returncode == 2 and "the following arguments are required: WORKFLOW.yaml" in r.stderr


def test_an_exported_envelopes_clocks_reach_wait_ratio(tmp_path):
    """Points of a YAML export keep their config: ops that waited 20 % of their time for a CPU, stages whose I/O
    waited 50 %: every time per op x 0.8 / 0.5, from the file and from the db it was imported into alike."""
    env = _shipped_envelope()
    for p in env["points"]:
        p["config"] = {**(p.get("config") or {}), "op_s": 1.0, "op_wait_s": 0.2}
    f = _write(tmp_path / "clocked.yaml", env)
    doc = _montage_doc()
    for st in doc["stages"]:
        st["io_cpu_wait"] = 0.5
    wf = _write(tmp_path / "wf.yaml", doc)

    def totals(*args):
        r = predict(wf, "--envelope", f, "--variant", "refined", "--json", "--bootstrap", "0", *args)
        assert r.returncode == 0, r.stderr
        return [d["total_s"] for d in json.loads(r.stdout)["predictions"]]
    off = totals("--refine=-wait_ratio")
    assert len(off) == len(doc["stages"]) and all(t > 0 for t in off)
    assert totals() == pytest.approx([t * 0.8 / 0.5 for t in off], rel=1e-9)   # wait_ratio is on by default
    db = tmp_path / "env.db"
    r = subprocess.run([sys.executable, "-c", "import sys; from mtcio.cli import mtcenvelope; sys.exit(mtcenvelope())",
                        "import", str(f), "--db", str(db), "--name", "clocked"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = predict(wf, "--envelope", f"{db}:clocked", "--variant", "refined", "--json", "--bootstrap", "0",
                "--refine", "all")
    assert r.returncode == 0, r.stderr
    assert [d["total_s"] for d in json.loads(r.stdout)["predictions"]] == pytest.approx([t * 1.6 for t in off])


def test_cell_rate_option(tmp_path):
    """--cell-rate is in the JSON, and the table says a way other than the default; the shipped envelope's points
    have 3-4 repeats, below the 5 a swing needs, so its predictions are the same every way; a wrong name is refused."""
    dflt = json.loads(predict(MONTAGE, "--json", "--bootstrap", "0").stdout)
    assert dflt["envelope"]["cell_rate"] == "swung"
    for how in ("mean", "quartile"):
        r = predict(MONTAGE, "--json", "--bootstrap", "0", "--cell-rate", how)
        assert r.returncode == 0, r.stderr
        q = json.loads(r.stdout)
        assert q["envelope"]["cell_rate"] == how
        assert [p["total_s"] for p in q["predictions"]] == [p["total_s"] for p in dflt["predictions"]]
        assert not [w for w in q["warnings"] if "swung" in w]
    t = predict(MONTAGE, "--cell-rate", "quartile", "--bootstrap", "0")
    assert t.stdout.splitlines()[0] == "envelope: testbed4 (shipped), each point its repeats' upper quartile"
    bad = predict(MONTAGE, "--cell-rate", "median")
    assert bad.returncode == 2 and "invalid choice: 'median'" in bad.stderr


def test_unsteady_envelope_is_warned_and_quartile_reads_its_quick_repeats(tmp_path):
    """An envelope of 5 repeats a point whose T1L points swung 5x in two of them (slow minutes): warned with the
    count of such points; the default (swung) and quartile read them at their quick repeats, mean does not."""
    env = _shipped_envelope()
    pts, first = [], {}
    for p in env["points"]:
        cell = (p["metric"], p["file_size"], p["procs_per_host"], p["hosts"])
        if cell in first:
            continue
        first[cell] = p
        slow = p["metric"] in ("T1L", "B1L")
        for r, f in enumerate((0.2, 0.2, 1.0, 1.0, 1.0) if slow else (1.0,) * 5):
            pts.append(dict(p, repeat=r, value=p["value"] * f if p.get("value") else p.get("value")))
    env["points"] = pts
    path = _write(tmp_path / "swung.yaml", env)
    n_t = sum(1 for m, *_ in first if m in ("Tm", "Ts", "Tf", "T1L", "T1R", "TN", "TL"))
    n_bad = sum(1 for m, *_ in first if m == "T1L")
    r = predict(MONTAGE, "--envelope", path, "--json", "--bootstrap", "0", "--cell-rate", "mean")
    assert r.returncode == 0, r.stderr
    mean = json.loads(r.stdout)
    warned = [w for w in mean["warnings"] if "swung" in w]
    assert len(warned) == 1 and f": {n_bad} of {n_t} points swung more than 2x" in warned[0]
    assert warned[0].endswith("re-measure, or --cell-rate swung")
    q = json.loads(predict(MONTAGE, "--envelope", path, "--json", "--bootstrap", "0", "--cell-rate", "quartile").stdout)
    assert [w for w in q["warnings"] if "swung" in w][0].endswith("re-measure")
    sw = json.loads(predict(MONTAGE, "--envelope", path, "--json", "--bootstrap", "0").stdout)    # the default
    assert [p["total_s"] for p in sw["predictions"]] == pytest.approx([p["total_s"] for p in q["predictions"]],
                                                                      rel=1e-12)   # only the T1L points swung
    rl = {(p["stage"], p["variant"]): p["terms"]["read_local"] for p in mean["predictions"]}
    rq = {(p["stage"], p["variant"]): p["terms"]["read_local"] for p in q["predictions"]}
    assert rl.keys() == rq.keys() and any(rl[k] > 0 for k in rl)
    for k in rl:      # the quartile is the quick repeats' value; the mean, 1 / (2 x 5 + 3) x 5 of it
        assert rq[k] == pytest.approx(rl[k] * 5 / 13, rel=1e-6) if rl[k] else rq[k] == 0


def test_an_envelope_begun_on_a_busy_machine_is_warned(tmp_path):
    """The load `mtcenvelope measure` saw before its sweep rides in the envelope's meta: a busy one is named in a
    warning with what was seen; a quiet one, or none recorded (the shipped envelope), gives no such warning."""
    env = _shipped_envelope()
    busy = {"seconds": 0.5, "cpu": 0.871, "disk": 0.05, "written_Bps": 3 << 20, "busy": True, "waited_s": 120.4}
    env["meta"] = {**(env.get("meta") or {}), "machine_before": busy}
    path = _write(tmp_path / "busy.yaml", env)
    r = predict(MONTAGE, "--envelope", path, "--json", "--bootstrap", "0")
    assert r.returncode == 0, r.stderr
    warned = [w for w in json.loads(r.stdout)["warnings"] if "busy when its sweep began" in w]
    assert warned == [f"envelope {path}: the machine was busy when its sweep began (CPUs 87% busy, disks 5% busy, "
                      "3.0 MiB/s written, still after waiting 120 s): its rates may carry that other work; re-measure "
                      "on a quiet machine (mtcenvelope measure --wait-quiet)"]
    env["meta"]["machine_before"] = dict(busy, seconds=2.0, waited_s=2.01)     # one 2-second look, no wait
    once = _write(tmp_path / "once.yaml", env)
    r = predict(MONTAGE, "--envelope", once, "--json", "--bootstrap", "0")
    assert [w for w in json.loads(r.stdout)["warnings"] if "busy when its sweep began" in w] == [
        f"envelope {once}: the machine was busy when its sweep began (CPUs 87% busy, disks 5% busy, 3.0 MiB/s "
        "written): its rates may carry that other work; re-measure on a quiet machine (mtcenvelope measure "
        "--wait-quiet)"]
    env["meta"]["machine_before"] = dict(busy, cpu=0.02, written_Bps=0, busy=False, waited_s=0.5)
    quiet = _write(tmp_path / "quiet.yaml", env)
    for p in (quiet, None):
        args = ("--envelope", p) if p else ()
        r = predict(MONTAGE, *args, "--json", "--bootstrap", "0")
        assert r.returncode == 0, r.stderr
        assert not [w for w in json.loads(r.stdout)["warnings"] if "busy" in w]
