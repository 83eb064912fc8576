"""Predict one workflow stage's I/O time from an envelope surface: the faithful model and the refined one.

    p = predict_stage(stage, surface, "faithful")            # equations (1)-(3) as published
    p = predict_stage(stage, surface, "refined")             # every refinement on but the opt-in ones
    p = predict_stage(stage, surface, "refined", refine={"slots", "size_lookup"})   # some of them

Both predict the I/O time of one execution slot (a slot runs one task at a time; the published model's slot is a
node): rounds x the I/O time of a task in a round. predictor/README.md documents every term.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from mtcio.db.gfarm import READAHEAD

from . import formulas
from .surface import BANDWIDTH_OF, SIZELESS, THROUGHPUT_OF, EnvelopeSurface, fmt_size

REFINEMENTS = ("slots", "partial_round", "size_lookup", "files", "reread", "metadata", "small_files", "io_overlap",
               "call_size", "size_spread", "balance", "warm_reads", "first_op", "reopen", "stat_cache", "redirect",
               "cpu_load", "call_gap", "failed_lookups", "seeks_end", "young_reads", "wait_ratio",
               "later_share", "later_beyond", "first_slots", "alpha_files", "served_overlap", "measured_wait",
               "later_warm")
# off unless asked (--refine=+NAME): refinements that failed their held-out rule (montage_example/RESULTS.md).
# later_share on pass V: median 40.5 -> 31.4 %, concatFit +75 -> +46 %, but mOverlaps, mDiff and mViewer farther;
# on pass AK served_overlap 11.6 -> 12.2 %, measured_wait 11.6 -> 13.8 % (the 4-host fan-outs +50..+90 %)
# later_warm held out on AP and AT: median 15.9 -> 14.1, 16.9 -> 14.7 %, but concatFit +48 -> +69 % on AT, p90 up
OPT_IN = ("later_share", "later_beyond", "served_overlap", "measured_wait", "later_warm")
DEFAULT = tuple(x for x in REFINEMENTS if x not in OPT_IN)
VARIANTS = ("faithful", "refined")
TERMS = ("meta", "read_local", "read_remote", "read_shared", "write")
# term -> (throughput metric, what it is)
TERM_METRIC = {"read_local": "T1L", "read_remote": "T1R", "read_shared": "TN", "write": "TL", "meta": "Tm"}
TERM_LABEL = {"meta": "metadata", "read_local": "local read", "read_remote": "remote read",
              "read_shared": "N-to-1 read", "write": "write"}


@dataclass
class StagePrediction:
    stage: str
    variant: str
    N: int
    C: int
    slots: int               # concurrent tasks the rounds are made of
    k: float                 # I/O concurrency the envelope was looked up at
    rounds: int
    D: float                 # bytes read per task (1-to-1) as charged
    D_write: float
    D_N: float
    alpha: float
    terms: dict              # term -> seconds of the whole stage (per slot)
    bounds: dict             # term -> 'metadata' | 'op throughput' | 'bandwidth'
    lookups: dict            # name -> {metric, size, k, hosts, value, source, note}
    notes: list = field(default_factory=list)
    write_bound: str | None = None      # faithful: which of equations (1)/(2) was applied
    interval: tuple | None = None       # 90% interval of total_s (bootstrap)
    refine: tuple = ()
    ops_per_slot: dict | None = None    # metric -> ops one slot does at it (refined): one run's draws (intervals)

    @property
    def read_s(self):
        return self.terms["read_local"] + self.terms["read_remote"] + self.terms["read_shared"]

    @property
    def write_s(self):
        return self.terms["write"]

    @property
    def meta_s(self):
        return self.terms["meta"]

    @property
    def total_s(self):
        return sum(self.terms.values())

    @property
    def dominant(self) -> str:
        """The largest term, named by class and bound, e.g. 'remote read / bandwidth'."""
        if self.total_s <= 0:
            return "none"
        t = max(self.terms, key=self.terms.get)
        return TERM_LABEL[t] if t == "meta" else f"{TERM_LABEL[t]} / {self.bounds.get(t, '?')}"

    def shares(self) -> dict:
        tot = self.total_s
        return {t: (v / tot if tot else 0.0) for t, v in self.terms.items()}

    def to_dict(self) -> dict:
        return {"stage": self.stage, "variant": self.variant, "N": self.N, "C": self.C, "slots": self.slots,
                "k": self.k, "rounds": self.rounds, "D": self.D, "D_write": self.D_write, "D_N": self.D_N,
                "alpha": self.alpha, "read_s": self.read_s, "write_s": self.write_s, "meta_s": self.meta_s,
                "total_s": self.total_s, "terms": dict(self.terms), "shares": self.shares(),
                "bounds": dict(self.bounds), "dominant": self.dominant, "write_bound": self.write_bound,
                "interval": list(self.interval) if self.interval else None, "refine": list(self.refine),
                "lookups": self.lookups, "notes": list(self.notes)}


class _Env:
    """Envelope look-ups for one stage, recorded with their sources."""

    def __init__(self, surface: EnvelopeSurface, hosts: int, clamp_small: bool, used: dict | None = None,
                 tag: str = "", load: float = 0.0, root: EnvelopeSurface | None = None, gap: float = 0.0,
                 wait: float | None = None):
        self.s, self.hosts, self.clamp, self.tag = surface, hosts, clamp_small, tag
        self.used = {} if used is None else used
        self.tag_calls = bool(surface.others) or used is not None   # several envelopes: name the call size
        self.load, self.root = load, root or surface    # refinement cpu_load: the stage's, and where twins are
        self.loaded = {}                                # metric -> computing processes per host of its twin
        self.gap = gap                                  # refinement call_gap: the stage's us of computing per call
        self.apart = {}                                 # metric -> us between calls of its twin
        self.wait = wait                                # refinement wait_ratio: the run's share of I/O time waiting
        self.waits = {}                                 # metric -> the envelope's shares it was scaled by

    def at_calls(self, bytes_per_call, warm=False, metric=None, young=False):
        """The look-ups in the envelope measured with calls nearest to bytes_per_call (refinement call_size), of
        warm reads if asked and measured (refinement warm_reads), of young reads if asked (young_reads), among
        those that have `metric`."""
        s = self.s.at_calls(bytes_per_call, warm, metric, young)
        if s is self.s:
            return self
        e = _Env(s, self.hosts, self.clamp, self.used, load=self.load, root=self.root, gap=self.gap, wait=self.wait)
        e.loaded, e.apart, e.waits = self.loaded, self.apart, self.waits
        return e

    def get(self, metric, size, k):
        v = self._get(self.s, metric, size, k, "")
        wv = self._wait(self.s, metric, size, k)
        # refinement call_gap, then cpu_load: time per op moves toward the envelope of calls apart by the stage's
        # computing per call over that envelope's, then toward the loaded one by the stage's load over its (each
        # held at its twin beyond it). call_gap only toward a slower twin: where calls apart are faster, as past
        # Nagle's stalls on Gfarm's default, a task's computing comes in bursts as often as between its calls
        apart = self.root.apart_twin(self.s, metric) if self.gap > 0 else None
        if apart is not None:
            u, wv = self._toward(v, wv, apart, self.gap / apart.gap_us, metric, size, k, f",apart={apart.gap_us}us",
                                 slower_only=True)
            if u != v:
                self.apart[metric] = apart.gap_us
            v = u
        twin = self.root.loaded_twin(self.s, metric) if self.load > 0 else None
        if twin is not None:
            v, wv = self._toward(v, wv, twin, self.load / twin.hogs, metric, size, k, f",load={twin.hogs}")
            self.loaded[metric] = twin.hogs
        if wv is not None and wv < 1:
            # refinement wait_ratio: the envelope's time per op holds its processes' wait for a CPU, the run's its
            # own: the op's time without wait, (1 - w_envelope) of it, is charged at the run's share
            v *= (1.0 - self.wait) / (1.0 - wv)
            self.waits.setdefault(THROUGHPUT_OF.get(metric, metric), []).append(wv)
        return v

    def _wait(self, s, metric, size, k):
        """The envelope's share of op time waiting for a CPU at this look-up (None: refinement off or no clock)."""
        if self.wait is None:
            return None
        return s.wait_share(metric, size, k, self.hosts)

    def _toward(self, v, wv, twin, share, metric, size, k, tag, slower_only=False):
        """(rate, its share waiting for a CPU): the rate whose time per op is min(1, share) of the way from 1/v
        to the twin's (v itself when slower_only and the twin is faster), and the wait share of that blend."""
        w = min(1.0, share)
        lk = self._look(twin, metric, size, k)
        if slower_only and lk.value >= v:
            return v, wv              # not taken, so not listed among the look-ups
        self._record(twin, metric, size, k, tag, lk)
        t0, t1 = (1.0 - w) / v, w / lk.value
        wt = self._wait(twin, metric, size, k)
        return 1.0 / (t0 + t1), (None if wv is None or wt is None else (t0 * wv + t1 * wt) / (t0 + t1))

    def _look(self, s, metric, size, k):
        return s.value(metric, size, k, self.hosts, clamp_small=self.clamp)

    def _get(self, s, metric, size, k, tag):
        lk = self._look(s, metric, size, k)
        self._record(s, metric, size, k, tag, lk)
        return lk.value

    def _record(self, s, metric, size, k, tag, lk):
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


