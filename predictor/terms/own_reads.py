"""Reads of the run's own outputs: warm (a page cache may hold them) and young (written on the host < 1 s before).

The envelope's reads are cold: caches dropped. A stage reading intermediate data reads files the run wrote.
(`warm_reads`) with an envelope measured with `--drop-caches off` among the `--envelope`s, the share f_w of a read
term's bytes from files the run wrote (`warm_fraction`) is looked up there; (`young_reads`) with one measured with
`--young` (local reads right after their write run), the share f_y of the local read bytes from files a task wrote
on the reader's host less than 1 s before the open (`young_fraction` / α: FUSE's entry and attribute timeouts,
1 s by default) there, up to that envelope's largest size (the warm or cold one beyond):

    1 / rate = f_y / T_young + (f_w − f_y) / T_warm + (1 − f_w) / T_cold     (f_w − f_y held ≥ 0)

Evidence: young reads, held out on tcp_nodelay, moved the refined median 21.7 -> 20.7 % on one pass and
15.4 -> 17.1 % on the next; checked alone, a young file cost no less once the host's I/O path idled as long
(montage_example/RESULTS.md, "Young reads"). The bench and the demo no longer measure young envelopes.
"""
from .call_size import per_call
from .reopen import read_field

SWITCHES = ("warm_reads", "young_reads")
STAGE_FIELDS = ("read.warm_fraction", "shared.warm_fraction", "read.young_fraction", "read.alpha")
ENVELOPE_METRICS = ("T1L", "B1L", "T1R", "B1R", "TN", "BN")
ENVELOPES = "those of warm reads (--drop-caches off) and of young reads (--young)"


class _UpTo:
    """One envelope's look-ups up to the largest size it measured, another's beyond: a lookup saved (young reads)
    matters to small reads, and beyond its sizes an envelope is only extrapolated."""

    def __init__(self, e, beyond, metric):
        self.e, self.beyond, self.top = e, beyond, e.largest(metric)

    def get(self, metric, size, k):
        return (self.e if size <= self.top else self.beyond).get(metric, size, k)

    def roofline(self, metric, k):
        return self.beyond.roofline(metric, k)


class OwnReads:
    """The warm and young shares of a stage's read terms, and the look-ups they are priced in."""

    def __init__(self, stage, surface, env, envs, ops, alpha, metric_of, on, notes):
        self.warm = self._warm(stage, surface, ops) if "warm_reads" in on else {}
        self.warm_envs = {t: env.at_calls(per_call(stage, t, on), warm=True, metric=metric_of[t]) for t in self.warm}
        self.young = self._young(stage, surface, ops, alpha) if "young_reads" in on else {}
        self.young_envs = {t: _UpTo(env.at_calls(per_call(stage, t, on), metric=metric_of[t], young=True),
                                    self.warm_envs.get(t, envs[t]), metric_of[t]) for t in self.young}
        if self.young:
            notes.append(f"young reads: {self.young['read_local']:.0%} of the local bytes from files written on the "
                         f"host < 1 s before, at the envelope of young reads")

    @staticmethod
    def _warm(stage, surface, ops) -> dict:
        """read term -> share of its bytes read from files the run wrote, when the envelope has warm reads."""
        if not surface.has_warm():
            return {}
        return {t: v for t, v in read_field(stage, "warm_fraction").items() if t in ops and v}

    @staticmethod
    def _young(stage, surface, ops, alpha) -> dict:
        """read_local -> share of its bytes read from files a task wrote on the reader's host < 1 s before, when the
        envelope has young reads (such a file is local: its replica is on the host that wrote it)."""
        y = stage.read.young_fraction
        if not y or "read_local" not in ops or not surface.has_young("T1L") or alpha <= 0:
            return {}
        return {"read_local": min(1.0, y / alpha)}

    def __contains__(self, t):
        return t in self.warm or t in self.young

    def rate(self, t, cold_env, rate_in) -> float:
        """Term t's aggregate rate: young, warm and cold bytes each at their envelope's (rate_in(look-ups))."""
        y = self.young.get(t, 0.0)
        f = max(0.0, self.warm.get(t, 0.0) - y)
        return 1.0 / ((y / rate_in(self.young_envs[t]) if y else 0.0)
                      + (f / rate_in(self.warm_envs[t]) if f else 0.0)
                      + (1 - y - f) / rate_in(cold_env))
