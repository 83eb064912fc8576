"""Reads of the run's own outputs: a page cache may hold them (warm reads).

The envelope's reads are cold: caches dropped. A stage reading intermediate data reads files the run wrote.
(`warm_reads`) with an envelope measured with `--drop-caches off` among the `--envelope`s, the share f_w of a read
term's bytes from files the run wrote (`warm_fraction`) is looked up there:

    1 / rate = f_w / T_warm + (1 − f_w) / T_cold

Evidence: turned off over the Montage passes AO-AS the refined median went 16.2 -> 17.5 %
(docs/experiments/montage-passes.md); in the ablation on held-out configurations its p90 +5.4 points
(docs/experiments/ablation.md).
"""
from .call_size import per_call
from .reopen import read_field

SWITCHES = ("warm_reads",)
STAGE_FIELDS = ("read.warm_fraction", "shared.warm_fraction")
ENVELOPE_METRICS = ("T1L", "B1L", "T1R", "B1R", "TN", "BN")
ENVELOPES = "those of warm reads (--drop-caches off)"


class OwnReads:
    """The warm shares of a stage's read terms, and the look-ups they are priced in."""

    def __init__(self, stage, surface, env, ops, metric_of, on):
        self.warm = self._warm(stage, surface, ops) if "warm_reads" in on else {}
        self.warm_envs = {t: env.at_calls(per_call(stage, t, on), warm=True, metric=metric_of[t]) for t in self.warm}

    @staticmethod
    def _warm(stage, surface, ops) -> dict:
        """read term -> share of its bytes read from files the run wrote, when the envelope has warm reads."""
        if not surface.has_warm():
            return {}
        return {t: v for t, v in read_field(stage, "warm_fraction").items() if t in ops and v}

    def __contains__(self, t):
        return t in self.warm

    def rate(self, t, cold_env, rate_in) -> float:
        """Term t's aggregate rate: warm and cold bytes each at their envelope's (rate_in(look-ups))."""
        f = self.warm[t]
        return 1.0 / (f / rate_in(self.warm_envs[t]) + (1 - f) / rate_in(cold_env))