def _needed(stage) -> dict:
    """term -> True when the stage has that kind of I/O."""
    r, sh, w = stage.read, stage.shared, stage.write
    return {"read": (r.bytes_per_task.mean > 0 or r.files_per_task > 0),
            "shared": sh.files > 0 and (sh.bytes > 0 or sh.bytes_read_per_task > 0),
            "write": (w.bytes_per_task.mean > 0 or w.files_per_task > 0)}


def required_metrics(stage) -> set:
    need = _needed(stage)
    out = {"Tm"} if (need["write"] or stage.metadata.ops_per_task or stage.metadata.creates_per_task) else set()
    if need["read"]:
        a = 1.0 if stage.read.alpha is None else stage.read.alpha
        out |= ({"T1L", "B1L"} if a > 0 else set()) | ({"T1R", "B1R"} if a < 1 else set())
    if need["shared"]:
        out |= {"TN", "BN"}
    if need["write"]:
        out |= {"TL", "BL"}
    return out


def predict_stage(stage, surface: EnvelopeSurface, variant: str = "refined", refine=None,
                  io_concurrency: float | None = None) -> StagePrediction:
    if variant == "faithful":
        return _faithful(stage, surface)
    if variant != "refined":
        raise ValueError(f"unknown variant {variant!r} (one of {', '.join(VARIANTS)})")
    return _refined(stage, surface, set(DEFAULT if refine is None else refine), io_concurrency)


