"""The prediction formulas and the envelope surface, on envelopes whose values are chosen by hand."""
import math
import random
import re

import pytest

from mtcio.db.workflow_model import Dist, Metadata, Read, Shared, Stage, Write
from mtcio.predictor import formulas
from mtcio.predictor.model import DEFAULT, REFINEMENTS, predict_stage
from mtcio.predictor.predict import check_metrics, parse_refine, predict_workflow
from mtcio.predictor.surface import EnvelopeError, EnvelopeSurface, grid_values
from mtcio.predictor.whatif import apply

KiB, MiB = 1 << 10, 1 << 20

# the paper's case: mProjectPP, N = 955, C = 8, D = 4.2 MB; envelope values chosen for hand arithmetic
N, C, D = 955, 8, 4.2e6
Tm, TL, BL = 1000.0, 100.0, 4e8
T1L, B1L, T1R, B1R, TN, BN = 200.0, 5e8, 100.0, 2e8, 2000.0, 1e9


def test_rounds():
    assert formulas.rounds(955, 8) == 120          # 119 full rounds and one of 3 tasks
    assert formulas.rounds(16, 8) == 2
    assert formulas.rounds(3, 8) == 1
    with pytest.raises(ValueError):
        formulas.rounds(3, 0)


def test_seed_write_equations_by_hand():
    # (1): 120 * (1/1000 + 8 * 4.2e6 / 4e8) = 120 * 0.085
    assert formulas.write_bandwidth_bound(N, C, D, Tm, BL) == pytest.approx(10.2, rel=1e-12)
    # (2): 120 * (1/1000 + 8/100) = 120 * 0.081
    assert formulas.write_throughput_bound(N, C, Tm, TL) == pytest.approx(9.72, rel=1e-12)
    terms, bound = formulas.write_terms(C, D, Tm, TL, BL)
    assert bound == "bandwidth" and terms == {"meta": 0.001, "write": pytest.approx(0.084)}
    # N a multiple of C, and C > N (one round, still charged for C ops: the equation as written)
    assert formulas.write_throughput_bound(16, 8, Tm, TL) == pytest.approx(2 * 0.081)
    assert formulas.write_throughput_bound(3, 8, Tm, TL) == pytest.approx(0.081)


def test_seed_read_equation_by_hand():
    Din, D_N, a = 2.1e6, 300, 0.94
    local = max(a * C / T1L, C * a * Din / B1L)           # 0.0376 (throughput-bound)
    remote = max((1 - a) * C / T1R, C * (1 - a) * Din / B1R)   # 0.00504 (bandwidth-bound)
    shared = max(C / TN, C * D_N / BN)                     # 0.004 (a 300-byte header: throughput-bound)
    assert (local, remote, shared) == pytest.approx((0.0376, 0.00504, 0.004))
    got = formulas.read_time(N, C, a, Din, D_N, T1L, B1L, T1R, B1R, TN, BN)
    assert got == pytest.approx(120 * 0.04664, rel=1e-12)
    # no shared input: the third term is absent
    assert formulas.read_time(N, C, 1.0, Din, 0, T1L, B1L, None, None, None, None) == \
        pytest.approx(120 * max(C / T1L, C * Din / B1L))


def _pts(metric, table, hosts=8, ppn=1, repeats=(1.0,)):
    """Points from {size: value} (value per repeat scaled by the factors in `repeats`)."""
    return [{"metric": metric, "file_size": s, "hosts": hosts, "procs_per_host": ppn, "value": v * f, "ok": True,
             "repeat": r} for s, v in table.items() for r, f in enumerate(repeats)]


def seed_envelope():
    """One concurrency (8 hosts x 1): T at 1 KiB and B at 16 MiB are the roofline the faithful model reads."""
    pts = _pts("Tm", {0: Tm})
    for t, b, tv, bv in (("TL", "BL", TL, BL), ("T1L", "B1L", T1L, B1L), ("T1R", "B1R", T1R, B1R),
                         ("TN", "BN", TN, BN)):
        pts += _pts(t, {KiB: tv, 16 * MiB: bv / (16 * MiB)})
        pts += _pts(b, {KiB: tv * KiB, 16 * MiB: bv})
    return EnvelopeSurface().fit(pts)


def seed_stage(**kw):
    st = Stage(name="mProjectPP", tasks=N, hosts=C, procs_per_host=1,
               read=Read(bytes_per_task=Dist(2.1e6, 2.1e6, 2.1e6), files_per_task=1,
                         file_size=Dist(2.1e6, 2.1e6, 2.1e6), alpha=0.94),
               shared=Shared(files=1, bytes=300, bytes_read_per_task=300),
               write=Write(bytes_per_task=Dist(D, D, D), files_per_task=1, file_size=Dist(D, D, D)),
               metadata=Metadata(ops_per_task=3, creates_per_task=1))
    for k, v in kw.items():
        setattr(st, k, v)
    return st


def test_faithful_stage_is_the_equations():
    p = predict_stage(seed_stage(), seed_envelope(), "faithful")
    assert p.rounds == 120 and p.slots == 8
    assert p.meta_s + p.write_s == pytest.approx(max(10.2, 9.72), rel=1e-9)
    assert p.write_bound == "bandwidth (1)"
    assert p.read_s == pytest.approx(120 * 0.04664, rel=1e-9)
    assert p.bounds == {"write": "bandwidth", "meta": "metadata", "read_local": "op throughput",
                        "read_remote": "bandwidth", "read_shared": "op throughput"}
    assert p.dominant == "write / bandwidth"
    assert {lk["source"] for lk in p.lookups.values()} == {"measured"}
    # a throughput-bound write: (2) applied and reported
    small = seed_stage(write=Write(bytes_per_task=Dist(1e5, 1e5, 1e5), files_per_task=1))
    q = predict_stage(small, seed_envelope(), "faithful")
    assert q.write_bound == "throughput (2)" and q.meta_s + q.write_s == pytest.approx(9.72)


def sqrt_points(write_factor=1.0):
    """T(k) = 10 * sqrt(k) ops/s at every size (B = T x size), Tm(k) = 100 k; k = 1, 2, 4; writes x write_factor."""
    pts = []
    for ppn in (1, 2):
        for h in (1, 2):
            k = h * ppn
            for t, b in (("TL", "BL"), ("T1L", "B1L"), ("T1R", "B1R"), ("TN", "BN")):
                f = write_factor if t == "TL" else 1.0
                pts += _pts(t, {KiB: 10 * math.sqrt(k) * f, MiB: 10 * math.sqrt(k) * f}, h, ppn)
                pts += _pts(b, {KiB: 10 * math.sqrt(k) * f * KiB, MiB: 10 * math.sqrt(k) * f * MiB}, h, ppn)
            pts += _pts("Tm", {0: 100 * k}, h, ppn)
    return pts


def sqrt_envelope(hosts=2):
    return EnvelopeSurface().fit([p for p in sqrt_points() if p["hosts"] == hosts or hosts is None])


def stat_envelope():
    """sqrt_envelope with a stat rate: Ts(k) = 1000 k."""
    return EnvelopeSurface().fit(sqrt_points() + [p for ppn in (1, 2) for h in (1, 2)
                                                   for p in _pts("Ts", {0: 1000.0 * h * ppn}, h, ppn)])


def write_stage(n=10, hosts=2, ppn=2, files=1):
    return Stage(name="w", tasks=n, hosts=hosts, procs_per_host=ppn,
                 write=Write(bytes_per_task=Dist(MiB * files, MiB * files, MiB * files), files_per_task=files,
                             file_size=Dist(MiB, MiB, MiB)),
                 metadata=Metadata(ops_per_task=files, creates_per_task=files))


