"""The CPUs this process may run on (its affinity mask; the machine's count where there is no such call): what
decides whether work is worth splitting over two processes.  Imports nothing heavy."""
from __future__ import annotations

import os


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1