def _call_size_note(stage, surface, notes):
    """Small write calls cost more on gfarm2fs than the envelope's (testbed, one file per process: 2,880-byte calls
    gave 2-4x fewer write ops/s than 1 MiB calls at 256 KiB-4 MiB files); reads are merged by readahead."""
    b = stage.write.bytes_per_call
    if b and b * 8 < surface.block and _needed(stage)["write"]:
        notes.append(f"writes in {b:,.0f}-byte calls, the envelope's in {surface.block:,}-byte calls: small write "
                     f"calls can cost several times more (measure the envelope with --block {int(b)})")


def _call_sizes(stage) -> dict:
    """term -> the stage's mean bytes per call for it (None: not traced)."""
    r, w = stage.read.bytes_per_call, stage.write.bytes_per_call
    return {"read_local": r, "read_remote": r, "read_shared": stage.shared.bytes_per_call or r, "write": w,
            "meta": None}


def _size_points(stage, size, reopen) -> dict:
    """term -> [(op size, weight, share of the ops)] at the equal-weight points of their distribution (the
    model's op_size_quantiles: a task's bytes on one file, at most its size). A file opened o > 1 times
    (refinement reopen) within the readahead window is o ops of its size; a larger one is one op of its size and
    o - 1 of the window (cfitsio reads the header, then the data). Bytes read again within one open cost
    nothing: the page cache serves them (mViewer reads its 1.5-5.7 MB input three times in one open, 2.9x its
    size, in the time of one read). Terms without quantiles are left out. (Not the charged size over the points'
    mean: one 27 KB file among 212 of 300 B pulls the mean to 494 B.) A file written again (rewrite_factor:
    mImgtbl writes its 27 KB table twice, each close a stall) weighs as many ops."""
    q = {**_read_field(stage, "op_size_quantiles"), "write": stage.write.op_size_quantiles}
    rewrite = max(1.0, stage.write.rewrite_factor or 1.0)
    out = {}
    for t, pts in q.items():
        if not (t in size and pts and sum(pts) > 0 and len(pts) > 1):
            continue
        w = rewrite if t == "write" else 1.0
        o = reopen.get(t, 1.0)
        out[t] = []
        for x in pts:
            if o > 1 and x > READAHEAD:
                out[t] += [(x, w, 1.0 / o), (float(READAHEAD), 1.0, (o - 1) / o)]
            else:
                out[t].append((max(1.0, x), w, 1.0))
    return out


class _UpTo:
    """One envelope's look-ups up to the largest size it measured, another's beyond: a lookup saved (young reads)
    matters to small reads, and beyond its sizes an envelope is only extrapolated."""

    def __init__(self, e, beyond, metric):
        self.e, self.beyond, self.top = e, beyond, e.largest(metric)

    def get(self, metric, size, k):
        return (self.e if size <= self.top else self.beyond).get(metric, size, k)

    def roofline(self, metric, k):
        return self.beyond.roofline(metric, k)


