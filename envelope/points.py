"""One measured value of the MTC envelope (DESIGN.md §3) and the errors parsers raise.

A :class:`Point` is one row of the db's ``envelope_points`` table: every repeat of every
(metric, file size, processes per host, hosts) combination is its own point, so the
predictor can compute intervals. Failed measurements are points too (``ok=False`` with the
reason in ``error``), so a sweep keeps a record of what it could not measure.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

# metric -> unit. Tm and T* are operations per second (open + whole-file read or write +
# close = one op; for Tm one create; for Ts one stat of an existing file; for Tf one fstat of a
# file just opened, after a read of it on that host), B* are bytes per second.
METRICS: dict[str, str] = {
    "Tm": "ops/s", "Ts": "ops/s", "Tf": "ops/s",
    "T1L": "ops/s", "B1L": "bytes/s",
    "T1R": "ops/s", "B1R": "bytes/s",
    "TN": "ops/s", "BN": "bytes/s",
    "TL": "ops/s", "BL": "bytes/s",
}
# Metrics some external tools measure instead of a core one (envelope/README.md, "Metrics"):
# the predictor reads the core METRICS; these are kept apart so that no tool's point stands
# for a core metric it did not measure.
#   Tmu: creates + close of empty files, one directory per process (mdtest -u) instead of
#        one directory shared by all processes (Tm);
#   TNp/BNp: N-to-1 "partitioned" reads: each of N processes reads its 1/N slice of one
#        shared file (IOR without -F); one op = one slice, file_size = the shared file.
#        TN/BN: every process reads the whole shared file (one op = one whole file).
EXTRA_METRICS: dict[str, str] = {"Tmu": "ops/s", "TNp": "ops/s", "BNp": "bytes/s"}
UNITS: dict[str, str] = {**METRICS, **EXTRA_METRICS}

# the throughput metric of each bandwidth metric and back
PAIRS: dict[str, str] = {"T1L": "B1L", "T1R": "B1R", "TN": "BN", "TL": "BL"}
ALL_PAIRS: dict[str, str] = {**PAIRS, "TNp": "BNp"}
BANDWIDTH_OF = PAIRS
THROUGHPUT_OF = {b: t for t, b in PAIRS.items()}

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30


class ParseError(ValueError):
    """A tool output that cannot be turned into points: names the file and what is wrong."""

    def __init__(self, source: str | None, message: str):
        self.source = source or "<text>"
        self.reason = message
        super().__init__(f"{self.source}: {message}")


class TruncatedOutput(ParseError):
    """The output stops before the part that holds the results (run killed, disk full ...)."""


class UnknownFormat(ParseError):
    """No driver recognises the content."""


class NoEnvelopeMetric(ParseError):
    """A well-formed output whose phases map to no envelope metric (e.g. an N-to-1 write)."""


class ImplausibleValue(ValueError):
    """A point whose numbers cannot be a measurement (negative rate or size, 0 hosts ...)."""


@dataclass
class Point:
    metric: str
    file_size: int            # bytes of one file (of the shared file for TN/BN)
    procs_per_host: int
    hosts: int
    value: float              # in ``unit``; NaN for a failed point
    unit: str
    repeat: int               # 0-based index of the repeat
    tool: str
    tool_version: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    ok: bool = True
    error: str | None = None

    def __post_init__(self):
        if self.metric not in UNITS:
            raise ValueError(f"unknown metric {self.metric!r}; one of {', '.join(UNITS)}")
        if self.unit != UNITS[self.metric]:
            raise ValueError(f"metric {self.metric} is in {UNITS[self.metric]}, not {self.unit}")
        # implausible values are an error, not a point (a parser fed a damaged output)
        if self.ok and not (isinstance(self.value, (int, float)) and math.isfinite(self.value)):
            raise ImplausibleValue(f"{self.metric}: an ok point needs a finite value, not "
                                   f"{self.value!r}")
        if self.ok and self.value < 0:
            raise ImplausibleValue(f"{self.metric} of {self.value!r} {self.unit}: negative")
        for what, v, low in (("file_size", self.file_size, 0), ("procs_per_host",
                             self.procs_per_host, 1), ("hosts", self.hosts, 1),
                             ("repeat", self.repeat, 0)):
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ImplausibleValue(f"{self.metric}: {what} must be an integer >= {low}, "
                                       f"not {v!r}")
        if not self.ok and not self.error:
            raise ValueError("a failed point must carry its reason in error")

    @property
    def nprocs(self) -> int:
        return self.procs_per_host * self.hosts

    def to_row(self) -> dict[str, Any]:
        """A flat dict for the db: config as JSON text, ok as 0/1, NaN value as None."""
        row = asdict(self)
        row["config"] = json.dumps(self.config, sort_keys=True)
        row["ok"] = int(self.ok)
        if not self.ok or not math.isfinite(self.value):
            row["value"] = None
        return row

    @classmethod
    def failed(cls, metric: str, file_size: int, procs_per_host: int, hosts: int, repeat: int,
               tool: str, error: str, tool_version: str | None = None,
               config: dict[str, Any] | None = None) -> "Point":
        return cls(metric, file_size, procs_per_host, hosts, math.nan, UNITS[metric], repeat,
                   tool, tool_version, dict(config or {}), ok=False, error=error)


def pair(metric_t: str, ops_per_s: float, bytes_per_op: int, **kw) -> list[Point]:
    """A throughput point and its bandwidth twin from one measurement: B = T x bytes per op."""
    metric_b = ALL_PAIRS[metric_t]
    return [Point(metric_t, value=ops_per_s, unit="ops/s", **kw),
            Point(metric_b, value=ops_per_s * bytes_per_op, unit="bytes/s", **kw)]


def parse_size(text: str) -> int:
    """'1k', '128K', '1m', '16MiB', '1 MiB', '4096', '1024 bytes' -> bytes (powers of two).

    This is how IOR, mdtest and fio read sizes on their command lines (k = KiB)."""
    import re
    s = str(text).strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgtp]?)(?:i?b|bytes?)?", s, re.I)
    if not m:
        raise ValueError(f"not a size: {text!r}")
    mult = {"": 1, "k": KiB, "m": MiB, "g": GiB, "t": 1 << 40, "p": 1 << 50}[m.group(2).lower()]
    v = float(m.group(1)) * mult
    if v != int(v):
        raise ValueError(f"size {text!r} is not a whole number of bytes")
    return int(v)
