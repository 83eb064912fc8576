"""A process's first op: dearer than its later ones.

(`first_op`) with the main envelope of one file per process (`--ops-per-proc 1`, T1) and one of n per process
(Tn) among the `--envelope`s, a process's first op costs 1/T1 and each later one

    c = (n/Tn − 1/T1) / (n − 1),   held in 0..1/T1

so a stage whose processes open f files in turn (`files_per_process`, re-opens counted: term `reopen`) pays, per
op of size x, the factor g = (1/T1 + (f − 1) · c) / (f · 1/T1) on its time (1 beyond the sizes the many-file
envelope measured); taken at each op size (a stall is no cheaper for coming later). Evidence: in the fan-outs
of a traced run a process's first open took 14-26 ms on 4 hosts against 0.5-0.7 ms for its later opens
(montage_example/RESULTS.md, pass AB); turned off over the Montage passes AO-AS the refined median went 16.2 ->
33.1 % (docs/experiments/montage-passes.md).
"""
from mtcio.predictor.lookups import Lookups

SWITCHES = ("first_op",)
STAGE_FIELDS = ("files_per_process",)
ENVELOPE_METRICS = ("T1L", "T1R", "TN", "TL")
ENVELOPES = "the main one of one file per process (--ops-per-proc 1) and one of more files per process"
# files per process of an envelope that does not say (mtcenvelope measure's default, --ops-per-proc)
DEFAULT_OPS_PER_PROC = 16


def later_factors(stage, surface, env, ops, reopened, metric_of, on) -> dict:
    """term -> g(k, op size): the mean cost of an op of a process opening f files in turn over the cost of its
    first. Empty when the stage's processes open one file each or no such pair of envelopes was given."""
    if "first_op" not in on or surface.ops_per_proc != 1:
        return {}
    out = {}
    for t in ops:
        f = (stage.files_per_process or 0.0) * reopened.get(t, 1.0)
        m = metric_of[t]
        many = surface.many_files(m) if m != "Tm" else None
        if f <= 1 or many is None:
            continue
        # without term cpu's scaling: the factor is a ratio of idle costs
        idle = Lookups(env.s, env.hosts, env.clamp, env.used)
        n = many.ops_per_proc or DEFAULT_OPS_PER_PROC
        menv = Lookups(many, env.hosts, env.clamp, env.used, tag=f",files/proc={n}")
        top = many.grid_for(m, stage.hosts)[1].sizes[-1]

        def factor(kk, x, m=m, idle=idle, menv=menv, n=n, f=f, top=top):
            if x > top:
                return 1.0
            first = 1.0 / idle.get(m, x, kk)
            later = (n / menv.get(m, x, kk) - first) / (n - 1)
            nxt = min(first, max(0.0, later))
            return (first + (f - 1) * nxt) / f / first
        out[t] = factor
    return out


def no_factor(k, x):
    return 1.0