def _young_shares(stage, surface, ops, alpha) -> dict:
    """read_local -> share of its bytes read from files a task wrote on the reader's host < 1 s before, when the
    envelope has young reads (such a file is local: its replica is on the host that wrote it)."""
    y = stage.read.young_fraction
    if not y or "read_local" not in ops or not surface.has_young("T1L") or alpha <= 0:
        return {}
    return {"read_local": min(1.0, y / alpha)}


def _later_ops(stage, surface, env, ops, reopen, on, warm_envs=None) -> dict:
    """term -> ((k, op size) -> mean cost of an op of a process opening f files in turn, over the cost of its
    first), from an envelope of one file per process (this one) and one of n files per process: the first costs
    1/T1, each later one c = (n/Tn - 1/T1)/(n - 1), held between 0 and 1/T1; 1 at sizes beyond the many-file
    envelope's. Taken at each op size: a stall of gfarm2fs (16-64 KiB) is no cheaper for coming later. Empty
    when the stage's processes open one file each or no such pair of envelopes was given. A re-opened file
    (refinement reopen) is as many ops of the process.
    Refinement later_share: c = n/Tn x (1 - s)/(n - 1), s the share of the many-file envelope's op time its own
    first ops took (its points' first_op_share): both from one run, not the difference of two envelopes measured
    minutes apart; with warm_envs (term -> the envelope of its warm reads), of reads a cache may serve, from the
    envelopes of warm reads (a later warm op costs ~0.7x a cold one on the testbed, a first one ~0.95x).
    Refinement later_beyond: a later op larger than the many-file envelope's largest size saves the seconds a later
    op saves at that size.
    Refinement later_warm (without later_share): a warm read's later ops by the same difference, of the warm
    envelopes of one and of n files per process."""
    if surface.ops_per_proc != 1:
        return {}
    share_on = "later_share" in on
    beyond = "later_beyond" in on
    warm = warm_envs is not None
    if warm and not (share_on or "later_warm" in on):
        return {}
    out = {}
    for t in ops:
        f = (stage.files_per_process or 0.0) * reopen.get(t, 1.0)
        m = TERM_METRIC[t]
        many = surface.many_files(m, warm) if m != "Tm" else None
        if f <= 1 or many is None:
            continue
        # without cpu_load: the factor is a ratio of idle costs
        idle = _Env(warm_envs[t].s if warm else env.s, env.hosts, env.clamp, env.used)
        n = many.ops_per_proc or 16
        menv = _Env(many, env.hosts, env.clamp, env.used, tag=f",files/proc={n}")
        top = many.grid_for(m, stage.hosts)[1].sizes[-1]

        def factor(kk, x, m=m, idle=idle, many=many, menv=menv, n=n, f=f, top=top):
            if x > top and not beyond:
                return 1.0
            y = min(x, top)
            first = 1.0 / idle.get(m, y, kk)
            s = many.first_share(m, y, kk, stage.hosts) if share_on else None
            total = n / menv.get(m, y, kk)
            later = total * (1.0 - s) / (n - 1) if s is not None else (total - first) / (n - 1)
            nxt = min(first, max(0.0, later))
            if x > top:     # a first op's premium is a latency: a later op saves the seconds it saved at `top`
                saved = first - nxt
                first = 1.0 / idle.get(m, x, kk)
                nxt = first - saved
            return (first + (f - 1) * nxt) / f / first
        out[t] = factor
    return out




def _per_open(x, opens):
    """Mean bytes one open of a file re-opened `opens` times moves: gfarm2fs drops the page cache at open, so
    every open fetches again what it reads, at least the readahead window (the whole file when smaller: a 26 KB
    FITS file opened twice costs two 26 KB ops, ~45 ms each on the testbed, not one); a larger file is read
    whole by one open and in its first window by the others (cfitsio: header, then data)."""
    return x if x <= READAHEAD else (x + (opens - 1) * float(READAHEAD)) / opens


def _read_field(stage, name) -> dict:
    """read term -> the model's field `name` for it (local and remote 1-to-1 reads share the read section)."""
    r = getattr(stage.read, name)
    return {"read_local": r, "read_remote": r, "read_shared": getattr(stage.shared, name)}


def _opens(stage, ops) -> dict:
    """read term -> opens of a file by a task (> 1 only)."""
    return {t: v for t, v in _read_field(stage, "opens_per_file").items() if t in ops and v and v > 1}


def _warm_shares(stage, surface, ops) -> dict:
    """read term -> share of its bytes read from files the run wrote, when the envelope has warm reads."""
    if not surface.has_warm():
        return {}
    return {t: v for t, v in _read_field(stage, "warm_fraction").items() if t in ops and v}


