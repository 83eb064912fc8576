"""One stage's look-ups in the envelope, each recorded with its source (a prediction's `lookups`).

    env = Lookups(surface, hosts, clamp_small=True)
    T = env.get("TL", 4.2e6, k=8)      # ops/s at that size and concurrency, on the stage's host count
    T, B = env.roofline("TL", k=8)     # the faithful model's ceilings: T at the smallest size, B at the largest

`cpu` (term cpu's RunCpu) moves every value got toward the envelope measured under load and scales it by the CPU
waits; `at_calls` gives the look-ups in the envelope of the nearest call size (term call_size), recorded in the
same place.
"""
from __future__ import annotations

from .surface import BANDWIDTH_OF, SIZELESS, EnvelopeSurface, fmt_size


class Lookups:
    def __init__(self, surface: EnvelopeSurface, hosts: int, clamp_small: bool, used: dict | None = None,
                 tag: str = "", cpu=None, root: EnvelopeSurface | None = None):
        self.s, self.hosts, self.clamp, self.tag = surface, hosts, clamp_small, tag
        self.used = {} if used is None else used
        self.tag_calls = bool(surface.others) or used is not None   # several envelopes: name the call size
        self.cpu, self.root = cpu, root or surface                  # root: where the twins are

    def at_calls(self, bytes_per_call, warm=False, metric=None):
        """The look-ups in the envelope measured with calls nearest to bytes_per_call, of warm reads if asked and
        measured, among those that have `metric`."""
        s = self.s.at_calls(bytes_per_call, warm, metric)
        if s is self.s:
            return self
        return Lookups(s, self.hosts, self.clamp, self.used, cpu=self.cpu, root=self.root)

    def get(self, metric, size, k):
        v = self.value(self.s, metric, size, k)
        return v if self.cpu is None else self.cpu.adjust(self, metric, size, k, v)

    def look(self, s, metric, size, k):
        return s.value(metric, size, k, self.hosts, clamp_small=self.clamp)

    def value(self, s, metric, size, k):
        """The value of surface s as measured (no CPU scaling), recorded."""
        lk = self.look(s, metric, size, k)
        self.record(s, metric, size, k, "", lk)
        return lk.value

    def record(self, s, metric, size, k, tag, lk):
        name = f"{metric}@{fmt_size(size, sep='') if metric not in SIZELESS else '-'},k={k:g}"
        if self.tag_calls:
            name += f",calls={fmt_size(s.block, sep='')}" + ("" if s.cold else ",warm") + self.tag
        name += tag
        self.used[name] = {"metric": metric, "size": size, "k": k, "hosts": self.hosts, "value": lk.value,
                           "source": lk.source, "note": lk.note, "block": s.block}

    def smallest(self, metric):
        return self.s.grid_for(metric, self.hosts)[1].sizes[0]

    def largest(self, metric):
        return self.s.grid_for(metric, self.hosts)[1].sizes[-1]

    def roofline(self, t_metric, k):
        """(T ceiling, B ceiling): T at the smallest measured size, B at the largest, at concurrency k."""
        b_metric = BANDWIDTH_OF[t_metric]
        return self.get(t_metric, self.smallest(t_metric), k), self.get(b_metric, self.largest(b_metric), k)
