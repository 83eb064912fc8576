"""`mtcpredict --out` draws its figures in two processes (report.Drawing, a child started at the point predictions,
and report.draw_figures): the files and the page's images are the same bytes as drawn in one, a figure the forked
child fails to draw is drawn by the parent, none lost, and a child of a prediction that failed is stopped."""
import os

import pytest

from helpers.cli import MONTAGE

from mtcio.db.workflow_model import load
from mtcio.predictor import envelope_source, figures, report
from mtcio.predictor.model import predict_stage
from mtcio.predictor.surface import EnvelopeSurface

SECTIONS = ["maps", "stage_time", "dominant", "envelope"]         # no validation, no what-if: no parity, whatif
FILES = ["dominant.png", "envelope.png", "maps.png", "stage_time.png"]


def montage():
    wf = load(MONTAGE)
    surface = EnvelopeSurface("swung").fit(envelope_source.load(None).points)
    preds = [predict_stage(st, surface, v) for st in wf.stages for v in ("faithful", "refined")]
    return wf, surface, preds


def montage_plan(wf, surface, preds):
    plt = figures.pyplot()
    return plt, figures.plan(plt, {"predictions": [p.to_dict() for p in preds]}, wf, surface, preds)


def files(d):
    return {n: open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d))}


def test_two_processes_draw_the_same_bytes_as_one(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    wf, surface, preds = montage()
    plt, plan = montage_plan(wf, surface, preds)
    a = report.draw_figures(plt, str(one), plan)
    drawing = report.Drawing.start(wf, surface, preds, procs=2)
    assert drawing.keys and set(drawing.keys) < set(SECTIONS)      # a share, not all
    b = report.draw_figures(plt, str(two), montage_plan(wf, surface, preds)[1], drawing)
    assert drawing.pid is None                                     # collected
    assert list(a) == list(b) == SECTIONS                          # page order
    assert a == b
    assert sorted(os.listdir(one)) == sorted(os.listdir(two)) == FILES
    assert files(one) == files(two)
    assert all(v[0] == f"{k}.png" for k, v in a.items())
    assert report.Drawing.start(wf, surface, preds, procs=1) is None   # one CPU: all drawn here


def test_the_late_figures_stay_in_the_parent():
    wf, surface, preds = montage()
    mine, theirs = report.split(SECTIONS + ["parity", "whatif"], head=2.0)
    drawing = report.Drawing.start(wf, surface, preds, ["parity", "whatif"], 2.0, procs=2)
    try:
        assert drawing.keys == [k for k in theirs if k in SECTIONS] and "parity" not in drawing.keys
    finally:
        drawing.cancel()
    assert drawing.pid is None


def test_a_figure_the_child_fails_to_draw_is_drawn_by_the_parent(tmp_path, monkeypatch):
    wf, surface, preds = montage()
    plt, plan = montage_plan(wf, surface, preds)
    ref = tmp_path / "ref"
    ref.mkdir()
    want = report.draw_figures(plt, str(ref), plan)
    parent = os.getpid()
    mine, child_share = report.split(SECTIONS, head=1.6)
    assert sorted(mine + child_share) == sorted(SECTIONS) and mine and child_share
    failing = child_share[-1]                 # the child draws the others first, then fails
    fn = failing if failing != "stage_time" else "stage_times"       # the figures function that draws it
    drawn = getattr(figures, fn)

    def only_here(*a):
        if os.getpid() != parent:
            raise RuntimeError("the child cannot draw this")
        return drawn(*a)
    monkeypatch.setattr(figures, fn, only_here)
    drawing = report.Drawing.start(wf, surface, preds, head=1.6, procs=2)
    assert drawing.keys == child_share
    got = report.draw_figures(plt, str(tmp_path), montage_plan(wf, surface, preds)[1], drawing)
    assert got == want
    assert sorted(n for n in os.listdir(tmp_path) if n.endswith(".png")) == FILES
    assert [n for n in os.listdir(tmp_path) if n.startswith(".")] == []      # no temp file left behind


def test_a_failed_prediction_stops_the_child_and_writes_nothing(tmp_path, monkeypatch):
    """A prediction that fails after the child started (here the intervals) stops it: no file, no child left."""
    from mtcio.predictor import cli, predict
    from mtcio.predictor.surface import EnvelopeError
    started = []
    start = report.Drawing.start

    def keep(*a, **k):
        started.append(start(*a, **k, procs=2))
        return started[-1]

    def fails(preds, wf, surface, refine=None, io_concurrency=None, bootstrap=100, seed=1):
        if bootstrap:                           # predict_workflow's own call (bootstrap=0) passes
            raise EnvelopeError("no replicate")
    monkeypatch.setattr(report.Drawing, "start", keep)
    monkeypatch.setattr(predict, "add_intervals", fails)
    out = tmp_path / "out"
    assert cli.main([MONTAGE, "--out", str(out)]) == 2
    (d,) = started
    assert d is not None and d.pid is None
    assert not out.exists()
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)        # no child of this process left to reap


def test_the_stage_time_map_follows_file_size_and_nodes():
    """Each cell of the stage-time map is the refined prediction of the stage with every task file of that size on
    that many nodes (the what-if filesize= and hosts=); a map flat along file size was the what-if key renamed
    under it (size= became the workflow's size)."""
    import numpy as np

    from mtcio.predictor import heatmap, whatif
    wf = load(MONTAGE)
    surface = EnvelopeSurface("swung").fit(envelope_source.load(None).points)
    st = wf.stage("mDiff")
    sizes, nodes = np.array([1e4, 1e6, 1e8]), np.array([2, 8])
    t = heatmap.stage_time(surface, st, sizes, nodes)
    for i, c in enumerate(nodes):
        for j, s in enumerate(sizes):
            want = predict_stage(whatif.apply(st, [("hosts", ("=", c)), ("filesize", ("=", s))]), surface, "refined",
                                 {"slots", "size_lookup", "files", "small_files"}).total_s
            assert t[i, j] == want
    assert len(set(t[0])) == 3 and t[0, 0] < t[0, 1] < t[0, 2]         # larger files, more I/O time
    with pytest.raises(whatif.WhatIfError, match="size: not a change of one stage"):
        whatif.apply(st, [("size", ("=", 1e6))])