def _shared_files_per_task(sh, D_N) -> float:
    """Shared files one task reads: the model's count, else its bytes over the shared files' mean size (a stage
    whose tasks each read a few of many shared files, as Montage's mDiff, is not every task reading all)."""
    if sh.files_per_task:
        return sh.files_per_task
    mean = sh.bytes / sh.files if sh.files else 0
    return max(1.0, D_N / mean) if mean > 0 else float(sh.files)


def _alpha(stage, notes):
    if stage.read.alpha is None:
        if _needed(stage)["read"]:
            notes.append("α unknown (replicas not resolved): taken as 1.0, every 1-to-1 read local")
        return 1.0
    return stage.read.alpha


def _faithful(stage, surface) -> StagePrediction:
    """Equations (1)-(3): C = hosts, ⌈N/C⌉ rounds, T and B as the roofline at concurrency C."""
    N, C, notes = stage.tasks, stage.hosts, []
    _call_size_note(stage, surface, notes)
    env = _Env(surface, C, clamp_small=True)
    need = _needed(stage)
    alpha = _alpha(stage, notes)
    r, w = stage.read, stage.write
    D = (r.file_size.mean * r.files_per_task) if (r.file_size and r.files_per_task) else r.bytes_per_task.mean
    D_N = float(stage.shared.bytes) if need["shared"] else 0.0
    D_w = w.bytes_per_task.mean
    terms = dict.fromkeys(TERMS, 0.0)
    bounds, write_bound = {}, None
    R = formulas.rounds(N, C)
    if need["write"]:
        Tm = env.get("Tm", 0, C)
        TL, BL = env.roofline("TL", C)
        t1 = formulas.write_bandwidth_bound(N, C, D_w, Tm, BL)
        t2 = formulas.write_throughput_bound(N, C, Tm, TL)
        write_bound = "bandwidth (1)" if t1 >= t2 else "throughput (2)"
        per_round, _ = formulas.write_terms(C, D_w, Tm, TL, BL)
        terms["meta"], terms["write"] = R * per_round["meta"], R * per_round["write"]
        bounds["write"] = "bandwidth" if t1 >= t2 else "op throughput"
        bounds["meta"] = "metadata"
    if need["read"] or need["shared"]:
        vals = {"T1L": None, "B1L": None, "T1R": None, "B1R": None, "TN": None, "BN": None}
        if need["read"] and alpha > 0:
            vals["T1L"], vals["B1L"] = env.roofline("T1L", C)
        if need["read"] and alpha < 1:
            vals["T1R"], vals["B1R"] = env.roofline("T1R", C)
        if need["shared"]:
            vals["TN"], vals["BN"] = env.roofline("TN", C)
        Dr = D if need["read"] else 0.0
        a = alpha if need["read"] else 1.0
        if need["read"]:
            per = formulas.read_terms(C, a, Dr, D_N, **vals)
        else:  # only the N-to-1 term of (3)
            per = {"local": 0.0, "remote": 0.0, "shared": max(C / vals["TN"], C * D_N / vals["BN"])}
        for term, key, t_m in (("read_local", "local", "T1L"), ("read_remote", "remote", "T1R"),
                               ("read_shared", "shared", "TN")):
            terms[term] = R * per[key]
            if per[key]:
                ops_part = {"local": a * C, "remote": (1 - a) * C, "shared": C}[key] / vals[t_m]
                bounds[term] = "op throughput" if ops_part >= per[key] * (1 - 1e-12) else "bandwidth"
    return StagePrediction(stage.name, "faithful", N, C, C, C, R, D, D_w, D_N, alpha, terms, bounds, env.used,
                           notes, write_bound)


