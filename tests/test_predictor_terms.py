"""The refined model's terms (predictor/terms/): each declares its switches, the stage fields and envelope metrics
it uses and gives its formula; together they own every `--refine` name once; predictor/ names no workload."""
import os
import re
from dataclasses import fields

import pytest

from mtcio.db.workflow_model import Stage
from mtcio.predictor import model, terms
from mtcio.predictor.surface import METRICS

PREDICTOR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "predictor")


def test_every_switch_belongs_to_one_term_and_is_on_by_default():
    owned = [s for t in terms.TERMS for s in t.SWITCHES]
    assert sorted(owned) == sorted(set(owned)) == sorted(model.REFINEMENTS)
    assert model.DEFAULT == model.REFINEMENTS and model.OPT_IN == ()
    assert len(terms.TERMS) == 11 and len(model.REFINEMENTS) == 17
    assert terms.owner("stat_cache") is terms.metadata and terms.owner("first_op") is terms.first_op
    assert set(terms.REMOVED) == {"later_share", "later_beyond", "served_overlap", "measured_wait", "later_warm",
                                  "partial_round", "balance", "redirect", "call_gap", "failed_lookups",
                                  "young_reads", "first_slots"}
    assert not set(terms.REMOVED) & set(model.REFINEMENTS)


def _field(path):
    cls, names = Stage, path.split(".")
    for i, n in enumerate(names):
        f = {x.name: x for x in fields(cls)}.get(n)
        if f is None:
            return False
        if i < len(names) - 1:
            cls = f.default_factory
    return True


@pytest.mark.parametrize("term", terms.TERMS, ids=lambda t: t.__name__.rsplit(".", 1)[1])
def test_a_term_declares_what_it_uses(term):
    assert term.__doc__ and len(term.__doc__.splitlines()) >= 3
    assert all(f"`{s}`" in term.__doc__ or len(term.SWITCHES) == 1 for s in term.SWITCHES)
    bad = [f for f in term.STAGE_FIELDS if not _field(f)]
    assert bad == []
    assert set(term.ENVELOPE_METRICS) <= set(METRICS)
    # a term's code reads only the stage fields it declares
    src = open(term.__file__).read().split('"""', 2)[2]
    read = set(re.findall(r"stage\.((?:read|shared|write|metadata)\.\w+|\w+)", src))
    assert read <= set(term.STAGE_FIELDS) | {"read", "shared", "write", "metadata", "hosts", "tasks"}, \
        read - set(term.STAGE_FIELDS)


def test_the_predictor_names_no_workload_program():
    names = re.compile(r"mProjectPP|mDiff|mFitplane|mImgtbl|mViewer|concatFit|cfitsio|mBackground|mAdd|mShrink|"
                       r"mOverlaps|mBgModel|mMakeHdr")
    hits = []
    for d, _, fs in os.walk(PREDICTOR):
        for f in fs:
            if f.endswith((".py", ".md")):
                with open(os.path.join(d, f)) as fh:
                    hits += [f"{f}:{i}" for i, ln in enumerate(fh, 1) if names.search(ln)]
    assert hits == []
