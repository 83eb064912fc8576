"""The workflow-model loader on hostile and malformed files: bounded work, only ModelError, file + line + field."""
import os
import resource
import subprocess
import sys
import time

import pytest

from mtcio.db import workflow_model as wm

MONTAGE = os.path.join(os.path.dirname(__file__), "..", "montage_example", "montage.yaml")

GOOD = ("mtcio_workflow: 1\n"
        "stages:\n"
        "  - name: a\n"
        "    tasks: 3\n"
        "    hosts: 2\n"
        "    read: {bytes_per_task: {min: 1, mean: 2, max: 3}, alpha: 0.5}\n")
BOMB = "".join(f"{c}: &{c} [{','.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))
BOMB = 'a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n' + BOMB + \
       "mtcio_workflow: 1\nstages: *i\n"


def load(tmp_path, text):
    p = tmp_path / "wf.yaml"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return wm.load(str(p)), str(p)


def refused(tmp_path, text) -> str:
    p = tmp_path / "wf.yaml"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(wm.ModelError) as e:
        wm.load(str(p))
    msg = str(e.value)
    assert msg.startswith(f"{p}: ") and "\n" not in msg and len(msg) < 300, msg
    return msg[len(str(p)) + 2:]


def test_good_model_and_anchors_load(tmp_path):
    wf, _ = load(tmp_path, GOOD)
    assert (wf.stages[0].tasks, wf.stages[0].hosts, wf.stages[0].read.alpha) == (3, 2, 0.5)
    wf, _ = load(tmp_path, GOOD.replace("read: {", "read: &r {") + "x-copy: *r\n")
    assert wf.stages[0].read.bytes_per_task.max == 3
    # an unquoted timestamp stays the text it was (source.created is a string)
    wf, _ = load(tmp_path, GOOD + "source: {created: 2026-01-01 10:00:00}\n")
    assert wf.source == {"created": "2026-01-01 10:00:00"}


def test_billion_laughs_is_refused_at_once(tmp_path):
    assert len(BOMB) < 400
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.process_time()            # CPU time: what an expansion would take, whatever else the machine runs
    msg = refused(tmp_path, BOMB)
    assert time.process_time() - t0 < 1.0
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0 < 50 * 1024       # KiB
    assert msg == "line 6: the document expands to more than 200,000 values (aliases)"


@pytest.mark.parametrize("text,expect", [
    ("x: " + "[" * 3000 + "]" * 3000 + "\n", "line 1: nested deeper than 64 levels"),
    ("a: &a [*a]\n", "line 1: an alias refers to the node that contains it"),
    (b"mtcio_workflow: 1\n\xff\xfe\n", "line 2: not UTF-8 text (byte 0xff at offset 18)"),
    (GOOD + "source: {created: !!binary aGVsbG8=}\n",
     "line 7: tag 'tag:yaml.org,2002:binary' not allowed (plain YAML only)"),
    (GOOD + "x-p: !!python/object/apply:os.system [true]\n",
     "line 7: tag 'tag:yaml.org,2002:python/object/apply:os.system' not allowed (plain YAML only)"),
    (GOOD.replace("alpha: 0.5", "alpha: !!float x"), "line 6: value 'x' is not a valid float"),
    (GOOD.replace("tasks: 3", "tasks: !!int 0x"), "line 4: value '0x' is not a valid int"),
    (GOOD.replace("tasks: 3", "tasks: " + "9" * 5000), "line 4: value '" + "9" * 56 + "... is not a valid int"),
    (GOOD.replace("tasks: 3", "tasks: " + "9" * 30),
     "line 4: stages[0].tasks: must be below 2**63, got " + "9" * 30),
    (GOOD.replace("mtcio_workflow: 1", "mtcio_workflow: true"),
     "line 1: mtcio_workflow: schema version True not supported (this mtcio reads 1)"),
    (GOOD + "stages: []\n", "line 7: duplicate key 'stages'"),
    (GOOD.replace("    tasks: 3\n", "    tasks: 3\n    tasks: 4\n"), "line 5: duplicate key 'tasks'"),
    (GOOD.replace("hosts: 2", "hosts: 4"),
     "line 5: stages[0].hosts: 4 hosts for 3 tasks (a stage runs on at most one host per task)"),
    (GOOD.replace("tasks: 3", "tasks: [1, 2]"), "line 4: stages[0].tasks: must be a number, got a list"),
    (GOOD.replace("alpha: 0.5", "alpha: lots"), "line 6: stages[0].read.alpha: must be a number, got 'lots'"),
    (GOOD.replace("    hosts: 2\n", ""), "line 3: stages[0].hosts: required field missing"),
    (GOOD.replace("name: a", "name: {x: 1}"), "line 3: stages[0].name: must be a non-empty string, got a mapping"),
    (GOOD + "? [a]\n: 1\n", "line 7: a key must be a plain value"),
    ("", "empty document (a workflow model is a mapping with 'mtcio_workflow' and 'stages')"),
    # NaN is no number (null says unknown); a date is no name
    (GOOD.replace("alpha: 0.5", "alpha: .nan"), "line 6: stages[0].read.alpha: must be a finite number or null, "
                                                "got nan"),
    (GOOD.replace("tasks: 3", "tasks: .NaN"), "line 4: stages[0].tasks: must be a finite number, got nan"),
    (GOOD.replace("name: a", "name: 2026-01-01"),
     "line 3: stages[0].name: must be a non-empty string, got the timestamp '2026-01-01' (quote it)"),
    (GOOD.replace("name: a", "name: !!timestamp 2026-01-01 10:00:00"),
     "line 3: stages[0].name: must be a non-empty string, got the timestamp '2026-01-01 10:00:00' (quote it)"),
    (GOOD + "run: 2026-01-01\n", "line 7: run: must be a string, got the timestamp '2026-01-01' (quote it)"),
    # the YAML parser's own words: libyaml's, or PyYAML's where it has no libyaml
    ("a: b: c\n", ("line 1: not valid YAML (mapping values are not allowed in this context)",
                   "line 1: not valid YAML (mapping values are not allowed here)")),
    ("a: \x07\n", ("not valid YAML (unacceptable character #x0007: control characters are not allowed in "
                    "\"<unicode string>\", position 3)",
                    "not valid YAML (unacceptable character #x0007: special characters are not allowed in "
                    "\"<unicode string>\", position 3)")),
])
def test_bad_models_give_one_line_with_line_and_field(tmp_path, text, expect):
    got = refused(tmp_path, text)
    assert got in expect if isinstance(expect, tuple) else got == expect


def test_quoted_dates_are_names_and_a_timestamp_elsewhere_stays_text(tmp_path):
    wf, _ = load(tmp_path, GOOD.replace("name: a", "name: '2026-01-01'") + "run: '2026-01-02'\n"
                 "source: {created: 2026-01-01 10:00:00, db: x}\n")
    assert (wf.stages[0].name, wf.run) == ("2026-01-01", "2026-01-02")
    assert wf.source == {"created": "2026-01-01 10:00:00", "db": "x"} and type(wf.source["created"]) is str
    assert "created: '2026-01-01 10:00:00'" in wm.dump(wf)


def test_mtcpredict_refuses_a_nan_alpha(tmp_path):
    """It was predicted as alpha = 1.0 (exit 0): NaN was taken for unknown."""
    text = open(MONTAGE).read()
    assert text.count("alpha: 0.") >= 1
    bad = tmp_path / "m.yaml"
    bad.write_text(text.replace("alpha: 0.", "alpha: .nan #", 1))
    line = text[:text.index("alpha: 0.")].count("\n") + 1
    r = subprocess.run([sys.executable, "-c", "import sys; from mtcio.cli import mtcpredict; sys.exit(mtcpredict())",
                        str(bad), "--out", str(tmp_path / "p")], capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr
    assert r.stderr.startswith(f"mtcpredict: {bad}: line {line}: stages[0].read.alpha: must be a finite number or "
                               f"null, got nan"), r.stderr
    assert not (tmp_path / "p").exists()


def test_a_name_with_undecodable_bytes_loads_and_its_errors_have_lines(tmp_path):
    """mtcprof model writes a name's undecodable bytes as \\uDCxx escapes, which libyaml refuses: they load."""
    text = GOOD.replace("name: a", 'name: "st\\uDCE9age"')
    wf, _ = load(tmp_path, text)
    assert wf.stages[0].name == "st\udce9age"
    assert refused(tmp_path, text.replace("alpha: 0.5", "alpha: 2")) == \
        "line 6: stages[0].read.alpha: must be <= 1, got 2"


def test_size_bound_and_not_a_file(tmp_path):
    big = GOOD + "x-pad: '" + "y" * wm.MAX_BYTES + "'\n"
    assert refused(tmp_path, big) == f"{len(big):,} bytes, larger than a workflow model may be ({wm.MAX_BYTES:,})"
    with pytest.raises(wm.ModelError, match=r": not a regular file$"):
        wm.load(str(tmp_path))
    with pytest.raises(wm.ModelError, match=r"nope.yaml: cannot read \(No such file or directory\)$"):
        wm.load(str(tmp_path / "nope.yaml"))


def test_ten_thousand_stages_without_aliases_are_a_model(tmp_path):
    """10,000 stages of 25 values each: 250,000 values, no alias.  They were refused as a document expanding
    "to more than 200,000 values (aliases)"; aliases that repeat a little are a model too."""
    stage = ("  - name: s{i}\n    tasks: 4\n    hosts: 2\n"
             "    read: {{bytes_per_task: {{min: 1, mean: 2, max: 3}}, files_per_task: 1, alpha: 0.5}}\n"
             "    write: {{bytes_per_task: {{min: 1, mean: 2.5, max: 4}}, files_per_task: 1}}\n")
    text = "mtcio_workflow: 1\nstages:\n" + "".join(stage.format(i=i) for i in range(10_000))
    wf, _ = load(tmp_path, text)
    assert len(wf.stages) == 10_000 and wf.stages[-1].name == "s9999"
    assert wf.stages[9999].write.bytes_per_task.mean == 2.5 and wf.stages[0].read.alpha == 0.5
    shared = "x-d: &d {min: 1, mean: 2, max: 3}\nmtcio_workflow: 1\nstages:\n" + "".join(
        f"  - {{name: s{i}, tasks: 4, hosts: 2, read: {{bytes_per_task: *d}}, write: {{bytes_per_task: *d}}}}\n"
        for i in range(10_000))      # 20,000 aliases of 7 values: 140,000 values added
    wf, _ = load(tmp_path, shared)
    assert len(wf.stages) == 10_000 and wf.stages[5].write.bytes_per_task.max == 3
    assert refused(tmp_path, shared.replace("{min: 1, mean: 2, max: 3}", "{min: 1, mean: 2, max: 3, x-p: [" +
                                            ",".join(["0"] * 10) + "]}")) == \
        "line 4: the document expands to more than 200,000 values (aliases)"   # the stages list
