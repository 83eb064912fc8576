"""Slots and rounds: S = C × procs per host tasks run at once, and the last round holds only the tasks left.

The paper runs one task per node per round: C concurrent tasks, ⌈N/C⌉ full rounds. A host with p slots runs p
tasks at once, so (`slots`)

    S = C · p,    ⌈N/S⌉ rounds

and (`partial_round`) the last round of a stage whose N is not a multiple of S holds N mod S tasks, which do I/O
at k = min(k, N mod S) at once:

    ⌊N/S⌋ rounds at k, and one round at min(k, N mod S)

(without it every round is charged at k). N here is the task count the rounds are counted over (term `balance`
may raise it to the busiest host's share × C).
"""
from mtcio.predictor import formulas

SWITCHES = ("slots", "partial_round")
STAGE_FIELDS = ("hosts", "procs_per_host")
ENVELOPE_METRICS = ()


def slots(stage, on) -> int:
    """S: the tasks the stage runs at once (C without `slots`)."""
    p = (stage.procs_per_host or 1) if "slots" in on else 1
    return stage.hosts * p


def shapes(Nr: int, S: int, k: float, on) -> tuple:
    """(R, [(rounds, I/O concurrency, processes starting at once)]) for Nr tasks on S slots."""
    if "partial_round" in on:
        full, rem = divmod(Nr, S)
        R = full + (1 if rem else 0)
        return R, ([(full, k, S)] if full else []) + ([(1, min(k, float(rem)), min(S, rem))] if rem else [])
    R = formulas.rounds(Nr, S)
    return R, [(R, k, S)]
