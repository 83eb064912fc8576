"""Op size: an op's rate is looked up at its own size, over the stage's distribution of sizes.

The faithful model reads the envelope as a roofline, per op max(1/T(smallest size), x/B(largest size)). The
refined one (`size_lookup`) takes T at the op's size x, interpolated on the surface (predictor/surface.py):

    time per op = 1 / T(x, k)

(`small_files`) below the envelope's smallest size T is held at that size: an op on a tiny file is metadata-bound,
no cheaper than the smallest measured (without it the surface's regression answers there).
(`size_spread`, with `size_lookup`) the envelope is not smooth in size (testbed, one process: ~45 ms per op for
files from 16 KiB up to 64 KiB read / 128 KiB written, ~2 ms at 12 KiB), so a mean between two modes can land on
the wrong side of a step: the time per op is averaged over the points q_j of the stage's op sizes
(`op_size_quantiles`: ten equal-weight points, a task's bytes on one file, at most its size), each weighted by the
stage's re-writes w (`rewrite_factor`: a file written twice, each close a stall):

    rate = Σ_j n_j / Σ_j n_j · w · g(q_j) / T(q_j, k)

with a file re-opened o times (term `reopen`) above the readahead window W one op of q_j (n = 1/o) and o − 1 of W,
and g the first-op factor of term `first_op`. Bytes read again within one open cost nothing (the page cache
serves them): a stage reading its input three times in one open, 2.9x its size, took 4.0-11.9 ms a read on a
tcp_nodelay testbed, where one read per op predicts 4.4-8.6 ms and three 9.4-22.0 (montage_example/RESULTS.md,
pass K).
"""
from mtcio.db.gfarm import READAHEAD

from .reopen import read_field

SWITCHES = ("size_lookup", "size_spread", "small_files")
STAGE_FIELDS = ("read.op_size_quantiles", "shared.op_size_quantiles", "write.op_size_quantiles",
                "write.rewrite_factor")
ENVELOPE_METRICS = ("T1L", "T1R", "TN", "TL", "B1L", "B1R", "BN", "BL")   # B: the roofline, size_lookup off
MIN_OP_BYTES = 1.0    # a quantile of 0 bytes (an open that read nothing) looked up as 1 byte: log-scale surface


def clamps_small(on) -> bool:
    return "small_files" in on


def points(stage, size, reopened, on) -> dict:
    """term -> [(op size, weight, share of the ops)] at the points of its size distribution (`size_spread`); terms
    without quantiles are left out. (Not the charged size over the points' mean: one 27 KB file among 212 of
    300 B pulls the mean to 494 B.)"""
    if "size_spread" not in on:
        return {}
    q = {**read_field(stage, "op_size_quantiles"), "write": stage.write.op_size_quantiles}
    rewrite = max(1.0, stage.write.rewrite_factor or 1.0)
    out = {}
    for t, pts in q.items():
        if not (t in size and pts and sum(pts) > 0 and len(pts) > 1):
            continue
        w = rewrite if t == "write" else 1.0
        o = reopened.get(t, 1.0)
        out[t] = []
        for x in pts:
            if o > 1 and x > READAHEAD:
                out[t] += [(x, w, 1.0 / o), (float(READAHEAD), 1.0, (o - 1) / o)]
            else:
                out[t].append((max(MIN_OP_BYTES, x), w, 1.0))
    return out


def rate(e, m, x, spread, later, k, on) -> float:
    """The aggregate op rate (ops/s) at concurrency k of ops of x bytes (or of the size points `spread`) at
    metric m in look-ups e; later(k, x): term first_op's factor on the time per op."""
    if "size_lookup" in on and spread:
        return sum(n for _, _, n in spread) / sum(n * w * later(k, y) / e.get(m, y, k) for y, w, n in spread)
    if "size_lookup" in on:
        return e.get(m, x, k) / later(k, x)
    T, B = e.roofline(m, k)
    return 1.0 / max(1.0 / T, x / B) / later(k, x)
