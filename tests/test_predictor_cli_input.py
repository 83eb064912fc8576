"""mtcpredict on bad or mismatched input: one line and exit 2, never a traceback or a silent wrong result."""
import json
import os
import shutil
import sqlite3

import pytest
import yaml

from mtcio.db import ingest as ing
from mtcio.db import store
from mtcio.predictor import envelope_source

from helpers.cli import MONTAGE, predict, run_model
from helpers.tracing import make_run, quiet, traced


def shipped():
    with open(envelope_source.SHIPPED) as f:
        return yaml.safe_load(f)


def write(path, doc):
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def one_line(r):
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


@pytest.mark.parametrize("meta, said", [
    ({"block": "abc"}, "meta.block: 'abc' is not a whole number >= 0"),
    ([1, 2], "meta: must be a mapping, not list"),
    ({"machine_before": "busy"}, "meta.machine_before: must be a mapping"),
    ({"young": "false"}, "meta.young: 'false' is not true or false"),
    ({"provenance": {"ops_per_proc": -1}}, "meta.provenance.ops_per_proc: -1 is not a whole number >= 0"),
])
def test_malformed_meta_is_named(tmp_path, meta, said):
    doc = shipped()
    doc["meta"] = meta
    env = write(tmp_path / "e.yaml", doc)
    assert one_line(predict(MONTAGE, "--envelope", env)) == f"mtcpredict: envelope {env}: {said}"


@pytest.mark.parametrize("change, said", [
    ({"value": 0.0}, "point 0: value 0.0: an ok point's rate must be a number > 0"),
    ({"value": float("nan")}, "point 0: value nan: an ok point's rate must be a number > 0"),
    ({"ok": "maybe"}, "point 0: ok: 'maybe' is not true or false"),
    ({"metric": None}, "point 0: no metric"),
])
def test_bad_point_is_named(tmp_path, change, said):
    doc = shipped()
    doc["points"][0].update(change)
    env = write(tmp_path / "e.yaml", doc)
    assert one_line(predict(MONTAGE, "--envelope", env)) == f"mtcpredict: envelope {env}: {said}"


def test_no_usable_point_says_why(tmp_path):
    doc = shipped()
    doc["points"] = [dict(p, metric="XX") for p in doc["points"][:3]] + [dict(doc["points"][3], ok=False)]
    env = write(tmp_path / "e.yaml", doc)
    assert one_line(predict(MONTAGE, "--envelope", env)) == (
        f"mtcpredict: envelope {env}: no usable point (4 point(s): 1 not ok, 3 unknown metric (XX; known: Tm, Ts, "
        "Tf, T1L, T1R, TN, TL, B1L, B1R, BN, BL))")


def test_csv_envelope(tmp_path):
    binary = tmp_path / "b.csv"
    binary.write_bytes(b"metric,file_size\n\xff\xfe\x00bad\n")
    assert one_line(predict(MONTAGE, "--envelope", str(binary))) == (
        f"mtcpredict: envelope {binary}: not a text file (nor an SQLite db)")
    header = tmp_path / "h.csv"
    header.write_text("metrik,file_size,hosts,procs_per_host,value,ok\nTm,0,1,1,500,True\n")
    assert one_line(predict(MONTAGE, "--envelope", str(header))) == (
        f"mtcpredict: envelope {header}: no column metric in its header (an `mtcenvelope export --format csv` has "
        "metric, file_size, hosts, procs_per_host, value, ok, ...)")
    good = tmp_path / "g.csv"
    rows = [p for p in shipped()["points"]]
    good.write_text("metric,file_size,hosts,procs_per_host,value,ok\n" + "".join(
        f"{p['metric']},{p['file_size']},{p['hosts']},{p['procs_per_host']},{p['value']},True\n" for p in rows))
    r = predict(MONTAGE, "--envelope", str(good), "--bootstrap", "0")
    assert r.returncode == 0, r.stderr
    assert (f"mtcpredict: envelope {good}: a CSV export carries no measurement conditions: taken as measured with "
            "1 MiB calls, cold reads, idle hosts (the YAML export or the db says)") in r.stderr.splitlines()
    other = write(tmp_path / "y.yaml", shipped())
    assert one_line(predict(MONTAGE, "--envelope", other, "--envelope", str(good))).startswith(
        f"mtcpredict: envelope {good}: a CSV export carries no measurement conditions (call size")


def test_db_without_points_table(tmp_path):
    db = tmp_path / "e.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, name TEXT, kind TEXT, meta TEXT)")
    conn.execute("INSERT INTO runs (name, kind, meta) VALUES ('env', 'envelope', 'not json')")
    conn.commit()
    conn.close()
    line = one_line(predict(MONTAGE, "--envelope", f"{db}:env"))
    assert line == f"mtcpredict: envelope {db}:env: not a readable mtcio db (no such table: envelope_points)"


