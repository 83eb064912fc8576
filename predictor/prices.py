"""Each op of a task looked up in the envelope: the aggregate rate (ops/s) of its component at concurrency k.

    price = Prices(stage, surface, env, task, on, notes)
    price.rates(k)          # component -> ops/s

The terms that price an op (predictor/terms/): call_size picks the envelope, own_reads blends in the warm one,
op_size looks the op's size up, first_op scales a process's later ops, metadata mixes Tm, Ts and Tf,
cpu (inside the look-ups, predictor/lookups.py) moves each value for the run's CPU conditions.
"""
from __future__ import annotations

from .ops import TERM_METRIC
from .terms import call_size, first_op, metadata, op_size, own_reads


class Prices:
    def __init__(self, stage, surface, env, task, on):
        ops = task.ops
        self.env, self.task, self.on = env, task, on
        self.envs = {t: call_size.lookups(env, stage, t, TERM_METRIC[t], on) for t in ops}
        self.spread = op_size.points(stage, task.size, task.reopened, on)
        self.own = own_reads.OwnReads(stage, surface, env, ops, TERM_METRIC, on)
        self.later = first_op.later_factors(stage, surface, env, ops, task.reopened, TERM_METRIC, on)

    def _rate(self, e, t, k):
        return op_size.rate(e, TERM_METRIC[t], self.task.size[t], self.spread.get(t),
                            self.later.get(t, first_op.no_factor), k, self.on)

    def rates(self, k) -> dict:
        task, out = self.task, {}
        for t, n in task.ops.items():
            if TERM_METRIC[t] == "Tm":
                out[t] = metadata.rate(self.env, n, task.n_stat, task.n_fstat, k)
            elif t in self.own:          # reads of the run's own outputs: warm, the rest cold
                out[t] = self.own.rate(t, self.envs[t], lambda e: self._rate(e, t, k))
            else:
                out[t] = self._rate(self.envs[t], t, k)
        return out
