"""The prediction report's figures as a reader sees them, drawn by matplotlib's renderer: no two text labels over
each other (stage names on the maps, tick labels, legends), every axis with numbers on it (at least two tick
labels), sizes labelled at every size the envelope measured, concurrency as integers, bandwidth in MiB/s."""
import copy

import pytest

from helpers.cli import MONTAGE
from helpers.figcheck import axes_without_tick_labels, overlapping_labels, texts_outside

from mtcio.db.workflow_model import load
from mtcio.predictor import envelope_source, figures
from mtcio.predictor.model import predict_stage
from mtcio.predictor.surface import EnvelopeSurface


def denser(points):
    """The shipped envelope with more sizes, as the demo's quick sweeps measure (4K, 12,000 bytes, 16K, 64K, 256K,
    512K beside 1K, 128K, 1M, 16M): each new size a copy of the points at the measured size below it."""
    extra = (4096, 12000, 16384, 65536, 262144, 524288)
    below = {s: max(m for m in (1024, 131072, 1 << 20) if m <= s) for s in extra}
    return points + [dict(p, file_size=s) for s, m in below.items() for p in points if p["file_size"] == m]


def draw(points):
    """Every figure of the report of the Montage example, with a validation."""
    wf = load(MONTAGE)
    surface = EnvelopeSurface("swung").fit(points)
    preds = [predict_stage(st, surface, v) for st in wf.stages for v in ("faithful", "refined")]
    rows = [p.to_dict() for p in preds]
    # the validation figure needs measured times: the stages' predicted times off by known factors, runs' spread
    for d, f in zip(rows, (1.3, 0.8, 1.1, 0.95, 2.0, 0.5, 1.02, 1.4)):
        d["measured_s"], d["noise_pct"] = d["total_s"] / f, 12.0
    what_if = [dict(r, what_if=w) for w in ("hosts=4", "hosts=8") for r in copy.deepcopy(rows[1::2])]
    result = {"predictions": rows, "what_if": what_if}
    plt = figures.pyplot()
    return {key: made[1] for key, made in figures.build(plt, result, wf, surface, preds) if made}


@pytest.fixture(scope="module", params=["shipped", "denser"])
def drawn(request):
    points = envelope_source.load(None).points
    figs = draw(points if request.param == "shipped" else denser(points))
    yield figs
    for f in figs.values():
        figures.pyplot().close(f)


def test_every_figure_is_drawn(drawn):
    assert sorted(drawn) == ["dominant", "envelope", "maps", "parity", "stage_time", "whatif"]


@pytest.mark.parametrize("key", ["dominant", "envelope", "maps", "parity", "stage_time", "whatif"])
def test_no_text_label_over_another(drawn, key):
    assert overlapping_labels(drawn[key]) == []


@pytest.mark.parametrize("key", ["dominant", "envelope", "maps", "parity", "stage_time", "whatif"])
def test_no_text_cut_by_the_figure_edge(drawn, key):
    assert texts_outside(drawn[key]) == []


@pytest.mark.parametrize("key", ["dominant", "envelope", "maps", "parity", "stage_time", "whatif"])
def test_every_axis_has_tick_labels(drawn, key):
    assert axes_without_tick_labels(drawn[key]) == []


def test_axes_units_and_ticks():
    drawn = draw(envelope_source.load(None).points)
    maps = [ax for ax in drawn["maps"].axes if ax.get_title()]
    assert len(maps) == 4
    for ax in maps:
        assert ax.get_xlabel() == "file size (bytes)"
        assert [t.get_text() for t in ax.get_yticklabels()] == ["1", "2", "4", "8", "16", "32"]
        assert {"1K", "128K", "1M", "16M"} <= {t.get_text() for t in ax.get_xticklabels()}
    bars = [ax for ax in drawn["maps"].axes if not ax.get_title()]
    assert [ax.get_ylabel() for ax in bars] == ["predicted bandwidth (MiB/s)"] * 4
    env = {ax.get_title(): ax for ax in drawn["envelope"].axes if ax.get_title()}
    assert env["B1L, measured on 4 hosts"].get_ylabel() == "MiB/s"
    assert env["T1L, measured on 4 hosts"].get_ylabel() == "ops/s"
    assert [t.get_text() for t in env["T1L, measured on 4 hosts"].get_xticklabels()] == ["1K", "16K", "128K", "1M", "16M"]
    assert [t.get_text() for t in env["Tm, measured on 4 hosts"].get_xticklabels()] == ["4", "8", "16", "32"]
    legend = drawn["maps"].legends[0]          # one for the four maps: every stage once
    assert [t.get_text() for t in legend.get_texts()] == ["mProjectPP", "mDiff", "mBackground", "mAdd"]
    for f in drawn.values():
        figures.pyplot().close(f)


def test_sizes_too_near_for_labels_keep_a_tick_mark():
    labelled, marked = figures.size_ticks(1000, 2e7, [1024, 4096, 12000, 16384, 131072, 1 << 20, 1 << 24], 300)
    assert labelled == [1024, 4096, 16384, 131072, 1 << 20, 1 << 24] and marked == [12000]
    assert figures.size_ticks(1000, 2e7, [1024, 131072, 1 << 20, 1 << 24], 400)[0] == [
        1024, 16384, 131072, 1 << 20, 1 << 24]


def test_the_checks_find_overlap_and_a_bare_axis():
    plt = figures.pyplot()
    fig, ax = plt.subplots()
    ax.plot([1, 2], [1, 2])
    ax.annotate("mDiff, mProjectPP", (1.5, 1.5))
    ax.annotate("mBackground", (1.5, 1.5))
    ax.set_yticks([])
    try:
        assert overlapping_labels(fig) == [("mDiff, mProjectPP", "mBackground")]
        assert axes_without_tick_labels(fig) == ["axes: y axis shows []"]
        assert texts_outside(fig) == []
        ax.set_ylabel("a label pushed off the figure", labelpad=200)
        assert texts_outside(fig) == ["a label pushed off the figure"]
    finally:
        plt.close(fig)
