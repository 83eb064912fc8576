"""External benchmark drivers (one module per tool, one interface: :class:`base.Driver`).

``parse_file(path)`` is what ``mtcenvelope import FILE...`` calls: it recognises the tool
from the content (never from the file name) and returns the file's points.
"""
from __future__ import annotations

import os
from typing import Any

from ..points import ImplausibleValue, ParseError, Point, UnknownFormat
from .base import Driver
from .fio import FioDriver
from .ior import IORDriver
from .iozone import IozoneDriver
from .mdtest import MdtestDriver

DRIVERS: dict[str, Driver] = {d.name: d for d in (IORDriver(), MdtestDriver(), FioDriver(),
                                                   IozoneDriver())}


def get_driver(name: str) -> Driver:
    try:
        return DRIVERS[name]
    except KeyError:
        raise ValueError(f"unknown tool {name!r}; one of {', '.join(DRIVERS)}") from None


def detect(text: str) -> Driver | None:
    for d in DRIVERS.values():
        if d.detect(text):
            return d
    return None


def parse_text(text: str, context: dict[str, Any] | None = None,
               tool: str | None = None) -> list[Point]:
    ctx = dict(context or {})
    src = ctx.get("source", "<text>")
    if not text.strip():
        raise ParseError(src, "empty file: no benchmark output in it")
    driver = get_driver(tool) if tool else detect(text)
    if driver is None:
        if text.lstrip().startswith("Writing output to "):
            raise ParseError(src, "this is the stdout of an IOR run with -O summaryFormat=JSON; "
                             "parse the summary file it names instead")
        first = text.strip().splitlines()[0][:80]
        raise UnknownFormat(src, "not the output of a known tool (IOR text/JSON, mdtest, fio "
                            f"--output-format=json, iozone); it starts with {first!r}")
    try:
        pts = driver.parse(text, ctx)
    except ParseError as e:
        if e.source == "<text>" and src != "<text>":   # a helper that did not know the file
            raise type(e)(src, e.reason) from None
        raise
    except ImplausibleValue as e:
        raise ParseError(src, f"implausible value in this {driver.name} output: {e}") from None
    except RecursionError:
        raise ParseError(src, f"{driver.name} output nested too deeply") from None
    except (ValueError, TypeError, AttributeError, KeyError, IndexError, ZeroDivisionError,
            OverflowError) as e:
        # a damaged output the driver's checks did not foresee: the file and the reason,
        # never a traceback
        raise ParseError(src, f"malformed {driver.name} output: {type(e).__name__}: "
                         f"{str(e)[:200]}") from None
    if not pts:
        raise ParseError(src, f"no envelope point in this {driver.name} output")
    zero = next((p for p in pts if p.ok and p.value == 0), None)
    if zero is not None:        # a rate the output printed as 0 (nothing moved, or too small to print) predicts nothing
        raise ParseError(src, f"{zero_rate(zero)} in this {driver.name} output; nothing imported")
    return pts


def zero_rate(p: Point) -> str:
    """The words for an ok point whose rate is 0, naming it."""
    return (f"{p.metric} at file size {p.file_size}, {p.procs_per_host} per host on {p.hosts} hosts, repeat "
            f"{p.repeat}: a rate of 0 {p.unit} is no measurement")


MAX_OUTPUT = 256 << 20     # bytes: a benchmark report is far smaller


def read_output(path: str | os.PathLike) -> bytes:
    """The bytes of a benchmark output: a regular file (not a device, FIFO or folder), at
    most MAX_OUTPUT bytes; ParseError naming the file otherwise."""
    import stat
    p = os.fspath(path)
    try:
        # O_NONBLOCK: a FIFO is refused below instead of waiting for a writer
        with os.fdopen(os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise ParseError(p, "not a regular file")
            raw = f.read(MAX_OUTPUT + 1)
    except OSError as e:
        raise ParseError(p, f"cannot read: {e.strerror}") from None
    if len(raw) > MAX_OUTPUT:
        raise ParseError(p, f"larger than {MAX_OUTPUT >> 20} MiB: not a benchmark report")
    return raw


def parse_file(path: str | os.PathLike, context: dict[str, Any] | None = None,
               tool: str | None = None) -> list[Point]:
    """Points of one benchmark output file; raises ParseError naming the file."""
    p = os.fspath(path)
    raw = read_output(p)
    text = raw.decode("utf-8", errors="replace")
    ctx = dict(context or {})
    ctx.setdefault("source", p)
    return parse_text(text, ctx, tool)


__all__ = ["DRIVERS", "Driver", "get_driver", "detect", "parse_text", "parse_file"]
