"""What a `mtcenvelope measure` sweep measures and in which order: its options (Sweep), its steps (plan) and the
points they form (point_groups).  No I/O here."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from .points import KiB, MiB, METRICS

DEFAULT_SIZES = [1 * KiB, 128 * KiB, 1 * MiB, 16 * MiB]
DEFAULT_PROCS = [1, 2, 4, 8]

# measurement kinds and the metrics they produce
KIND_METRICS = {"create": ("Tm", "Ts"), "write": ("TL", "BL"), "local": ("T1L", "B1L", "Tf"),
                "remote": ("T1R", "B1R"), "shared": ("TN", "BN")}
KIND_OF = {m: k for k, ms in KIND_METRICS.items() for m in ms}
DATA_KINDS = ("write", "local", "remote", "shared")
DEFAULT_PRECISION = 0.05          # +-5 % of the mean, 90 % interval
DEFAULT_TIME_BUDGET = 270.0       # seconds of measuring for the default sweep (<= 5 min)


class MeasureError(RuntimeError):
    """The sweep cannot start (bad options, no hosts, engine missing ...)."""


@dataclass
class Sweep:
    sizes: list[int] = field(default_factory=lambda: list(DEFAULT_SIZES))
    procs: list[int] = field(default_factory=lambda: list(DEFAULT_PROCS))
    host_counts: list[int] | None = None          # None: all hosts only
    repeat: int = 3                               # minimum repeats per point
    max_repeat: int = 30
    precision: float = DEFAULT_PRECISION          # 0: exactly ``repeat`` repeats
    time_budget: float | None = DEFAULT_TIME_BUDGET   # seconds for the sweep; None: no limit
    budget_factor: float = 2.5                    # a point's time <= this x its minimum's
    metrics: list[str] = field(default_factory=lambda: list(METRICS))
    ops_per_proc: int | None = None               # None: auto from the size
    creates_per_proc: int = 16
    timeout: float = 60.0                         # per engine run
    start_delay: float | None = None              # None: backend default
    drop_caches: str = "auto"                     # auto | evict | drop | off
    workdir: str = "/mtcenvelope"
    keep_files: bool = False
    fsync: bool = False
    block: int = 1 * MiB
    # the writers spin this long before writing (engine --compute-ms), as a task computes what it
    # writes: right after compute a write can cost ~3x one after idling (envelope/README.md)
    write_compute_ms: int = 0
    # processes that only compute beside every engine run, per host (engine --hogs): the envelope of a file
    # system whose hosts' CPUs are busy with tasks (envelope/README.md)
    hogs_per_host: int = 0
    # processes that only compute beside every engine run, per kernel: on a testbed (every host on this
    # machine's kernel) the first host's engine runs them, elsewhere every host's (envelope/README.md)
    hogs_per_kernel: int = 0
    # every engine worker computes this long between two data calls (engine --gap-us), as a task computes
    # each row it writes: calls apart cost more than calls back to back (envelope/README.md)
    call_gap_us: int = 0
    # T1L/B1L only, read at once after their write run: files written on the reader's host ~0.2 s before
    young: bool = False
    # reads only: every reader sleeps this long before each op after its first (engine --idle-ms), whose time is
    # dropped from the point: a small read costs more the longer the host's I/O path idled before it
    idle_ms: int = 0

    def k_for(self, size: int) -> int:
        """Operations per process: enough bytes per process (2 MiB) to time a small file,
        one op for a big one, 1..16."""
        if self.ops_per_proc:
            return self.ops_per_proc
        return max(2 if self.idle_ms else 1, min(16, math.ceil(2 * MiB / max(1, size))))


@dataclass
class Step:
    kind: str           # create | setup-shared | write | local | remote | shared | cleanup
    h: int
    size: int = 0
    ppn: int = 0
    rep: int = 0
    cost: float = 0.3   # seconds, for the ETA

    def label(self) -> str:
        if self.kind == "create":
            return f"Tm p{self.ppn}x{self.h} r{self.rep}"
        if self.kind in ("setup-shared", "cleanup"):
            return f"{self.kind} {fmt_size(self.size)}"
        name = {"write": "TL", "local": "T1L", "remote": "T1R", "shared": "TN"}[self.kind]
        return f"{name} {fmt_size(self.size)} p{self.ppn}x{self.h} r{self.rep}"


def fmt_size(n: int) -> str:
    for unit, m in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", KiB)):
        if n >= m and n % m == 0:
            return f"{n // m}{unit}"
    return f"{n}B"


def plan(sweep: Sweep, nhosts: int) -> list[Step]:
    kinds = {KIND_OF[m] for m in sweep.metrics}
    hcs = sweep.host_counts or [nhosts]
    steps: list[Step] = []
    for h in hcs:
        if "create" in kinds:
            for p in sweep.procs:
                for r in range(sweep.repeat):
                    steps.append(Step("create", h, 0, p, r,
                                      0.25 + p * h * sweep.creates_per_proc / 800))
        for s in sweep.sizes:
            k = sweep.k_for(s)
            if "shared" in kinds:
                steps.append(Step("setup-shared", h, s, cost=0.2 + s / 150e6))
            for p in sweep.procs:
                nbytes = s * k * p * h
                ops = k * p * h
                for r in range(sweep.repeat):
                    if kinds & {"write", "local", "remote"}:
                        steps.append(Step("write", h, s, p, r, 0.35 + sweep.write_compute_ms / 1000
                                          + nbytes / 200e6 + ops / 800))
                    for kind in ("local", "remote", "shared"):
                        if kind in kinds and not (kind == "remote" and h < 2):
                            steps.append(Step(kind, h, s, p, r, 0.3 + nbytes / 800e6 + ops / 1000))
            if not sweep.keep_files:
                steps.append(Step("cleanup", h, s, cost=0.3))
    return steps


def point_groups(steps: Sequence[Step]) -> list[list[Step]]:
    """Consecutive steps of one point (every repeat of Tm for a P x h; of the write and reads
    for a size x P x h); setup-shared and cleanup steps stand alone."""
    groups: list[list[Step]] = []
    last = None
    for s in steps:
        key = ("create", s.h, s.ppn) if s.kind == "create" else \
            ("data", s.h, s.size, s.ppn) if s.kind in DATA_KINDS else None
        if key is not None and key == last:
            groups[-1].append(s)
        else:
            groups.append([s])
        last = key
    return groups
