"""Slots and rounds: S = C × procs per host tasks run at once.

The paper runs one task per node per round: C concurrent tasks, ⌈N/C⌉ rounds. A host with p slots runs p tasks at
once, so (`slots`)

    S = C · p,    R = ⌈N/S⌉ rounds, each charged at the I/O concurrency k (term `io_overlap`)
"""
from mtcio.predictor import formulas

SWITCHES = ("slots",)
STAGE_FIELDS = ("hosts", "procs_per_host")
ENVELOPE_METRICS = ()


def slots(stage, on) -> int:
    """S: the tasks the stage runs at once (C without `slots`)."""
    p = (stage.procs_per_host or 1) if "slots" in on else 1
    return stage.hosts * p


def count(N: int, S: int) -> int:
    """R: the rounds N tasks take on S slots."""
    return formulas.rounds(N, S)
