"""A sweep's file sizes from the workload it is for: `mtcenvelope measure --sizes-from FILE[,FILE..]`.

FILE is a WfFormat instance (JSON: a `*.json` name or text starting with `{`) or a workflow model (YAML, what
`mtcprof model` writes). The sizes are its files': every nonzero file size of an instance; of a model, each
stage's file-size min/mean/max and its bytes-per-op quantiles (reads, shared reads, writes). The sweep then
spans them: `points` sizes spaced evenly in log scale from the smallest to the largest, both included, rounded
to whole bytes (fewer when the span has fewer distinct whole sizes). An envelope measured only at 4 KiB-1 MiB
clamps a workload's 1-byte files to its smallest point and extrapolates its large ones; one measured over the
workload's own span does neither.
"""
from __future__ import annotations

import math

DEFAULT_POINTS = 8


class SizesFromError(ValueError):
    """A file that is neither a readable WfFormat instance nor a workflow model, or one with no file sizes."""


def _is_json(path: str) -> bool:
    if path.endswith(".json"):
        return True
    with open(path, "rb") as f:
        return f.read(64).lstrip()[:1] == b"{"


def file_sizes(path: str) -> list[float]:
    """The nonzero file sizes (bytes) `path` states; SizesFromError with one line when it cannot be read."""
    try:
        if _is_json(path):
            from mtcio.db.wfformat import WfFormatError, read_instance
            try:
                inst = read_instance(path)
            except WfFormatError as e:
                raise SizesFromError(str(e)) from None
            return [float(s) for s in inst.sizes.values() if s > 0]
        from mtcio.db.workflow_model import ModelError, load
        try:
            wf = load(path)
        except ModelError as e:
            raise SizesFromError(str(e)) from None
    except OSError as e:
        raise SizesFromError(f"{path}: {e.strerror or e}") from None
    out = []
    for st in wf.stages:
        for part in (st.read, st.write):
            if part.file_size is not None:
                out += [part.file_size.min, part.file_size.mean, part.file_size.max]
        if st.shared.files:
            out.append(st.shared.bytes / st.shared.files)
        for part in (st.read, st.shared, st.write):
            out += list(part.op_size_quantiles or [])
    return [float(x) for x in out if x is not None and x > 0]


def span(sizes: list[float], points: int = DEFAULT_POINTS) -> list[int]:
    """`points` whole byte sizes evenly spaced in log scale from min(sizes) to max(sizes), both included."""
    if points < 1:
        raise SizesFromError(f"--size-points: expected >= 1, got {points}")
    lo, hi = max(1, round(min(sizes))), max(1, round(max(sizes)))
    if points == 1 or lo == hi:
        return [hi]
    step = (math.log(hi) - math.log(lo)) / (points - 1)
    return sorted({lo, hi, *(round(math.exp(math.log(lo) + i * step)) for i in range(1, points - 1))})


def sizes_from(paths: list[str], points: int = DEFAULT_POINTS) -> list[int]:
    """The sweep's sizes spanning every file size of `paths` (instances and models, together)."""
    sizes = []
    for p in paths:
        got = file_sizes(p)
        if not got:
            raise SizesFromError(f"{p}: no file with a size above 0 bytes")
        sizes += got
    return span(sizes, points)
