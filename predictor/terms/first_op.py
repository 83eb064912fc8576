"""A process's first op: dearer than its later ones, and dearer still when every slot's process starts at once.

(`first_op`) with the main envelope of one file per process (`--ops-per-proc 1`, T1) and one of n per process
(Tn) among the `--envelope`s, a process's first op costs 1/T1 and each later one

    c = (n/Tn − 1/T1) / (n − 1),   held in 0..1/T1

so a stage whose processes open f files in turn (`files_per_process`, re-opens counted: term `reopen`) pays, per
op of size x, the factor g = (1/T1 + (f − 1) · c) / (f · 1/T1) on its time (1 beyond the sizes the many-file
envelope measured); taken at each op size (a stall is no cheaper for coming later).
(`first_slots`) a process's first op (a reading task's first read, else its first write; the shell's create of a
redirected output) costs an op of the one-file envelope with all the starting processes s = min(S, tasks in the
round, the stage's `concurrency`: the most of its tasks the trace ran at once) beginning together, once per task:

    premium = max(0, s / T1(smallest size, s) − k / T1(smallest size, k))

from that envelope as measured (no CPU scaling: a stage waiting for a CPU half its I/O time paid less at its first
open than one that did not). Evidence: in the fan-outs of a traced run with every slot used a process's first
open took 14-26 ms on 4 hosts against 0.5-0.7 ms for its later opens; held out on pass AG with `alpha_files` the
median went 14.2 -> 12.3 % (montage_example/RESULTS.md, passes AB and AG).
"""
from mtcio.predictor import formulas
from mtcio.predictor.lookups import Lookups

SWITCHES = ("first_op", "first_slots")
STAGE_FIELDS = ("files_per_process", "concurrency")
ENVELOPE_METRICS = ("T1L", "T1R", "TN", "TL", "Tm")
ENVELOPES = "the main one of one file per process (--ops-per-proc 1) and one of more files per process"
# files per process of an envelope that does not say (mtcenvelope measure's default, --ops-per-proc)
DEFAULT_OPS_PER_PROC = 16
READS = ("read_local", "read_remote", "read_shared")


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


def starting(s, stage) -> int:
    """Processes starting at once: no more than the trace ever ran tasks of the stage at once (short tasks: 5-7 at
    once in 8 slots)."""
    return min(s, stage.concurrency or s)


class FirstSlots:
    """The premium of a process's first op, per task, at I/O concurrency k with s processes starting."""

    def __init__(self, surface, env, envs, ops, at_exit, metric_of, on):
        self.on = "first_slots" in on and surface.ops_per_proc == 1
        self.env, self.envs, self.ops, self.at_exit, self.metric_of = env, envs, ops, at_exit, metric_of
        self.firsts = [t for t in READS if t in ops] or [t for t in ("write",) if t in ops]

    def premium(self, k, s) -> dict:
        """term -> seconds per task."""
        if not self.on or s <= k:
            return {}
        ops, out = self.ops, {}
        n = sum(ops[t] for t in self.firsts)
        for t in self.firsts:
            m, e = self.metric_of[t], self.envs[t]
            x = e.smallest(m)
            out[t] = ops[t] / n * formulas.first_op_premium(s, k, e.value(e.s, m, x, s, ",first"),
                                                            e.value(e.s, m, x, k, ",first"))
        if self.at_exit and "meta" in ops:
            env = self.env
            out["meta"] = min(1.0, self.at_exit) * formulas.first_op_premium(
                s, k, env.value(env.s, "Tm", 0, s, ",first"), env.value(env.s, "Tm", 0, k, ",first"))
        return out


def note(extra, k0, s0, notes) -> None:
    if extra > 0:
        notes.append(f"a process's first op with {s0} processes starting at once: {extra * 1e3:.3g} ms more per task "
                     f"than at {k0:.3g} (the one-file envelope's ops at its smallest size)")
