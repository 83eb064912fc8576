"""The one interface every external benchmark driver implements (like IOR's aiori.h).

A driver knows three things about its tool:

* ``command(metric, file_size, nprocs, path, ...)`` -> argv that measures that metric;
* ``parse(text, context)`` -> list of :class:`Point` (raises :class:`ParseError`);
* ``detect(text)`` -> whether a text is this tool's output (used by ``parse_file``).

``context`` carries what an output cannot tell by itself (which metric a plain read
phase stands for, the hosts it ran on, the orchestrator's cache handling). Whatever it
holds under ``"config"`` is merged into every point's config, so a sweep records how a
point was made next to the numbers.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from abc import ABC, abstractmethod
from typing import Any, Sequence

from ..points import METRICS, ParseError, Point, TruncatedOutput

# How a multi-process run is launched when the tool itself is an MPI program. Placeholders:
# {nprocs} total processes, {hosts} host count, {ppn} processes per host, {hostlist} comma list.
DEFAULT_MPI_LAUNCHER = ("mpirun", "--oversubscribe", "-np", "{nprocs}")


def expand_launcher(launcher: Sequence[str] | None, *, nprocs: int, hosts: int = 1,
                    hostlist: Sequence[str] = ()) -> list[str]:
    if not launcher:
        return []
    ppn = max(1, nprocs // max(1, hosts))
    fill = {"nprocs": nprocs, "hosts": hosts, "ppn": ppn, "hostlist": ",".join(hostlist)}
    return [str(a).format(**fill) for a in launcher]


class Driver(ABC):
    name: str = ""
    executable: str = ""
    metrics: frozenset[str] = frozenset()   # metrics command() can build

    # -- measuring -----------------------------------------------------------------------
    @abstractmethod
    def command(self, metric: str, file_size: int, nprocs: int, path: str, *,
                hosts: int = 1, launcher: Sequence[str] | None = None,
                **options: Any) -> list[str]:
        """argv measuring ``metric`` for files of ``file_size`` bytes with ``nprocs`` processes
        in total spread over ``hosts`` hosts, on test path ``path``."""

    def check_metric(self, metric: str) -> None:
        if metric not in METRICS:
            raise ValueError(f"unknown metric {metric!r}")
        if metric not in self.metrics:
            raise ValueError(f"{self.name} cannot measure {metric}; it measures "
                             f"{', '.join(sorted(self.metrics))}")

    # -- reading -------------------------------------------------------------------------
    @abstractmethod
    def detect(self, text: str) -> bool:
        """True when ``text`` looks like this tool's output."""

    @abstractmethod
    def parse(self, text: str, context: dict[str, Any] | None = None) -> list[Point]:
        """Points of an output; raises ParseError (naming ``context['source']``) when it
        is empty, truncated or malformed. Never returns an empty list."""

    # -- environment ---------------------------------------------------------------------
    def available(self) -> bool:
        return shutil.which(self.executable) is not None

    def version(self) -> str | None:
        """The tool's version string as it reports it, or None when it is not on PATH."""
        exe = shutil.which(self.executable)
        if not exe:
            return None
        try:
            out = subprocess.run([exe, *self.version_args()], capture_output=True, text=True,
                                 timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr).strip() else None

    def version_args(self) -> list[str]:
        return ["--version"]


def source_of(context: dict[str, Any] | None) -> str:
    return (context or {}).get("source") or "<text>"


def require(cond: Any, context: dict[str, Any] | None, message: str,
            exc: type[ParseError] = ParseError) -> None:
    if not cond:
        raise exc(source_of(context), message)


def load_json(text: str, context: dict[str, Any] | None, what: str) -> Any:
    """json.loads with a ParseError naming the file; a document that stops before its
    closing brace (the writer was killed) is a TruncatedOutput."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        body = text.rstrip()
        cut = e.pos >= len(body) - 1 or not body.endswith(("}", "]")) or \
            e.msg.startswith("Unterminated")
        raise (TruncatedOutput if cut else ParseError)(
            source_of(context), f"{what} is {'truncated' if cut else 'malformed'}: {e.msg} "
            f"at line {e.lineno} column {e.colno}") from None