def test_refined_rounds_by_hand():
    surf = sqrt_envelope(hosts=None)
    # 10 tasks on 4 slots: ceil(10/4) = 3 rounds at k = 4 (4 / 20 s per task), the last one too
    p = predict_stage(write_stage(), surf, "refined", REFINEMENTS)
    assert (p.slots, p.rounds) == (4, 3)
    assert p.write_s == pytest.approx(3 * 4 / 20, rel=1e-9)
    assert p.meta_s == 0.0                       # the create is inside the write op
    # without slots: one task per node, 5 rounds at k = 2
    r = predict_stage(write_stage(), surf, "refined", set(REFINEMENTS) - {"slots"})
    assert (r.slots, r.rounds) == (2, 5) and r.write_s == pytest.approx(5 * 2 / (10 * math.sqrt(2)))
    # several files per task: 3 ops of 1 MiB each per task
    f = predict_stage(write_stage(files=3), surf, "refined", REFINEMENTS)
    assert f.write_s == pytest.approx(3 * 3 * 4 / 20, rel=1e-9)
    # S > N: one round, at the I/O concurrency k = S (as the paper's C > N)
    c = predict_stage(write_stage(n=1, hosts=2, ppn=2), surf, "refined", REFINEMENTS)
    assert c.rounds == 1 and c.write_s == pytest.approx(4 / 20)


def test_refined_io_overlap_and_metadata():
    surf = sqrt_envelope(hosts=None)
    st = write_stage(n=8)
    p = predict_stage(st, surf, "refined", REFINEMENTS, io_concurrency=2.0)
    assert p.k == 2.0 and p.write_s == pytest.approx(2 * 2 / (10 * math.sqrt(2)))
    assert any("I/O concurrency 2" in n for n in p.notes)
    st.metadata = Metadata(ops_per_task=4, creates_per_task=1)      # 3 stats/opens besides the write
    m = predict_stage(st, surf, "refined", REFINEMENTS)
    assert m.meta_s == pytest.approx(2 * 4 * 3 / 400) and m.bounds["meta"] == "metadata"
    faithful_meta = predict_stage(st, surf, "refined", set(REFINEMENTS) - {"metadata"})
    assert faithful_meta.meta_s == pytest.approx(2 / 400)          # one create per round, as in (1)/(2)


def test_repeats_average_as_the_time_per_op():
    """gfarm2fs stalls ~45 ms now and then: one fast repeat must not make a cell look fast."""
    pts = [{"metric": "TL", "file_size": 256 * KiB, "hosts": 1, "procs_per_host": 1, "value": v, "ok": True,
            "repeat": r} for r, v in enumerate((140.0, 21.0, 20.0))]
    lk = EnvelopeSurface().fit(pts).value("TL", 256 * KiB, 1, 1)
    assert lk.value == pytest.approx(3 / (1 / 140 + 1 / 21 + 1 / 20), rel=1e-12)    # 28.6, not 60.3
    # of five or more, one stalled repeat counts as the next slowest; a second one stays
    five = lambda vs, how="swung": EnvelopeSurface(how).fit(  # noqa: E731
        [dict(pts[0], value=v, repeat=r) for r, v in enumerate(vs)])
    assert five((829.0, 28.0, 984.0, 997.0, 588.0)).value("TL", 256 * KiB, 1, 1).value == pytest.approx(
        5 / (1 / 984 + 1 / 997 + 1 / 829 + 2 / 588), rel=1e-12)
    assert five((829.0, 28.0, 984.0, 997.0, 30.0), "mean").value("TL", 256 * KiB, 1, 1).value == pytest.approx(
        5 / (1 / 984 + 1 / 997 + 1 / 829 + 2 / 30), rel=1e-12)
    # by default two slow repeats of five, their quartiles 30 and 984, swung: the upper quartile
    assert five((829.0, 28.0, 984.0, 997.0, 30.0)).value("TL", 256 * KiB, 1, 1).value == pytest.approx(984.0)



def test_cell_rate_quartile_reads_a_point_at_its_quick_repeats():
    """cell_rate "swung" (the default): the upper quartile (nearest rank) only where 5 or more repeats' quartiles
    are > 2x apart; "quartile": of every point of 5 or more; "mean": never; a bootstrap replicate keeps the way."""
    def surf(vs, how):
        return EnvelopeSurface(how).fit([{"metric": "TL", "file_size": KiB, "hosts": 1, "procs_per_host": 1,
                                          "value": v, "ok": True, "repeat": r} for r, v in enumerate(vs)])
    slow_minutes = (157.0, 757.0, 354.0, 167.0, 213.0)      # one point of a pass whose envelope swung (AJ)
    assert surf(slow_minutes, "quartile").value("TL", KiB, 1, 1).value == pytest.approx(354.0, rel=1e-12)
    assert surf(slow_minutes, "mean").value("TL", KiB, 1, 1).value == pytest.approx(
        5 / (2 / 167 + 1 / 213 + 1 / 354 + 1 / 757), rel=1e-12)    # the slowest as the next slowest: 241
    ten = tuple(float(v) for v in range(100, 1100, 100))
    assert surf(ten, "quartile").value("TL", KiB, 1, 1).value == pytest.approx(800.0, rel=1e-12)  # rank 7 of 0..9
    three = (140.0, 21.0, 20.0)
    assert surf(three, "quartile").value("TL", KiB, 1, 1).value == pytest.approx(3 / (1 / 140 + 1 / 21 + 1 / 20))
    for seed in range(5):   # a resample's quartile is one of the repeats, its mean almost never
        rep = surf(slow_minutes, "quartile").replicate(random.Random(seed))
        v = rep.value("TL", KiB, 1, 1).value
        assert rep.cell_rate == "quartile" and min(abs(v - x) for x in slow_minutes) < 1e-9
    assert surf(slow_minutes, "swung").value("TL", KiB, 1, 1).value == pytest.approx(354.0, rel=1e-12)
    steady = (20.0, 300.0, 320.0, 340.0, 360.0)            # one stall; quartiles 300 and 340: the mean
    assert surf(steady, "swung").value("TL", KiB, 1, 1).value == pytest.approx(
        surf(steady, "mean").value("TL", KiB, 1, 1).value, rel=1e-12)
    assert EnvelopeSurface().cell_rate == "swung"
    with pytest.raises(ValueError, match="one of swung, mean, quartile"):
        EnvelopeSurface("median")