@pytest.mark.parametrize("args, said", [
    (["--bootstrap", "10001"], "--bootstrap: 10001 resamples; give 0 to 10,000 (each one predicts every stage again)"),
    (["--refine", ","], "--refine ',': no refinement named (for none of them: --refine none)"),
    (["--refine", "none,slots"], "--refine: 'none' stands alone (--refine none), not in a list"),
    (["--refine=+later_share"], "--refine: refinement 'later_share' was removed (refuted on held-out data: pass V: "
                                "the median better but three stages farther, which its rule did not allow)"),
    (["--refine", "slots,measured_wait"], "--refine: refinement 'measured_wait' was removed (refuted on held-out "
                                          "data: pass AK: median 11.6 -> 13.8 %, the 4-host fan-outs +50..+90 %)"),
    (["--refine=+balance"], "--refine: refinement 'balance' was removed by the ablation "
                            "(docs/experiments/ablation.md)"),
    (["--refine", "slots,young_reads"], "--refine: refinement 'young_reads' was removed by the ablation "
                                        "(docs/experiments/ablation.md)"),
    (["--files", "gfarm"], "--files says which traced files --validate counts: give it with --validate DB:RUN"),
    (["--calibrate", "--validate", "x.db:r", "--variant", "faithful"],
     "--calibrate corrects the refined variant: give --variant refined or all"),
])
def test_options_refused(args, said):
    assert one_line(predict(MONTAGE, *args)) == f"mtcpredict: {said}"


@pytest.fixture
def traced_db(tmp_path, capsys):
    """Run R (stage S1: 2 tasks, S2: 1), its model, then run Q (S1: 1 task, S2: 1), traced for real."""
    d, logs = make_run(tmp_path)
    db = tmp_path / "x.db"
    ing.ingest(str(db), str(logs), gfwhere_cmd=None, warn=quiet)
    q = tmp_path / "q"
    q.mkdir()
    assert traced(q, ["sh", "-c", f"cat {d}/in2 > {d}/q3"], "q1", "S1", "Q").returncode == 0
    assert traced(q, ["sh", "-c", f"cat {d}/q3 > {d}/q4"], "q2", "S2", "Q").returncode == 0
    ing.ingest(str(db), str(q), gfwhere_cmd=None, warn=quiet)
    conn = store.connect(str(db))
    store.add_envelope_points(conn, "env", [dict(p, unit="ops/s", tool="native") for p in shipped()["points"]],
                              meta={"block": 1 << 20})
    conn.close()
    wf = tmp_path / "wf.yaml"
    rc, err = run_model(["--db", str(db), "--run", "R", "-o", str(wf), "--envelope-run", "env"], capsys)
    assert rc == 0, err
    return str(db), str(wf)


def test_validate_refuses_another_workflows_run(traced_db):
    db, wf = traced_db
    line = one_line(predict(wf, "--validate", f"{db}:Q"))
    assert line == (f"mtcpredict: --validate {db}:Q: run Q ran 1 S1 task(s), the model 2: validate against a run of "
                    "the workflow the model describes (model that run with `mtcprof model` to predict it)")
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM validations").fetchone() == (0,)
    line = one_line(predict(wf, "--validate", f"{db}:R,R"))
    assert line == f"mtcpredict: --validate {db}:R,R: run R named twice (repeats are different runs)"


def test_validate_db_alone_takes_the_models_run_and_its_envelope(traced_db, tmp_path):
    db, wf = traced_db
    r = predict(wf, "--validate", db, "--json", "--bootstrap", "0")    # Q is the latest trace run, R the model's
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["validated_runs"] == ["R"]
    assert doc["envelope"]["origin"] == f"{db}:env"       # the envelope run the model names, not the shipped one
    assert "no --envelope given" not in r.stderr
    moved = tmp_path / "moved.db"
    shutil.move(db, moved)
    line = one_line(predict(wf))
    assert line == (f"mtcpredict: the workflow model names envelope run 'env' of db {db}, which is not there: give "
                    "--envelope DB:NAME")
    r = predict(wf, "--envelope", f"{moved}:env", "--bootstrap", "0")
    assert r.returncode == 0, r.stderr
    assert os.path.exists(moved)


def test_stage_names_are_escaped_in_the_table(tmp_path):
    with open(MONTAGE) as f:
        doc = yaml.safe_load(f)
    doc["stages"][0]["name"] = "mProject\x1b[31mPP"
    wf = write(tmp_path / "wf.yaml", doc)
    r = predict(wf, "--bootstrap", "0")
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout and "mProject\\x1b[31mPP" in r.stdout


def test_what_if_beyond_the_envelope_is_warned():
    r = predict(MONTAGE, "--bootstrap", "0", "--what-if", "filesize=x1000")
    assert r.returncode == 0, r.stderr
    said = [x for x in r.stderr.splitlines() if x.startswith("warning: --what-if: TL extrapolated at ")]
    assert len(said) == 1 and "931 GiB k=1" in said[0], r.stderr
    assert not any(x.startswith("warning: --what-if") for x in predict(MONTAGE, "--bootstrap", "0").stderr.splitlines())


def test_out_must_be_a_folder(tmp_path):
    f = tmp_path / "wf.yaml"
    f.write_text("keep me")
    assert one_line(predict(MONTAGE, "--out", str(f))) == (
        f"mtcpredict: --out {f}: exists and is not a folder (--out takes the folder to write the report into)")
    assert f.read_text() == "keep me"