def _refined(stage, surface, on: set, io_concurrency) -> StagePrediction:
    N, C, notes = stage.tasks, stage.hosts, []
    calls = _call_sizes(stage)
    _call_size_note(stage, surface.at_calls(calls["write"], metric="TL") if "call_size" in on else surface, notes)
    p = (stage.procs_per_host or 1) if "slots" in on else 1
    S = C * p
    k = float(S)
    if "io_overlap" in on:
        kio = io_concurrency if io_concurrency is not None else stage.io_concurrency
        # refinement served_overlap: the overlap of the I/O time less its CPU wait, which wait_ratio charges apart
        # (a call waiting for a CPU lengthens the overlap but loads no daemon)
        served = ("served_overlap" in on and "wait_ratio" in on and io_concurrency is None
                  and stage.io_concurrency_served is not None)
        if served:
            kio = stage.io_concurrency_served
        if kio is None:
            notes.append(f"I/O concurrency unknown (no trace overlap in the model): taken as its {S} slot"
                         + ("s" if S != 1 else ""))
        else:
            k = max(1.0, min(float(kio), float(S)))
            notes.append(f"I/O concurrency {k:.3g} from the trace's overlap of I/O intervals"
                         + (" less their CPU wait" if served else "") + f" ({S} slots)")
    load = (stage.cpu_load or 0.0) if "cpu_load" in on else 0.0
    gap = (stage.compute_per_call_us or 0.0) if "call_gap" in on else 0.0
    # refinement measured_wait: the run's wait as the shim timed it around each call, where the trace has it
    w_run = stage.io_cpu_wait
    if "measured_wait" in on and stage.io_cpu_wait_measured is not None:
        w_run = stage.io_cpu_wait_measured
    wait = min(0.9, w_run) if "wait_ratio" in on and w_run is not None else None
    env = _Env(surface, C, clamp_small="small_files" in on, load=load, gap=gap, wait=wait)
    need = _needed(stage)
    alpha = _alpha(stage, notes)
    r, sh, w, md = stage.read, stage.shared, stage.write, stage.metadata

    # per-task operations (count, bytes per op) by term
    def split(total_bytes, nfiles):
        if "files" in on and nfiles > 0:
            return nfiles, total_bytes / nfiles
        return (1.0, total_bytes) if (total_bytes > 0 or nfiles > 0) else (0.0, 0.0)

    if "reread" in on or not (r.file_size and r.files_per_task):
        D = r.bytes_per_task.mean
    else:
        D = r.file_size.mean * r.files_per_task
    D_N = (sh.bytes_read_per_task if "reread" in on else float(sh.bytes)) if need["shared"] else 0.0
    D_w = w.bytes_per_task.mean
    ops, size = {}, {}
    if need["read"]:
        n, s = split(D, r.files_per_task)
        # refinement alpha_files: ops split by the share of files read locally, not of bytes (concatFit: 30 % of
        # its files local but 62 % of its bytes, in one 16 KB table among 112 files of 270 B)
        a = r.alpha_files if "alpha_files" in on and r.alpha_files is not None and "files" in on else alpha
        ops["read_local"], ops["read_remote"] = a * n, (1 - a) * n
        size["read_local"] = size["read_remote"] = s
    if need["shared"]:
        nsh = _shared_files_per_task(sh, D_N) if "reread" in on else sh.files   # without: every task reads all
        ops["read_shared"], size["read_shared"] = split(D_N, nsh)
    if need["write"]:
        ops["write"], size["write"] = split(D_w, w.files_per_task)
    # written files whose data and close leave at exit (an inherited fd, a stream never closed): charged as creates
    at_exit = 0.0
    share = (w.redirected_fraction or 0.0) + (w.left_open_fraction or 0.0)
    if "redirect" in on and ops.get("write") and share:
        at_exit = ops["write"] * min(1.0, share)
        ops["write"] -= at_exit
    reopen = _opens(stage, ops) if "reopen" in on and "files" in on else {}
    for t, o in reopen.items():
        ops[t], size[t] = ops[t] * o, _per_open(size[t], o)
    n_stat = 0.0          # of the extra metadata ops, stats of existing files (at Ts when the envelope has it)
    n_fstat = 0.0         # and seeks to the end (at Tf when the envelope has it)
    if "metadata" in on:
        data_opens = sum(ops.values()) + at_exit
        # stats the client's attribute cache served (~2 us) are not charged
        cached = (md.stats_per_task or 0.0) * ((md.stats_cached_fraction or 0.0) if "stat_cache" in on else 0.0)
        stats = (md.stats_per_task or 0.0) - cached
        lookups = max(0.0, (md.ops_per_task or 0.0) - data_opens - cached)
        # a name looked up and not found (cfitsio stats its output before creating it) is a request too, and so is
        # a seek to a file's end on gfarm2fs (glibc's fstat after cfitsio re-opens a file it read: the attributes
        # a read left stale, asked of gfarm2fs)
        failed = (md.failed_per_task or 0.0) if "failed_lookups" in on else 0.0
        ends = (md.seeks_end_per_task or 0.0) if "seeks_end" in on else 0.0
        extra = lookups + failed + ends + max(0.0, md.creates_per_task - ops.get("write", 0.0))
        if extra > 0:
            ops["meta"], size["meta"] = extra, 0
            if "Tf" in surface.metrics():
                n_fstat = ends
            if "Ts" in surface.metrics():
                n_stat = min(lookups, stats) + failed + ends - n_fstat
            elif md.stats_per_task or failed or ends - n_fstat:
                notes.append("the envelope has no stat rate (Ts): stats charged as creates (Tm)")
        if failed:
            notes.append(f"failed lookups: {failed:.3g} per task (names not found), each a metadata request")
        if ends:
            notes.append(f"seeks to the end: {ends:.3g} per task (the size asked of the file system), each a "
                         f"metadata request" + (" at Tf" if n_fstat else ""))
    ops = {t: n for t, n in ops.items() if n > 0}
    envs = {t: (env.at_calls(calls[t], metric=TERM_METRIC[t]) if "call_size" in on else env) for t in ops}
    spread = _size_points(stage, size, reopen) if "size_spread" in on else {}
    warm = _warm_shares(stage, surface, ops) if "warm_reads" in on else {}
    warm_envs = {t: env.at_calls(calls[t] if "call_size" in on else None, warm=True, metric=TERM_METRIC[t])
                 for t in warm}
    young = _young_shares(stage, surface, ops, alpha) if "young_reads" in on else {}
    young_envs = {t: _UpTo(env.at_calls(calls[t] if "call_size" in on else None, metric=TERM_METRIC[t], young=True),
                           warm_envs.get(t, envs[t]), TERM_METRIC[t]) for t in young}
    if young:
        notes.append(f"young reads: {young['read_local']:.0%} of the local bytes from files written on the host "
                     f"< 1 s before, at the envelope of young reads")
    later = _later_ops(stage, surface, env, ops, reopen, on) if "first_op" in on else {}
    later_warm = _later_ops(stage, surface, env, warm, reopen, on, warm_envs) if "first_op" in on and warm else {}

    def rate_in(e, t, kk, warm_read=False):
        m = TERM_METRIC[t]
        lf = (warm_read and later_warm.get(t)) or later.get(t, lambda kk, x: 1.0)
        if "size_lookup" in on and spread.get(t):
            # the op rate over the stage's size distribution: mean time per op at its equal-weight sizes
            return sum(n for _, _, n in spread[t]) / sum(n * w * lf(kk, x) / e.get(m, x, kk)
                                                          for x, w, n in spread[t])
        if "size_lookup" in on:
            return e.get(m, size[t], kk) / lf(kk, size[t])
        T, B = e.roofline(m, kk)
        return 1.0 / max(1.0 / T, size[t] / B) / lf(kk, size[t])

    def rates(kk):
        out = {}
        for t in ops:
            m = TERM_METRIC[t]
            if m == "Tm" and (n_stat or n_fstat):
                parts = ((n_fstat, "Tf"), (n_stat, "Ts"), (ops[t] - n_stat - n_fstat, "Tm"))
                out[t] = ops[t] / sum(n / env.get(x, 0, kk) for n, x in parts if n > 0)
            elif m == "Tm":
                out[t] = env.get("Tm", 0, kk)
            elif t in warm or t in young:   # reads of the run's own outputs: young, warm, the rest cold
                y = young.get(t, 0.0)
                f = max(0.0, warm.get(t, 0.0) - y)
                out[t] = 1.0 / ((y / rate_in(young_envs[t], t, kk) if y else 0.0)
                                + (f / rate_in(warm_envs[t], t, kk, True) if f else 0.0)
                                + (1 - y - f) / rate_in(envs[t], t, kk))
            else:
                out[t] = rate_in(envs[t], t, kk)
        return out

    # refinement first_slots: a process's first op (a reading task's first read, else its first write; the shell's
    # create of a redirected output) costs an op of the one-file envelope with all the slots' processes starting.
    # Its excess is a latency (in the runs the first open is dear, not the reads after it): taken at the smallest
    # size, from the idle envelope as measured (no load or CPU-wait scaling: mBackground, waiting for a CPU half its
    # I/O time, paid less at its first open than mDiff)
    reads = [t for t in ("read_local", "read_remote", "read_shared") if t in ops]
    firsts = reads or [t for t in ("write",) if t in ops]
    first_on = "first_slots" in on and surface.ops_per_proc == 1

    def first_premium(kk, s_eff):
        if not first_on or s_eff <= kk:
            return {}
        out, n = {}, sum(ops[t] for t in firsts)
        for t in firsts:
            m, e = TERM_METRIC[t], envs[t]
            x = e.smallest(m)
            out[t] = ops[t] / n * formulas.first_op_premium(s_eff, kk, e._get(e.s, m, x, s_eff, ",first"),
                                                            e._get(e.s, m, x, kk, ",first"))
        if at_exit and "meta" in ops:
            out["meta"] = min(1.0, at_exit) * formulas.first_op_premium(
                s_eff, kk, env._get(env.s, "Tm", 0, s_eff, ",first"), env._get(env.s, "Tm", 0, kk, ",first"))
        return out

    def round_time(kk, first):
        t = formulas.task_io_time(kk, ops, rates(kk))
        for term, v in first.items():
            t[term] = t.get(term, 0.0) + v
        if "metadata" not in on and need["write"]:
            t["meta"] = t.get("meta", 0.0) + 1.0 / env.get("Tm", 0, kk)   # equations (1)/(2): one create per round
        return t

    Nr = N                                    # tasks the rounds are counted over
    if "balance" in on and stage.tasks_max_per_host and stage.tasks_max_per_host * C > N:
        m = min(stage.tasks_max_per_host, N)
        Nr = m * C                            # every host as loaded as the busiest: it ends the stage
        notes.append(f"placement: the busiest host ran {m} of {N} tasks, {Nr / N:.2f}x an even share; rounds "
                     f"counted on it")
    if "partial_round" in on:
        full, rem = divmod(Nr, S)
        R = full + (1 if rem else 0)
        shapes = ([(full, k, S)] if full else []) + ([(1, min(k, float(rem)), min(S, rem))] if rem else [])
    else:
        R = formulas.rounds(Nr, S)
        shapes = [(R, k, S)]                  # (rounds, I/O concurrency, processes starting at once)
    # no more processes start at once than the trace ever ran tasks of the stage at once (mFitplane's short tasks:
    # 5-7 at once in 8 slots)
    shapes = [(n, kk, min(s, stage.concurrency or s)) for n, kk, s in shapes]
    firsts_charged = [first_premium(kk, s) for _, kk, s in shapes]
    parts = [(count, round_time(kk, f)) for (count, kk, _), f in zip(shapes, firsts_charged)]
    extra = sum(firsts_charged[0].values())
    if extra > 0:
        _, k0, s0 = shapes[0]
        notes.append(f"a process's first op with {s0} processes starting at once: {extra * 1e3:.3g} ms more per task "
                     f"than at {k0:.3g} (the one-file envelope's ops at its smallest size)")
    terms = dict.fromkeys(TERMS, 0.0)
    for count, t in parts:
        for term, v in t.items():
            terms[term] += count * v
    bounds = {}
    for t in ops:
        m = TERM_METRIC[t]
        if m == "Tm":
            bounds[t] = "metadata"
        else:
            T, B = envs[t].roofline(m, k)
            bounds[t] = "op throughput" if 1.0 / T >= size[t] / B else "bandwidth"
    if "metadata" not in on and need["write"]:
        bounds["meta"] = "metadata"
    per_slot = {}         # the slot's R rounds of ops (the partial round among them)
    for t, n in ops.items():
        for m in (("Tm", "Ts", "Tf") if TERM_METRIC[t] == "Tm" else (TERM_METRIC[t],)):
            per_slot[m] = per_slot.get(m, 0.0) + n * R
    if env.loaded:
        hogs = sorted(set(env.loaded.values()))
        notes.append(f"CPU load: {load:.2g} tasks per host computed beside this stage's I/O in the trace; "
                     f"{', '.join(sorted(env.loaded))} taken {', '.join(f'{min(1.0, load / h):.0%}' for h in hogs)} "
                     f"of the way to the envelope measured beside {', '.join(map(str, hogs))} computing "
                     f"process(es) per host")
    if env.apart:
        gaps = sorted(set(env.apart.values()))
        notes.append(f"calls apart: this stage's tasks computed {gap:.3g} us per file-system call in the trace; "
                     f"{', '.join(sorted(env.apart))} taken {', '.join(f'{min(1.0, gap / g):.0%}' for g in gaps)} of "
                     f"the way to the envelope of calls {', '.join(map(str, gaps))} us apart, where it is slower")
    if env.waits:
        ws = [x for v in env.waits.values() for x in v]
        span = f"{min(ws):.0%}" if f"{min(ws):.0%}" == f"{max(ws):.0%}" else f"{min(ws):.0%}-{max(ws):.0%}"
        notes.append(f"CPU wait: this stage's processes waited for a CPU in {wait:.0%} of their traced I/O time, the "
                     f"envelope's in {span} of their ops' time ({', '.join(sorted(env.waits))}); each time per op "
                     f"x (1 - the envelope's share) / (1 - {wait:.2f})")
    return StagePrediction(stage.name, "refined", N, C, S, k, R, D, D_w, D_N, alpha, terms, bounds, env.used,
                           notes, None, refine=tuple(x for x in REFINEMENTS if x in on), ops_per_slot=per_slot)
