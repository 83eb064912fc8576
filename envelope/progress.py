"""The progress of `mtcenvelope measure` on stderr: a bar with an estimate of the time left on a terminal."""
from __future__ import annotations

import math
import sys
import time
from typing import Sequence

from .sweep import Step


class Progress:
    """A bar with an estimate of the time left on stderr.  Not a terminal (a log file, a pipe): no bar, only a line
    per failed step and one when the last step is done."""

    def __init__(self, steps: Sequence[Step], stream=None, enabled: bool = True):
        self.total = sum(s.cost for s in steps) or 1.0
        self.n = len(steps)
        self.done_cost = 0.0
        self.i = 0
        self.t0 = time.monotonic()
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.failed = 0

    def update(self, step: Step, failed: bool = False) -> None:
        self.i += 1
        self.done_cost += step.cost
        self.failed += failed
        if not self.enabled:
            return
        el = time.monotonic() - self.t0
        frac = min(1.0, self.done_cost / self.total)
        eta = el / frac * (1 - frac) if frac > 0 else float("nan")
        pct = 100 * frac
        bar = "#" * int(30 * frac) + "." * (30 - int(30 * frac))
        msg = (f"[{bar}] {pct:5.1f}% {self.i}/{self.n} steps  {step.label():<24} "
               f"elapsed {fmt_t(el)}  left ~{fmt_t(eta)}"
               + (f"  failed {self.failed}" if self.failed else ""))
        if self.tty:
            self.stream.write("\r" + msg + ("\n" if self.i == self.n else ""))
            self.stream.flush()
        elif self.i == self.n or failed:
            self.stream.write(msg + "\n")
            self.stream.flush()

    def add(self, steps: Sequence[Step]) -> None:
        """Extra repeats of a point that has not met its precision target yet."""
        self.n += len(steps)
        self.total += sum(s.cost for s in steps)

    def note(self, text: str) -> None:
        if self.enabled:
            self.stream.write(("\n" if self.tty else "") + text + "\n")
            self.stream.flush()


def fmt_t(s: float) -> str:
    if not math.isfinite(s):
        return "?"
    s = int(round(s))
    return f"{s // 60}:{s % 60:02d}"