def test_interpolation_exact_monotone_and_extrapolation_warned():
    pts = []
    for ppn, kv in ((1, 1.0), (2, 1.6), (4, 2.2)):
        pts += _pts("TL", {KiB: 300 * kv, 64 * KiB: 200 * kv, MiB: 40 * kv}, 4, ppn, repeats=(0.9, 1.0, 1.1))
    s = EnvelopeSurface().fit(pts)
    H = 3 / (1 / 0.9 + 1 + 1 / 1.1)           # repeats average as times: the harmonic mean of their rates
    for ppn, kv in ((1, 1.0), (2, 1.6), (4, 2.2)):
        for size, v in ((KiB, 300), (64 * KiB, 200), (MiB, 40)):
            lk = s.value("TL", size, 4 * ppn, 4)
            assert lk.source == "measured" and lk.value == pytest.approx(v * kv * H, rel=1e-12)
    prev = None
    for i in range(101):                      # along size at k = 6: monotone between 64 KiB and 1 MiB
        size = 64 * KiB * (16 ** (i / 100))
        v = s.value("TL", size, 6, 4).value
        assert 40 <= v <= 200 * 1.6
        assert prev is None or v <= prev + 1e-9
        prev = v
    prev = None
    for i in range(101):                      # along k at 64 KiB: monotone between 4 and 16
        v = s.value("TL", 64 * KiB, 4 * 4 ** (i / 100), 4).value
        assert prev is None or v >= prev - 1e-9
        prev = v
    assert s.value("TL", 64 * KiB, 6, 4).source == "interpolated"
    out = s.value("TL", 16 * MiB, 4, 4)
    assert out.source == "extrapolated" and "16x the largest measured 1 MiB" in out.note
    assert out.value == pytest.approx(40 * H / 16)      # bandwidth held: T = T(1 MiB) x 1 MiB / 16 MiB
    far = s.value("TL", 64 * KiB, 64, 4)
    assert far.source == "extrapolated" and "concurrency 64 is 4x the largest measured 16" in far.note
    small = s.value("TL", 100, 4, 4)
    assert small.source == "clamped" and small.value == pytest.approx(300 * H)
    assert s.value("TL", 100, 4, 4, clamp_small=False).source == "extrapolated"
    # the array form agrees with the scalar one everywhere, inside and outside
    import numpy as np
    sizes, ks = np.array([100.0, KiB, 5000.0, MiB, 4 * MiB]), np.array([1.0, 4.0, 7.0, 16.0, 40.0])
    G = grid_values(s, "TL", sizes, ks, 4)
    for i, k in enumerate(ks):
        for j, size in enumerate(sizes):
            assert G[i, j] == pytest.approx(s.value("TL", size, k, 4).value, rel=1e-9)


def test_missing_metric_is_named():
    s = EnvelopeSurface().fit(_pts("TL", {KiB: 100}) + _pts("BL", {KiB: 100 * KiB}) + _pts("Tm", {0: 10}))
    with pytest.raises(EnvelopeError, match="no ok point of metric T1R"):
        s.value("T1R", KiB, 8)
    from mtcio.db.workflow_model import Workflow
    wf = Workflow(stages=[seed_stage()])
    with pytest.raises(EnvelopeError, match=r"stage mProjectPP: the envelope has no ok point of B1L, B1R, BN, T1L, "
                                            r"T1R, TN"):
        check_metrics(wf, s)


def test_intervals_cover_the_prediction_and_widen_with_spread():
    tight = EnvelopeSurface().fit([p for p in _pts("TL", {KiB: 100, MiB: 50}, 8, 1, (0.99, 1.0, 1.01))] +
                                  _pts("BL", {KiB: 100 * KiB, MiB: 50 * MiB}, 8, 1, (0.99, 1.0, 1.01)) +
                                  _pts("Tm", {0: 1000}, 8, 1, (0.99, 1.0, 1.01)))
    wide = EnvelopeSurface().fit([p for p in _pts("TL", {KiB: 100, MiB: 50}, 8, 1, (0.7, 1.0, 1.3))] +
                                 _pts("BL", {KiB: 100 * KiB, MiB: 50 * MiB}, 8, 1, (0.7, 1.0, 1.3)) +
                                 _pts("Tm", {0: 1000}, 8, 1, (0.7, 1.0, 1.3)))
    from mtcio.db.workflow_model import Workflow
    st = write_stage(n=64, hosts=8, ppn=1)
    wf = Workflow(stages=[st])
    (pt,) = predict_workflow(wf, tight, ("refined",), bootstrap=200)
    (pw,) = predict_workflow(wf, wide, ("refined",), bootstrap=200)
    for p in (pt, pw):
        assert p.interval[0] <= p.total_s <= p.interval[1]
    assert (pw.interval[1] - pw.interval[0]) > 5 * (pt.interval[1] - pt.interval[0])


def test_the_interval_of_a_one_op_stage_spans_its_stall():
    """A stage of one 1 MiB write, on an envelope whose five repeats there stalled once (10 ops/s against 100):
    the point prediction is the winsorized mean (no stall), and one run's interval reaches the stall (0.1 s),
    about one replicate in five; the mean's bootstrap (faithful: two or more stalls drawn of five) stays under
    it. A stage of 64 such writes per slot averages its stalls out: its interval is the mean's, from the point
    prediction up."""
    from mtcio.db.workflow_model import Workflow
    reps = (1.0, 1.0, 0.1, 1.0, 1.0)
    surf = EnvelopeSurface().fit(_pts("TL", {MiB: 100.0}, 1, 1, reps) + _pts("BL", {MiB: 100.0 * MiB}, 1, 1, reps)
                                 + _pts("Tm", {0: 1000.0}, 1, 1, reps))
    one = write_stage(n=1, hosts=1, ppn=1)
    (p, f) = predict_workflow(Workflow(stages=[one]), surf, ("refined", "faithful"), bootstrap=400)
    assert p.total_s == pytest.approx(0.01, rel=1e-9) and p.ops_per_slot == {"TL": 1.0}
    assert p.interval[0] == pytest.approx(0.01, rel=1e-9) and p.interval[1] == pytest.approx(0.1, rel=1e-9)
    assert f.interval[1] < 0.07
    many = write_stage(n=64, hosts=1, ppn=1)
    (q,) = predict_workflow(Workflow(stages=[many]), surf, ("refined",), bootstrap=400)
    assert q.ops_per_slot == {"TL": 64.0}
    assert q.total_s == pytest.approx(0.64) == q.interval[0] and q.interval[1] < 64 * 0.1


def test_parse_refine():
    assert parse_refine("all") == set(REFINEMENTS) and parse_refine("none") == set()
    default = set(REFINEMENTS)          # every refinement (the refuted opt-in ones are deleted)
    assert parse_refine(None) == parse_refine("default") == default
    assert parse_refine("-io_overlap,-metadata") == default - {"io_overlap", "metadata"}
    for gone in ("later_share", "later_beyond", "served_overlap", "measured_wait", "later_warm"):
        with pytest.raises(ValueError, match=f"--refine: refinement '{gone}' was removed"):
            parse_refine(f"-metadata,+{gone}")
        with pytest.raises(ValueError, match=f"refinement '{gone}' was removed"):
            predict_stage(write_stage(), sqrt_envelope(), "refined", set(REFINEMENTS) | {gone})
    for gone in ("partial_round", "balance", "redirect", "call_gap", "failed_lookups", "young_reads", "first_slots"):
        said = re.escape(f"refinement '{gone}' was removed by the ablation (docs/experiments/ablation.md)")
        with pytest.raises(ValueError, match=f"^--refine: {said}$"):
            parse_refine(f"-metadata,+{gone}")
        with pytest.raises(ValueError, match=f"^{said}$"):
            predict_stage(write_stage(), sqrt_envelope(), "refined", set(REFINEMENTS) | {gone})
    assert parse_refine("-wait_ratio") == default - {"wait_ratio"}
    assert parse_refine("slots") == {"slots"}
    with pytest.raises(ValueError, match="unknown refinement 'slotz'"):
        parse_refine("slotz")


def test_io_concurrency_from_windows():
    from mtcio.db.overlap import io_concurrency
    s = 1_000_000_000
    assert io_concurrency([(0, s, 1.0), (0, s, 1.0)]) == pytest.approx(2.0)        # both in I/O all along
    assert io_concurrency([(0, s, 1.0), (2 * s, 3 * s, 1.0)]) == pytest.approx(1.0)  # one after the other
    assert io_concurrency([(0, s, 0.5)]) == pytest.approx(1.0)
    # two tasks, each in I/O half of one shared window: 1 s of I/O over 0.75 s with any in I/O
    assert io_concurrency([(0, s, 0.5), (0, s, 0.5)]) == pytest.approx(1 / 0.75)
    assert io_concurrency([(0, s, 0.0)]) is None and io_concurrency([]) is None


