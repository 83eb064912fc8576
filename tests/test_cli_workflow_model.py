"""The workflow-model loader on hostile and malformed files: bounded work, only ModelError, file + line + field."""
import resource
import time

import pytest

from mtcio.db import workflow_model as wm

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
    ("a: b: c\n", "line 1: not valid YAML (mapping values are not allowed here)"),
    ("a: \x07\n", "not valid YAML (unacceptable character #x0007: special characters are not allowed in "
                   "\"<unicode string>\", position 3)"),
])
def test_bad_models_give_one_line_with_line_and_field(tmp_path, text, expect):
    assert refused(tmp_path, text) == expect


def test_size_bound_and_not_a_file(tmp_path):
    big = GOOD + "x-pad: '" + "y" * wm.MAX_BYTES + "'\n"
    assert refused(tmp_path, big) == f"{len(big):,} bytes, larger than a workflow model may be (4,194,304)"
    with pytest.raises(wm.ModelError, match=r": not a regular file$"):
        wm.load(str(tmp_path))
    with pytest.raises(wm.ModelError, match=r"nope.yaml: cannot read \(No such file or directory\)$"):
        wm.load(str(tmp_path / "nope.yaml"))
