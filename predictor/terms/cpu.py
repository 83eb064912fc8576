"""The run's CPUs against the envelope's: gfarm2fs and gfsd need a CPU for every call.

Each look-up's time per op t = 1/T is moved, in this order:
(`cpu_load`) toward the envelope measured beside H computing processes per host (`--hogs-per-host H`), by
w = min(1, cpu_load / H):

    t = (1 − w) · t_envelope + w · t_twin

(`wait_ratio`) the envelope's time per op holds its processes' wait for a CPU (w_env, the engine's op_wait_s / op_s
around the look-up, blended as the times are), the run's its own (w_run = `io_cpu_wait`, the share of the stage's
traced I/O time its processes waited for a CPU, at most MAX_RUN_WAIT):

    t × (1 − w_run) / (1 − w_env)

Evidence: on the 4-host tcp_nodelay testbed (2 vCPUs) a 535 KB write in 8 KiB calls took ~8 ms on idle hosts and
~16 ms beside one spinning process per host, and a stage computing between its 8 KiB calls was under-predicted by
33-50 % on every tcp_nodelay pass before `cpu_load` ("I/O beside computing tasks"); `wait_ratio` held out on
pass U: median 25.0 -> 21.6 % (montage_example/RESULTS.md). Without such envelopes or clocks nothing changes.
"""
from mtcio.predictor.surface import THROUGHPUT_OF

SWITCHES = ("cpu_load", "wait_ratio")
STAGE_FIELDS = ("cpu_load", "io_cpu_wait")
ENVELOPE_METRICS = ("Tm", "Ts", "Tf", "T1L", "B1L", "T1R", "B1R", "TN", "BN", "TL", "BL")
ENVELOPES = "those measured beside computing processes (--hogs-per-host); the points' CPU-wait clocks (wait_share)"
# a guard, not fitted (came with the first CPU-wait refinement, eda4896): the run's wait is held below 1 so that
# 1 / (1 − w_run) stays finite, at most 10x
MAX_RUN_WAIT = 0.9


class RunCpu:
    """The stage's CPU conditions, and what the look-ups took from them (for the notes)."""

    def __init__(self, stage, on):
        self.load = (stage.cpu_load or 0.0) if "cpu_load" in on else 0.0
        w_run = stage.io_cpu_wait
        self.wait = min(MAX_RUN_WAIT, w_run) if "wait_ratio" in on and w_run is not None else None
        self.loaded = {}          # metric -> computing processes per host of its twin
        self.waits = {}           # metric -> the envelope's wait shares it was scaled by

    def adjust(self, env, metric, size, k, v) -> float:
        """The rate v looked up in env, moved toward the loaded twin and scaled by the waits."""
        wv = self._wait(env, env.s, metric, size, k)
        twin = env.root.loaded_twin(env.s, metric) if self.load > 0 else None
        if twin is not None:
            v, wv = self._toward(env, v, wv, twin, self.load / twin.hogs, metric, size, k, f",load={twin.hogs}")
            self.loaded[metric] = twin.hogs
        if wv is not None and wv < 1:
            v *= (1.0 - self.wait) / (1.0 - wv)
            self.waits.setdefault(THROUGHPUT_OF.get(metric, metric), []).append(wv)
        return v

    def _wait(self, env, s, metric, size, k):
        """The envelope's share of op time waiting for a CPU at this look-up (None: wait_ratio off or no clock)."""
        if self.wait is None:
            return None
        return s.wait_share(metric, size, k, env.hosts)

    def _toward(self, env, v, wv, twin, share, metric, size, k, tag):
        """(rate, its share waiting for a CPU): the rate whose time per op is min(1, share) of the way from 1/v
        to the twin's, and the wait share of that blend."""
        w = min(1.0, share)
        lk = env.look(twin, metric, size, k)
        env.record(twin, metric, size, k, tag, lk)
        t0, t1 = (1.0 - w) / v, w / lk.value
        wt = self._wait(env, twin, metric, size, k)
        return 1.0 / (t0 + t1), (None if wv is None or wt is None else (t0 * wv + t1 * wt) / (t0 + t1))

    def notes(self, notes) -> None:
        load, wait = self.load, self.wait
        if self.loaded:
            hogs = sorted(set(self.loaded.values()))
            notes.append(f"CPU load: {load:.2g} tasks per host computed beside this stage's I/O in the trace; "
                         f"{', '.join(sorted(self.loaded))} taken "
                         f"{', '.join(f'{min(1.0, load / h):.0%}' for h in hogs)} of the way to the envelope "
                         f"measured beside {', '.join(map(str, hogs))} computing process(es) per host")
        if self.waits:
            ws = [x for v in self.waits.values() for x in v]
            span = f"{min(ws):.0%}" if f"{min(ws):.0%}" == f"{max(ws):.0%}" else f"{min(ws):.0%}-{max(ws):.0%}"
            notes.append(f"CPU wait: this stage's processes waited for a CPU in {wait:.0%} of their traced I/O time, "
                         f"the envelope's in {span} of their ops' time ({', '.join(sorted(self.waits))}); each time "
                         f"per op x (1 - the envelope's share) / (1 - {wait:.2f})")