def test_cpu_load_from_windows():
    """L = what computes beside a task's I/O on its host: others' windows x (1 - their I/O density)."""
    from mtcio.db.overlap import CpuLoad
    s = 1_000_000_000
    x = ("a", 0, s, 0.5)                                  # in I/O half of its second
    everyone = [x, ("a", 0, s, 0.0), ("b", 0, s, 0.0)]    # a task computing all along beside it; one elsewhere
    assert CpuLoad(everyone).stage([x]) == pytest.approx(1.0)
    assert CpuLoad([x, ("a", s // 2, 3 * s // 2, 0.0)]).stage([x]) == pytest.approx(0.5)   # half its window
    assert CpuLoad([x, ("a", 0, s, 0.25)]).stage([x]) == pytest.approx(0.75)               # computing 3/4
    assert CpuLoad([x]).stage([x]) == pytest.approx(0.0)                                    # its own compute
    y = ("a", 0, s, 0.25)                   # two tasks of the stage, weighted by their I/O time
    assert CpuLoad([x, y]).stage([x, y]) == pytest.approx((0.5 * 0.75 + 0.25 * 0.5) / 0.75)
    assert CpuLoad(everyone).stage([("a", 0, s, 0.0)]) is None


def test_cpu_load_blends_toward_the_envelope_measured_beside_computing_processes():
    idle = sqrt_envelope(hosts=None)                      # 1 MiB calls: T = 10 sqrt(k)
    loaded = EnvelopeSurface().fit(sqrt_points(write_factor=0.5))
    loaded.hogs, loaded.block = 1, 2880    # writes 2x slower beside 1 computing process per host, reads the same
    idle.others = [loaded]
    st = write_stage(n=4)                                 # one round on 4 slots, k = 4: 4 / 20 s idle
    st.write.bytes_per_call = 2880         # call_size must not take the loaded envelope for a small-call one
    st.read = Read(bytes_per_task=Dist(MiB, MiB, MiB), files_per_task=1, file_size=Dist(MiB, MiB, MiB), alpha=1.0)
    p0 = predict_stage(st, idle, "refined")
    assert p0.write_s == pytest.approx(4 / 20) and p0.read_s == pytest.approx(4 / 20)
    st.cpu_load = 0.5                      # half way: time per op (1/20 + 1/10) / 2
    p = predict_stage(st, idle, "refined")
    assert p.write_s == pytest.approx(4 * 0.075) and p.read_s == pytest.approx(4 / 20)
    assert any("CPU load: 0.5 tasks per host" in n and "50%" in n for n in p.notes)
    assert any(n.startswith("TL@") and n.endswith(",load=1") for n in p.lookups)
    st.cpu_load = 3.0                      # beyond the loaded envelope's load: held at it
    assert predict_stage(st, idle, "refined").write_s == pytest.approx(4 / 10)
    assert predict_stage(st, idle, "refined", set(REFINEMENTS) - {"cpu_load"}).write_s == pytest.approx(4 / 20)
    idle.others = []                       # no loaded envelope: nothing to blend, no note
    q = predict_stage(st, idle, "refined")
    assert q.write_s == pytest.approx(4 / 20) and not any("CPU load" in n for n in q.notes)
    import random                          # replicates keep the loaded envelope as loaded
    idle.others = [loaded]
    assert [o.hogs for o in idle.replicate(random.Random(1)).others] == [1]


def test_small_write_calls_are_flagged():
    surf = sqrt_envelope(hosts=None)
    st = write_stage()
    st.write.bytes_per_call = 2880
    p = predict_stage(st, surf, "refined")
    assert any("writes in 2,880-byte calls, the envelope's in 1,048,576-byte calls" in n for n in p.notes)
    surf.block = 4096                      # an envelope measured at about the stage's own call size
    assert not any("-byte calls" in n for n in predict_stage(st, surf, "refined").notes)


def test_call_size_picks_the_envelope_nearest_each_terms_calls():
    big = sqrt_envelope(hosts=None)                       # 1 MiB calls: T = 10 sqrt(k)
    small = EnvelopeSurface().fit(sqrt_points(write_factor=0.25))
    small.block = 2880                                    # the same file system, writes 4x slower in small calls
    big.others = [small]
    st = write_stage(n=4)                                 # one round on 4 slots, k = 4
    st.read = Read(bytes_per_task=Dist(MiB, MiB, MiB), files_per_task=1, file_size=Dist(MiB, MiB, MiB), alpha=1.0,
                   bytes_per_call=1 << 20)
    st.write.bytes_per_call = 2880
    p = predict_stage(st, big, "refined")
    assert p.write_s == pytest.approx(4 / 20 * 4, rel=1e-9)      # TL/4 from the 2,880-byte envelope
    assert p.read_s == pytest.approx(4 / 20, rel=1e-9)           # reads stay in the 1 MiB one
    assert {lk["block"] for n, lk in p.lookups.items() if n.startswith("TL@")} == {2880}
    assert not any("-byte calls" in n for n in p.notes)          # measured at its call size: nothing to flag
    q = predict_stage(st, big, "refined", set(REFINEMENTS) - {"call_size"})
    assert q.write_s == pytest.approx(4 / 20, rel=1e-9)
    assert any("writes in 2,880-byte calls" in n for n in q.notes)
    # replicates keep one replicate per call size
    import random
    assert len(big.replicate(random.Random(1)).others) == 1


def test_shared_reads_are_the_files_a_task_reads_not_every_shared_file():
    """mDiff-like: 129 shared files of ~531 KB, each task reads 4 of them (2.1 MB): 4 ops of 531 KB, not 129."""
    surf = sqrt_envelope(hosts=None)
    st = Stage(name="diff", tasks=4, hosts=2, procs_per_host=2,
               shared=Shared(files=129, bytes=129 * 531_000, bytes_read_per_task=4 * 531_000))
    p = predict_stage(st, surf, "refined")
    assert p.read_s == pytest.approx(4 * 4 / 20, rel=1e-9)          # one round at k = 4: 4 ops x k / T(k)
    st.shared.files_per_task = 5                                     # the model's own count wins
    assert predict_stage(st, surf, "refined").read_s == pytest.approx(5 * 4 / 20, rel=1e-9)
    # without reread the task reads every shared file once, as in the published N-to-1 term
    q = predict_stage(st, surf, "refined", set(REFINEMENTS) - {"reread"})
    assert q.read_s == pytest.approx(129 * 4 / 20, rel=1e-9)


def notch_write_envelope(notch):
    """One host: writes at 100 ops/s at 1 KiB and 64 KiB and `notch` ops/s at 16 KiB (gfarm2fs's ~45 ms stall
    band), Tm 1000/s."""
    pts = []
    for ppn in (1, 2):
        pts += _pts("TL", {KiB: 100.0, 16 * KiB: notch, 64 * KiB: 100.0}, 1, ppn)
        pts += _pts("BL", {KiB: 100.0 * KiB, 16 * KiB: notch * 16 * KiB, 64 * KiB: 100.0 * 64 * KiB}, 1, ppn)
        pts += _pts("Tm", {0: 1000.0}, 1, ppn)
    return EnvelopeSurface().fit(pts)


def test_size_spread_averages_op_time_over_the_size_distribution():
    """A notch (gfarm2fs: ~45 ms per op from 16 KiB to 64 KiB): files of 16 KiB and 64 KiB mixed 2:3."""
    surf = notch_write_envelope(2.0)
    q = [16 * KiB, 16 * KiB, 64 * KiB, 64 * KiB, 64 * KiB]
    mean = sum(q) / 5
    st = Stage(name="w", tasks=1, hosts=1, procs_per_host=1,
               write=Write(bytes_per_task=Dist(mean, mean, mean), files_per_task=1,
                           file_size=Dist(16 * KiB, mean, 64 * KiB), op_size_quantiles=q),
               metadata=Metadata(ops_per_task=1, creates_per_task=1))
    p = predict_stage(st, surf, "refined")
    assert p.write_s == pytest.approx((2 / 2.0 + 3 / 100.0) / 5, rel=1e-9)     # mean time per op at k = 1
    at_mean = predict_stage(st, surf, "refined", set(REFINEMENTS) - {"size_spread"})
    assert at_mean.write_s == pytest.approx(1 / 2.0, rel=1e-9)   # 44.8 KiB: below the step at 64 KiB, 16 KiB's rate


def test_reopen_charges_every_open_of_a_file():
    """cfitsio opens a FITS file 2-6 times; gfarm2fs drops the page cache at open, so each open fetches again:
    a 26 KB file opened twice is two 26 KB ops; a 512 KiB file opened 4 times is one 512 KiB op (the open that
    reads the data) and 3 of the 128 KiB readahead window (the header reads), not 4 ops of 128 KiB."""
    pts = []
    for ppn in (1, 2):
        T = {KiB: 500.0, 16 * KiB: 20.0, 64 * KiB: 400.0, 128 * KiB: 300.0, 512 * KiB: 100.0}
        pts += _pts("T1L", T, 1, ppn) + _pts("B1L", {s: v * s for s, v in T.items()}, 1, ppn)
        pts += _pts("Tm", {0: 1000.0}, 1, ppn)
    surf = EnvelopeSurface().fit(pts)

    def stage(size, opens):
        return Stage(name="r", tasks=1, hosts=1, procs_per_host=1,
                     read=Read(bytes_per_task=Dist(size, size, size), files_per_task=1, alpha=1.0,
                               file_size=Dist(size, size, size), opens_per_file=opens,
                               op_size_quantiles=[size] * 10),
                     metadata=Metadata(ops_per_task=opens, opens_per_task=opens))
    off = set(REFINEMENTS) - {"reopen"}
    assert predict_stage(stage(26000, 2), surf, "refined").read_s == pytest.approx(2 / 20.0, rel=1e-9)
    one = predict_stage(stage(26000, 2), surf, "refined", off)
    assert one.read_s == pytest.approx(1 / 20.0, rel=1e-9) and one.meta_s == pytest.approx(1 / 1000.0)
    assert predict_stage(stage(512 * KiB, 4), surf, "refined").read_s == pytest.approx(1 / 100.0 + 3 / 300.0,
                                                                                       rel=1e-9)
    assert predict_stage(stage(512 * KiB, 4), surf, "refined", off).read_s == pytest.approx(1 / 100.0, rel=1e-9)
    assert predict_stage(stage(26000, 1), surf, "refined").read_s == pytest.approx(1 / 20.0, rel=1e-9)
    # a small file read whole at each of 2 opens is 2 ops, not 2 x 2 (re-read twice); a big one read 3 times
    # over 4 opens (mViewer: three passes in one open, two header opens) is one op of its size and 3 of the
    # window: the page cache serves what one open reads again; a file read twice in its only open is one op
    both = stage(26000, 2)
    both.read.bytes_per_task, both.read.reread_factor = Dist(52000, 52000, 52000), 2.0
    assert predict_stage(both, surf, "refined").read_s == pytest.approx(2 / 20.0, rel=1e-9)
    big = stage(512 * KiB, 4)
    big.read.bytes_per_task, big.read.reread_factor = Dist(*[3 * 512 * KiB] * 3), 3.0
    assert predict_stage(big, surf, "refined").read_s == pytest.approx(1 / 100.0 + 3 / 300.0, rel=1e-9)
    twice = stage(26000, 1)
    twice.read.bytes_per_task, twice.read.reread_factor = Dist(52000, 52000, 52000), 2.0
    assert predict_stage(twice, surf, "refined").read_s == pytest.approx(1 / 20.0, rel=1e-9)
    # without the size distribution: 4 ops at the mean bytes an open moves, (512 + 3 x 128) / 4 KiB
    mean = stage(512 * KiB, 4)
    mean.read.op_size_quantiles = None
    at = predict_stage(mean, surf, "refined")
    sizes = {lk["size"] for lk in at.lookups.values() if lk["metric"] == "T1L"}
    assert 224 * KiB in sizes and 128 * KiB not in sizes


def test_steps_in_size_hold_the_smaller_sizes_op_rate():
    """A jump of more than 3x beyond the roofline's slopes is a threshold at the larger size."""
    pts = []
    for ppn in (1, 2):
        T = {4 * KiB: 600.0, 12 * KiB: 580.0, 16 * KiB: 22.0, 48 * KiB: 21.0, 64 * KiB: 450.0, MiB: 100.0,
             4 * MiB: 25.0}
        pts += _pts("T1L", T, 1, ppn) + _pts("B1L", {s: v * s for s, v in T.items()}, 1, ppn)
    surf = EnvelopeSurface().fit(pts)
    v = lambda m, s: surf.value(m, s, 1, 1).value  # noqa: E731
    assert v("T1L", 15752) == pytest.approx(580.0)                 # below the step at 16 KiB
    assert v("T1L", 16 * KiB) == pytest.approx(22.0)
    assert v("T1L", 60 * KiB) == pytest.approx(21.0)               # still in the notch until 64 KiB
    assert v("B1L", 60 * KiB) == pytest.approx(21.0 * 60 * KiB)    # bandwidth follows the held op rate
    f = math.log(2) / math.log(3)                                  # 8 KiB between 4 and 12 KiB, in log size
    assert v("T1L", 8 * KiB) == pytest.approx(math.exp(math.log(600) * (1 - f) + math.log(580) * f))
    # 1 MiB -> 4 MiB: op rate / 4 is bandwidth-bound, the roofline's own slope: interpolated, not held
    assert v("T1L", 2 * MiB) == pytest.approx(50.0)
    sizes = [15752, 16 * KiB, 60 * KiB, 8 * KiB, 2 * MiB]
    for m in ("T1L", "B1L"):
        assert list(grid_values(surf, m, sizes, [1.0], 1)[0]) == pytest.approx([v(m, x) for x in sizes])


def test_stats_are_charged_at_the_stat_rate_when_measured():
    st = write_stage(n=4)                              # one round at k = 4
    st.metadata = Metadata(ops_per_task=11, creates_per_task=1, opens_per_task=1, stats_per_task=8)
    no_ts = predict_stage(st, sqrt_envelope(hosts=None), "refined")
    assert no_ts.meta_s == pytest.approx(4 * 10 / 400, rel=1e-9)       # 10 extra ops at Tm(4) = 400/s
    assert "the envelope has no stat rate (Ts): stats charged as creates (Tm)" in no_ts.notes
    p = predict_stage(st, stat_envelope(), "refined")
    assert p.meta_s == pytest.approx(4 * (8 / 4000 + 2 / 400), rel=1e-9)   # 8 stats at Ts(4), 2 opens at Tm(4)
    assert any(n.startswith("Ts@-,k=4") for n in p.lookups)


def test_warm_reads_of_the_runs_own_outputs():
    st = Stage(name="r", tasks=4, hosts=2, procs_per_host=2,
               read=Read(bytes_per_task=Dist(MiB, MiB, MiB), files_per_task=1, file_size=Dist(MiB, MiB, MiB),
                         alpha=1.0, warm_fraction=0.5))
    cold = sqrt_envelope(hosts=None)
    assert predict_stage(st, cold, "refined").read_s == pytest.approx(4 / 20, rel=1e-9)   # no warm envelope
    warm = EnvelopeSurface().fit([dict(p, value=p["value"] * 4) for p in sqrt_points()])
    warm.cold = False                                      # reads served from a page cache: 4x the op rate
    cold.others = [warm]
    p = predict_stage(st, cold, "refined")
    assert p.read_s == pytest.approx(4 / 20 * (0.5 / 4 + 0.5), rel=1e-9)
    assert any(n.endswith(",warm") for n in p.lookups)
    assert predict_stage(st, cold, "refined", set(REFINEMENTS) - {"warm_reads"}).read_s == pytest.approx(4 / 20)
    st.read.warm_fraction = 0.0                            # inputs that existed before the run: cold
    assert predict_stage(st, cold, "refined").read_s == pytest.approx(4 / 20, rel=1e-9)


def test_an_envelope_without_a_terms_metric_is_passed_over():
    big = sqrt_envelope(hosts=None)
    small = EnvelopeSurface().fit([p for p in sqrt_points(write_factor=0.25) if p["metric"] in ("TL", "BL")])
    small.block = 2880                                    # measured with --metrics TL,BL only
    big.others = [small]
    st = write_stage(n=4)
    st.read = Read(bytes_per_task=Dist(MiB, MiB, MiB), files_per_task=1, file_size=Dist(MiB, MiB, MiB), alpha=0.5,
                   bytes_per_call=2880)
    st.write.bytes_per_call = 2880
    p = predict_stage(st, big, "refined")
    assert p.write_s == pytest.approx(4 * 4 / 20, rel=1e-9)      # writes from the 2,880-byte envelope
    assert p.read_s == pytest.approx(4 / 20, rel=1e-9)           # reads (local and remote) from the one that has them


def test_first_op_of_a_process_costs_more_than_its_next():
    one = EnvelopeSurface().fit(sqrt_points())            # one file per process: T = 10 sqrt(k)
    one.ops_per_proc = 1
    many = EnvelopeSurface().fit([dict(p, value=p["value"] * 2.5) for p in sqrt_points()])
    many.ops_per_proc = 16                                 # 16 files per process: 2.5x the op rate
    st = Stage(name="r", tasks=4, hosts=2, procs_per_host=2,
               read=Read(bytes_per_task=Dist(10 * KiB, 10 * KiB, 10 * KiB), files_per_task=10,
                         file_size=Dist(KiB, KiB, KiB), alpha=1.0))
    base = predict_stage(st, one, "refined").read_s         # no many-file envelope: every op a first one
    assert base == pytest.approx(10 * 4 / 20, rel=1e-9)
    one.others = [many]
    assert predict_stage(st, one, "refined").read_s == pytest.approx(base, rel=1e-9)   # files_per_process unknown
    st.files_per_process = 10
    p = predict_stage(st, one, "refined")
    first = 1.0
    nxt = (16 / 2.5 - first) / 15                          # in units of 1/T(k)
    assert p.read_s == pytest.approx(base * (first + 9 * nxt) / 10, rel=1e-9)
    assert any(n.endswith(",files/proc=16") for n in p.lookups)
    assert predict_stage(st, one, "refined", set(REFINEMENTS) - {"first_op"}).read_s == pytest.approx(base)


def test_later_ops_cost_the_difference_of_the_two_envelopes_warm_or_cold():
    """first_op prices a later op (n/Tn - 1/T1)/(n - 1) of the cold pair of envelopes, whatever the many-file
    envelope's first ops' share of its op time (first_op_share in its points' config), and warm reads take the cold
    pair's ratio of later to first ops."""
    def fitted(factor, share=None, cold=True, ops=1):
        cfg = '{"first_op_share": %s}' % share if share is not None else None
        s = EnvelopeSurface().fit([dict(p, value=p["value"] * factor, config=cfg) for p in sqrt_points()])
        s.cold, s.ops_per_proc = cold, ops
        return s
    one, many = fitted(1.0), fitted(2.5, share=0.25, ops=16)
    one.others = [many]
    st = Stage(name="r", tasks=4, hosts=2, procs_per_host=2, files_per_process=10,
               read=Read(bytes_per_task=Dist(10 * KiB, 10 * KiB, 10 * KiB), files_per_task=10,
                         file_size=Dist(KiB, KiB, KiB), alpha=1.0))
    base = 10 * 4 / 20                                     # every op a first one at 1/T(k)
    off = set(REFINEMENTS)
    # the difference of the two envelopes
    assert predict_stage(st, one, "refined").read_s == predict_stage(st, one, "refined", off).read_s == \
        pytest.approx(base * (1 + 9 * (6.4 - 1) / 15) / 10, rel=1e-9)
    # half the bytes warm, beside warm envelopes of one file (1.25x) and of 16 files per process (4x, its first ops
    # 20 % of its time): the first op at the warm one-file envelope
    st.read.warm_fraction = 0.5
    one.others = [many, fitted(1.25, cold=False), fitted(4.0, share=0.2, cold=False, ops=16)]
    # warm reads take the cold envelopes' ratio of later to first ops
    assert predict_stage(st, one, "refined", off).read_s == pytest.approx(
        base * (0.5 * 0.8 + 0.5) * (1 + 9 * (6.4 - 1) / 15) / 10, rel=1e-9)


def test_warm_later_ops_take_the_cold_pairs_ratio_beside_warm_many_file_envelopes():
    """With warm envelopes of 16 files and of one file per process among the envelopes, a warm read's first op is
    the warm one-file envelope's and its later ops take the cold pair's ratio of later to first ops."""
    def fitted(factor, cold=True, ops=1):
        s = EnvelopeSurface().fit([dict(p, value=p["value"] * factor) for p in sqrt_points()])
        s.cold, s.ops_per_proc = cold, ops
        return s
    one = fitted(1.0)
    one.others = [fitted(2.5, ops=16), fitted(1.25, cold=False), fitted(4.0, cold=False, ops=16)]
    st = Stage(name="r", tasks=4, hosts=2, procs_per_host=2, files_per_process=10,
               read=Read(bytes_per_task=Dist(10 * KiB, 10 * KiB, 10 * KiB), files_per_task=10,
                         file_size=Dist(KiB, KiB, KiB), alpha=1.0, warm_fraction=0.5))
    base = 10 * 4 / 20                                     # every op a first one at 1/T(k)
    cold = (1 + 9 * (6.4 - 1) / 15) / 10                   # in units of 1/T(k), as first_op prices them
    assert predict_stage(st, one, "refined").read_s == pytest.approx(        # the cold pair's ratio
        base * (0.5 * 0.8 + 0.5) * cold, rel=1e-9)


def test_a_later_op_beyond_the_many_file_envelopes_sizes_costs_a_first_ones():
    """Beyond the many-file envelope's sizes first_op has no later-op cost: every such op is a first one."""
    def pts(per_size):
        return [p for ppn in (1, 2) for h in (1, 2) for t, b in (("T1L", "B1L"), ("T1R", "B1R"))
                for m, unit in ((t, 1), (b, None))
                for p in _pts(m, {x: v * math.sqrt(h * ppn) * (unit or x) for x, v in per_size.items()}, h, ppn)]
    one = EnvelopeSurface().fit(pts({KiB: 10.0, MiB: 2.5}))     # a 1 MiB op 4x a 1 KiB one's time
    one.ops_per_proc = 1
    many = EnvelopeSurface().fit(pts({KiB: 25.0}))              # 16 files per process, 1 KiB only
    many.ops_per_proc = 16
    one.others = [many]
    st = Stage(name="r", tasks=4, hosts=2, procs_per_host=2, files_per_process=10,
               read=Read(bytes_per_task=Dist(10 * MiB, 10 * MiB, 10 * MiB), files_per_task=10,
                         file_size=Dist(MiB, MiB, MiB), alpha=1.0))
    base = predict_stage(st, one, "refined").read_s            # every 1 MiB op a first one
    assert base == pytest.approx(10 * 4 / (2.5 * 2), rel=1e-9)


def test_alpha_files_splits_the_ops_by_the_files_read_locally():
    """Of 4 files a task reads, 1 local holding 80 % of the bytes: alpha_files charges 1 local op (T1L) and 3
    remote (T1R), where the bytes' alpha charges 3.2 local and 0.8 remote."""
    pts = []
    for ppn in (1, 2):
        for h in (1, 2):
            for t, v in (("T1L", 10.0), ("T1R", 40.0)):
                pts += _pts(t, {KiB: v, MiB: v}, h, ppn) + _pts("B" + t[1:], {KiB: v * KiB, MiB: v * MiB}, h, ppn)
    surf = EnvelopeSurface().fit(pts)
    st = Stage(name="r", tasks=2, hosts=2, procs_per_host=1, io_concurrency=1.0,
               read=Read(bytes_per_task=Dist(4 * KiB, 4 * KiB, 4 * KiB), files_per_task=4,
                         file_size=Dist(KiB, KiB, KiB), alpha=0.8, alpha_files=0.25))
    base = predict_stage(st, surf, "refined", set(DEFAULT) - {"alpha_files"})
    assert base.terms["read_local"] == pytest.approx(3.2 / 10, rel=1e-9)
    assert base.terms["read_remote"] == pytest.approx(0.8 / 40, rel=1e-9)
    p = predict_stage(st, surf, "refined")
    assert p.terms["read_local"] == pytest.approx(1 / 10, rel=1e-9)
    assert p.terms["read_remote"] == pytest.approx(3 / 40, rel=1e-9)
    every = predict_stage(apply(st, [("alpha", ("=", 1.0))]), surf, "refined")    # --what-if alpha=1: all local
    assert (every.terms["read_local"], every.terms["read_remote"]) == (pytest.approx(4 / 10, rel=1e-9), 0.0)
    st.read.alpha_files = None                                           # not in the model: the bytes' alpha
    assert predict_stage(st, surf, "refined").read_s == base.read_s


def test_stat_cache_leaves_the_cached_stats_uncharged():
    """A stat the client's attribute cache serves (~2 us on the testbed) is no request to gfmd: of 8 stats, the
    6 the trace saw cached are not charged, the other 2 are at Ts."""
    st = write_stage(n=4)
    st.metadata = Metadata(ops_per_task=11, creates_per_task=1, opens_per_task=1, stats_per_task=8,
                           stats_cached_fraction=0.75)
    surf = stat_envelope()
    assert predict_stage(st, surf, "refined").meta_s == pytest.approx(4 * (2 / 4000 + 2 / 400), rel=1e-9)
    off = predict_stage(st, surf, "refined", set(REFINEMENTS) - {"stat_cache"})
    assert off.meta_s == pytest.approx(4 * (8 / 4000 + 2 / 400), rel=1e-9)
    no_ts = predict_stage(st, sqrt_envelope(hosts=None), "refined")     # without Ts the rest as creates (Tm)
    assert no_ts.meta_s == pytest.approx(4 * 4 / 400, rel=1e-9)


def test_failed_lookups_are_not_charged():
    """A name looked up and not found (failed_per_task) is not charged since the ablation removed failed_lookups
    (docs/experiments/ablation.md): 3 per task cost nothing, at Ts or at Tm, and no note says them."""
    st = write_stage(n=4)
    st.metadata = Metadata(ops_per_task=1, creates_per_task=1, opens_per_task=1, failed_per_task=3)
    p = predict_stage(st, stat_envelope(), "refined")
    assert p.meta_s == 0.0 and not any("failed" in n for n in p.notes)
    assert p.write_s == predict_stage(write_stage(n=4), stat_envelope(), "refined").write_s
    no_ts = predict_stage(st, sqrt_envelope(hosts=None), "refined")
    assert no_ts.meta_s == 0.0


def test_seeks_to_the_end_are_charged_as_stats():
    """A seek to a file's end asks gfarm2fs for its size (cfitsio's, after each re-open: 0.5-0.8 ms each on the
    testbed): 2 per task at Ts beside 1 failed lookup (not charged), at Tm without a stat rate, nothing when
    turned off."""
    st = write_stage(n=4)
    st.metadata = Metadata(ops_per_task=1, creates_per_task=1, opens_per_task=1, failed_per_task=1,
                           seeks_end_per_task=2)
    surf = stat_envelope()
    p = predict_stage(st, surf, "refined")
    assert p.meta_s == pytest.approx(4 * 2 / 4000, rel=1e-9)
    assert "seeks to the end: 2 per task (the size asked of the file system), each a metadata request" in p.notes
    off = predict_stage(st, surf, "refined", set(REFINEMENTS) - {"seeks_end"})
    assert off.meta_s == 0.0 and not any("seeks" in n for n in off.notes)
    assert off.write_s == p.write_s
    no_ts = predict_stage(st, sqrt_envelope(hosts=None), "refined")
    assert no_ts.meta_s == pytest.approx(4 * 2 / 400, rel=1e-9)


def test_seeks_to_the_end_are_charged_at_the_fstat_rate_when_measured():
    """With Tf (an fstat of a file re-opened after a read, as glibc's fseek to the end asks gfarm2fs) in the
    envelope, seeks to the end are charged at it (the failed lookup not at all), needing no stat rate."""
    st = write_stage(n=4)
    st.metadata = Metadata(ops_per_task=1, creates_per_task=1, opens_per_task=1, failed_per_task=1,
                           seeks_end_per_task=2)
    tf = [p for ppn in (1, 2) for h in (1, 2) for p in _pts("Tf", {0: 500.0 * h * ppn}, h, ppn)]
    p = predict_stage(st, EnvelopeSurface().fit(sqrt_points() + tf + [
        p for ppn in (1, 2) for h in (1, 2) for p in _pts("Ts", {0: 1000.0 * h * ppn}, h, ppn)]), "refined")
    assert p.meta_s == pytest.approx(4 * 2 / 2000, rel=1e-9)
    assert "seeks to the end: 2 per task (the size asked of the file system), each a metadata request at Tf" \
        in p.notes
    no_ts = predict_stage(st, EnvelopeSurface().fit(sqrt_points() + tf), "refined")
    assert no_ts.meta_s == pytest.approx(4 * 2 / 2000, rel=1e-9)
    assert not any("no stat rate" in n for n in no_ts.notes)


def test_a_file_written_twice_weighs_twice():
    """mImgtbl writes its 27 KB table, then writes it again: each write of it is an op (a close in the stall
    band each), weighted by rewrite_factor at every size point."""
    surf = notch_write_envelope(20.0)
    st = Stage(name="w", tasks=1, hosts=1, procs_per_host=1,
               write=Write(bytes_per_task=Dist(54000, 54000, 54000), files_per_task=1,
                           file_size=Dist(27000, 27000, 27000), op_size_quantiles=[27000] * 10,
                           rewrite_factor=2.0),
               metadata=Metadata(ops_per_task=2, creates_per_task=1))
    assert predict_stage(st, surf, "refined").write_s == pytest.approx(2 / 20.0, rel=1e-9)
    st.write.rewrite_factor = None
    assert predict_stage(st, surf, "refined").write_s == pytest.approx(1 / 20.0, rel=1e-9)


def _clocked(pts, share):
    """The points with an engine's op clocks in their config: `share` of 2 s of ops waiting for a CPU."""
    import json
    return [{**p, "config": json.dumps({"op_s": 2.0, "op_wait_s": 2.0 * share})} for p in pts]


def test_the_envelope_is_read_at_the_traced_overlap_and_wait_ratio_charges_the_wait():
    """4 slots whose I/O overlapped 4 deep, 2 deep without the half of it spent waiting for a CPU: the envelope
    is read at the overlap as traced, k = 4, and wait_ratio charges the wait (x 0.8 / 0.5)."""
    surf = EnvelopeSurface().fit(_clocked(sqrt_points(), 0.2))
    st = write_stage(n=4)
    st.io_concurrency, st.io_concurrency_served, st.io_cpu_wait = 4.0, 2.0, 0.5
    assert predict_stage(st, surf, "refined").write_s == pytest.approx(4 / 20 * 0.8 / 0.5)
    assert predict_stage(st, surf, "refined", set(REFINEMENTS) - {"wait_ratio"}).write_s == pytest.approx(4 / 20)
    st.io_concurrency_served = None                       # a model without clocks: the same
    assert predict_stage(st, surf, "refined", REFINEMENTS).k == 4.0


def test_wait_ratio_takes_the_estimated_wait_not_the_one_the_shim_timed():
    """A run whose calls waited 0.5 of their time for a CPU by the estimate and 0.2 as the shim timed them: each
    time per op x 0.8 / 0.5, whether the trace timed the calls or not."""
    surf = EnvelopeSurface().fit(_clocked(sqrt_points(), 0.2))
    st = write_stage(n=4)
    st.io_cpu_wait, st.io_cpu_wait_measured = 0.5, 0.2
    assert predict_stage(st, surf, "refined").write_s == pytest.approx(4 / 20 * 0.8 / 0.5)
    st.io_cpu_wait_measured = None                         # a trace without it: the estimate
    assert predict_stage(st, surf, "refined", REFINEMENTS).write_s == pytest.approx(4 / 20 * 0.8 / 0.5)


def test_wait_share_interpolates_the_points_op_clocks():
    """Sums over a cell's repeats (0.1 of 1 s and 0.5 of 3 s: 0.15), linear in log size x log k between cells,
    held at the grid's edges, a bandwidth metric read from its throughput's points; None without clocks."""
    pts = _pts("TL", {KiB: 10.0, MiB: 5.0}, hosts=2, ppn=1, repeats=(1.0, 1.0))
    pts += _pts("TL", {KiB: 10.0, MiB: 5.0}, hosts=2, ppn=2, repeats=(1.0, 1.0))
    pts += _pts("BL", {KiB: 10.0 * KiB, MiB: 5.0 * MiB}, hosts=2, ppn=1)
    pts += _pts("Tm", {0: 100.0}, hosts=2, ppn=1)
    share = {(KiB, 1): 0.0, (MiB, 1): 0.2, (KiB, 2): 0.4, (MiB, 2): 0.6}
    for p in pts:
        if p["metric"] == "TL":
            w = share[(p["file_size"], p["procs_per_host"])]
            # repeat 0: 1 s of ops, w - 0.05 waiting; repeat 1: 3 s, w + 0.05 / 3 (the cell's sum: w of 4 s)
            p["config"] = ({"op_s": 1.0, "op_wait_s": w - 0.05 if w else 0.0} if p["repeat"] == 0 else
                           '{"op_s": 3.0, "op_wait_s": %r}' % (3 * w + 0.05 if w else 0.0))
    s = EnvelopeSurface().fit(pts)
    assert s.wait_share("TL", KiB, 2, 2) == pytest.approx(0.0, abs=1e-12)
    assert s.wait_share("TL", MiB, 2, 2) == pytest.approx(0.2)
    assert s.wait_share("TL", 32 * KiB, 2, 2) == pytest.approx(0.1)                # half way in log size
    assert s.wait_share("TL", 32 * KiB, 2 * math.sqrt(2), 2) == pytest.approx(0.3)  # and in log k
    assert s.wait_share("TL", 16 * MiB, 8, 2) == pytest.approx(0.6)                # held at the corner
    assert s.wait_share("BL", MiB, 2, 2) == pytest.approx(0.2)
    assert s.wait_share("Tm", 0, 2, 2) is None                                      # no clock in its points
    assert EnvelopeSurface().fit(sqrt_points()).wait_share("TL", MiB, 2, 2) is None


def test_wait_ratio_charges_the_runs_wait_for_a_cpu_in_place_of_the_envelopes():
    """An envelope whose ops waited 20 % of their time for a CPU, a run whose I/O waited 50 %: each time per op
    x 0.8 / 0.5. A loaded twin's share is blended by the same time weights as its rate. Unchanged without the
    run's clock, without the envelope's, or with the refinement off."""
    surf = EnvelopeSurface().fit(_clocked(sqrt_points(), 0.2))
    st = write_stage(n=4)                                 # one round on 4 slots, k = 4: 4 / 20 s
    off = predict_stage(st, surf, "refined", REFINEMENTS)
    assert off.write_s == pytest.approx(4 / 20)
    st.io_cpu_wait = 0.5
    assert predict_stage(st, surf, "refined").write_s == pytest.approx(4 / 20 * 0.8 / 0.5)   # on by default
    p = predict_stage(st, surf, "refined", REFINEMENTS)
    assert p.write_s == pytest.approx(4 / 20 * 0.8 / 0.5)
    assert "CPU wait: this stage's processes waited for a CPU in 50% of their traced I/O time, the envelope's " \
           "in 20% of their ops' time (TL); each time per op x (1 - the envelope's share) / (1 - 0.50)" in p.notes
    assert predict_stage(st, surf, "refined", set(REFINEMENTS) - {"wait_ratio"}).write_s == pytest.approx(4 / 20)
    assert predict_stage(st, sqrt_envelope(hosts=None), "refined", REFINEMENTS).write_s == pytest.approx(4 / 20)
    loaded = EnvelopeSurface().fit(_clocked(sqrt_points(write_factor=0.5), 0.6))
    loaded.hogs = 1
    surf.others = [loaded]
    st.cpu_load = 0.5                  # half way: 1/40 s of the idle op (0.2 waiting), 1/20 of the loaded (0.6)
    w_env = (0.2 / 40 + 0.6 / 20) / (1 / 40 + 1 / 20)
    assert predict_stage(st, surf, "refined", REFINEMENTS).write_s == \
        pytest.approx(4 * (1 / 40 + 1 / 20) * (1 - w_env) / 0.5)
    st.io_cpu_wait = None
    assert predict_stage(st, surf, "refined", REFINEMENTS).write_s == pytest.approx(4 * (1 / 40 + 1 / 20))
