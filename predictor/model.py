"""Predict one workflow stage's I/O time from an envelope surface: the faithful model and the refined one.

    p = predict_stage(stage, surface, "faithful")            # equations (1)-(3) as published
    p = predict_stage(stage, surface, "refined")             # every refinement on
    p = predict_stage(stage, surface, "refined", refine={"slots", "size_lookup"})   # some of them

Both predict the I/O time of one execution slot (a slot runs one task at a time; the published model's slot is a
node): rounds x the I/O time of a task in a round. The refined model is the published one with the terms of
predictor/terms/ (one physical effect each, switched by the `--refine` names they own): build the task's ops ->
look each up in the envelope -> schedule rounds -> sum the terms. predictor/README.md documents every term.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import formulas
from .lookups import Lookups
from .ops import TERM_LABEL, TERM_METRIC, TERMS, alpha_of, task_ops
from .prices import Prices
from .surface import EnvelopeSurface
from .terms import REMOVED, SWITCHES, call_size, cpu, io_overlap, metadata, op_size, rounds

REFINEMENTS = SWITCHES
OPT_IN = ()               # the refuted opt-in refinements and those the ablation removed are deleted (terms.REMOVED)
DEFAULT = REFINEMENTS
VARIANTS = ("faithful", "refined")
__all__ = ["DEFAULT", "OPT_IN", "REFINEMENTS", "REMOVED", "StagePrediction", "TERMS", "TERM_LABEL", "TERM_METRIC",
           "VARIANTS", "predict_stage", "required_metrics"]
# the faithful model's bound: op throughput when its ops' part of a read term is the term, to rounding
FLOAT_TIE = 1e-12


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
    on = set(DEFAULT if refine is None else refine)
    gone = sorted(on & set(REMOVED))
    if gone:
        raise ValueError(f"refinement {gone[0]!r} was {REMOVED[gone[0]]}")
    unknown = sorted(on - set(REFINEMENTS))
    if unknown:
        raise ValueError(f"unknown refinement {unknown[0]!r} (known: {', '.join(REFINEMENTS)})")
    return _refined(stage, surface, on, io_concurrency)


def _faithful(stage, surface) -> StagePrediction:
    """Equations (1)-(3): C = hosts, ⌈N/C⌉ rounds, T and B as the roofline at concurrency C."""
    N, C, notes = stage.tasks, stage.hosts, []
    need = _needed(stage)
    call_size.note_small_writes(stage, surface, need["write"], (), notes)
    env = Lookups(surface, C, clamp_small=True)
    alpha = alpha_of(stage, need["read"], notes)
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
                bounds[term] = "op throughput" if ops_part >= per[key] * (1 - FLOAT_TIE) else "bandwidth"
    return StagePrediction(stage.name, "faithful", N, C, C, C, R, D, D_w, D_N, alpha, terms, bounds, env.used,
                           notes, write_bound)


def _refined(stage, surface, on: set, io_concurrency) -> StagePrediction:
    N, C, notes = stage.tasks, stage.hosts, []
    need = _needed(stage)
    call_size.note_small_writes(stage, surface, need["write"], on, notes)
    S = rounds.slots(stage, on)
    k = io_overlap.concurrency(stage, S, on, io_concurrency, notes)
    run_cpu = cpu.RunCpu(stage, on)
    env = Lookups(surface, C, clamp_small=op_size.clamps_small(on), cpu=run_cpu)
    # build the task's ops
    task = task_ops(stage, surface, on, need, notes)
    # look each up in the envelope
    price = Prices(stage, surface, env, task, on)
    # schedule rounds: R rounds of S tasks, k of them doing I/O at once
    R = rounds.count(N, S)
    # sum the terms over the rounds
    create = metadata.per_round_create(need["write"], on)
    t = formulas.task_io_time(k, task.ops, price.rates(k))
    if create:
        t["meta"] = t.get("meta", 0.0) + 1.0 / env.get("Tm", 0, k)   # equations (1)/(2): one create per round
    terms = dict.fromkeys(TERMS, 0.0)
    for term, v in t.items():
        terms[term] += R * v
    bounds = _bounds(task, price, k, create)
    run_cpu.notes(notes)
    return StagePrediction(stage.name, "refined", N, C, S, k, R, task.D, task.D_write, task.D_N, task.alpha, terms,
                           bounds, env.used, notes, None, refine=tuple(x for x in REFINEMENTS if x in on),
                           ops_per_slot=_ops_per_slot(task, R))


def _bounds(task, price, k, create) -> dict:
    """component -> what bounds it: metadata, or op throughput / bandwidth by the roofline of its look-ups at k."""
    bounds = {}
    for t in task.ops:
        m = TERM_METRIC[t]
        if m == "Tm":
            bounds[t] = "metadata"
        else:
            T, B = price.envs[t].roofline(m, k)
            bounds[t] = "op throughput" if 1.0 / T >= task.size[t] / B else "bandwidth"
    if create:
        bounds["meta"] = "metadata"
    return bounds


def _ops_per_slot(task, R) -> dict:
    """metric -> the ops a slot's R rounds do at it: one run's draws (intervals)."""
    per_slot = {}
    for t, n in task.ops.items():
        for m in (("Tm", "Ts", "Tf") if TERM_METRIC[t] == "Tm" else (TERM_METRIC[t],)):
            per_slot[m] = per_slot.get(m, 0.0) + n * R
    return per_slot
