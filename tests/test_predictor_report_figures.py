"""`mtcpredict --out` draws its figures in two processes (report.draw_figures): the files and the page's images are
the same bytes as drawn in one, and a figure the forked child fails to draw is drawn by the parent, none lost."""
import os

import pytest

from helpers.cli import MONTAGE

from mtcio.db.workflow_model import load
from mtcio.predictor import envelope_source, figures, report
from mtcio.predictor.model import predict_stage
from mtcio.predictor.surface import EnvelopeSurface

SECTIONS = ["maps", "stage_time", "dominant", "envelope"]         # no validation, no what-if: no parity, whatif
FILES = ["dominant.png", "envelope.png", "maps.png", "stage_time.png"]


def montage_plan():
    wf = load(MONTAGE)
    surface = EnvelopeSurface("swung").fit(envelope_source.load(None).points)
    preds = [predict_stage(st, surface, v) for st in wf.stages for v in ("faithful", "refined")]
    plt = figures.pyplot()
    return plt, figures.plan(plt, {"predictions": [p.to_dict() for p in preds]}, wf, surface, preds)


def files(d):
    return {n: open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d))}


def test_two_processes_draw_the_same_bytes_as_one(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    plt, plan = montage_plan()
    a = report.draw_figures(plt, str(one), plan, procs=1)
    b = report.draw_figures(plt, str(two), montage_plan()[1], procs=2)
    assert list(a) == list(b) == SECTIONS                          # page order
    assert a == b
    assert sorted(os.listdir(one)) == sorted(os.listdir(two)) == FILES
    assert files(one) == files(two)
    assert all(v[0] == f"{k}.png" for k, v in a.items())


def test_a_figure_the_child_fails_to_draw_is_drawn_by_the_parent(tmp_path):
    plt, plan = montage_plan()
    parent = os.getpid()
    mine, child_share = report.split([k for k, _ in plan])
    assert sorted(mine + child_share) == sorted(SECTIONS) and mine and child_share

    def only_here(draw):
        def drawn_here():
            if os.getpid() != parent:
                raise RuntimeError("the child cannot draw this")
            return draw()
        return drawn_here
    failing = child_share[-1]                 # the child draws the others first, then fails
    broken = [(k, only_here(d) if k == failing else d) for k, d in plan]
    ref = tmp_path / "ref"
    ref.mkdir()
    want = report.draw_figures(plt, str(ref), montage_plan()[1], procs=1)
    got = report.draw_figures(plt, str(tmp_path), broken, procs=2)
    assert got == want
    assert sorted(n for n in os.listdir(tmp_path) if n.endswith(".png")) == FILES
    assert [n for n in os.listdir(tmp_path) if n.startswith(".")] == []      # no temp file left behind


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
