"""The prediction report's figures as a reader sees them, drawn by matplotlib's renderer: no two text labels over
each other (stage names on the maps, tick labels, legends), every axis with numbers on it (at least two tick
labels), sizes labelled at every size the envelope measured, concurrency as integers, bandwidth in MiB/s."""
import copy

import pytest

from helpers.cli import MONTAGE
from helpers.figcheck import axes_without_tick_labels, overlapping_labels

from mtcio.db.workflow_model import load
from mtcio.predictor import envelope_source, figures
from mtcio.predictor.model import predict_stage
from mtcio.predictor.surface import EnvelopeSurface


@pytest.fixture(scope="module")
def drawn():
    """Every figure of the report of the Montage example on the shipped envelope, with a validation."""
    wf = load(MONTAGE)
    env = envelope_source.load(None)
    surface = EnvelopeSurface("swung").fit(env.points)
    preds = [predict_stage(st, surface, v) for st in wf.stages for v in ("faithful", "refined")]
    rows = [p.to_dict() for p in preds]
    # the validation figure needs measured times: the stages' predicted times off by known factors, runs' spread
    for d, f in zip(rows, (1.3, 0.8, 1.1, 0.95, 2.0, 0.5, 1.02, 1.4)):
        d["measured_s"], d["noise_pct"] = d["total_s"] / f, 12.0
    what_if = [dict(r, what_if=w) for w in ("hosts=4", "hosts=8") for r in copy.deepcopy(rows[1::2])]
    result = {"predictions": rows, "what_if": what_if}
    plt = figures.pyplot()
    figs = {key: made[1] for key, made in figures.build(plt, result, wf, surface, preds) if made}
    yield figs
    for f in figs.values():
        plt.close(f)


def test_every_figure_is_drawn(drawn):
    assert sorted(drawn) == ["dominant", "envelope", "maps", "parity", "stage_time", "whatif"]


@pytest.mark.parametrize("key", ["dominant", "envelope", "maps", "parity", "stage_time", "whatif"])
def test_no_text_label_over_another(drawn, key):
    assert overlapping_labels(drawn[key]) == []


@pytest.mark.parametrize("key", ["dominant", "envelope", "maps", "parity", "stage_time", "whatif"])
def test_every_axis_has_tick_labels(drawn, key):
    assert axes_without_tick_labels(drawn[key]) == []


def test_axes_units_and_ticks(drawn):
    maps = [ax for ax in drawn["maps"].axes if ax.get_title()]
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
    finally:
        plt.close(fig)
