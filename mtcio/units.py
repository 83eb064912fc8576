"""Numbers for people, with their units, the same in every terminal table and page: durations '12.3 s', '0.84 s',
'4.1 ms'; sizes '2.3 MiB' (binary units); intervals '51.1–58.9 s'; rates 'MiB/s'.  Imports nothing heavy."""
from __future__ import annotations

import math

NONE = "—"      # a value that does not exist (each table says why in its notes)


def _number(x) -> float | None:
    if x is None:
        return None
    try:
        x = float(x)
    except (TypeError, ValueError):     # pandas' NA, a string
        return None
    return None if math.isnan(x) else x


def fmt_bytes(n, none: str = NONE) -> str:
    """1536 -> '1.5 KiB', 2410560 -> '2.3 MiB', 300 -> '300 B'."""
    n = _number(n)
    if n is None:
        return none
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{int(n)} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"  # pragma: no cover


def fmt_s(s, none: str = NONE) -> str:
    """A duration with a unit and precision that fit it: '1,234 s', '12.3 s', '2.59 s', '0.20 s', '4.1 ms', '62 µs'."""
    s = _number(s)
    if s is None:
        return none
    a = abs(s)
    if a == 0:
        return "0 s"
    if a >= 100:
        return f"{s:,.0f} s"
    if a >= 10:
        return f"{s:.1f} s"
    if a >= 0.01:
        return f"{s:.2f} s"
    if a >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} µs"


def fmt_interval(lo, hi, fmt=fmt_s, none: str = NONE) -> str:
    """'51.1–58.9 s': the unit once when both ends have it, else on each end ('4.1 ms–0.12 s')."""
    if _number(lo) is None or _number(hi) is None:
        return none
    a, b = fmt(lo), fmt(hi)
    ua, ub = a.rsplit(" ", 1)[-1], b.rsplit(" ", 1)[-1]
    if ua == ub and " " in a:
        return f"{a.rsplit(' ', 1)[0]}–{b}"
    return f"{a}–{b}"


def fmt_rate(x, unit: str, none: str = NONE) -> str:
    """An envelope value in its unit: ops/s as '1,234 ops/s', bytes/s as '123.4 MiB/s'."""
    x = _number(x)
    if x is None:
        return none
    if unit in ("bytes/s", "B/s"):
        return fmt_bytes(x) + "/s"
    if abs(x) >= 100:
        return f"{x:,.0f} {unit}"
    return f"{x:.3g} {unit}"


def fmt_pct(x, signed: bool = False, none: str = NONE) -> str:
    """A percentage already in percent: '12.3 %', '+12.3 %'."""
    x = _number(x)
    if x is None:
        return none
    return f"{x:+.1f} %" if signed else f"{x:.1f} %"
