"""Placement balance: the rounds are counted on the busiest host, which ends the stage.

The paper's ⌈N/S⌉ rounds assume every host runs N/C tasks. Placement that follows the data does not: with the
busiest host running m tasks (the trace's `tasks_max_per_host`), every slot is taken to be as loaded as it, so

    N → min(m, N) · C    when m · C > N

Evidence: a fan-out stage on 4 hosts ran 13/13/13/3 tasks, 1.24x an even share (montage_example/RESULTS.md).
`--what-if` keeps the same ratio to an even share.
"""
SWITCHES = ("balance",)
STAGE_FIELDS = ("tasks", "hosts", "tasks_max_per_host")
ENVELOPE_METRICS = ()


def tasks_counted(stage, on, notes) -> int:
    """The task count the rounds are counted over: N, or the busiest host's tasks × C."""
    N, C = stage.tasks, stage.hosts
    if "balance" in on and stage.tasks_max_per_host and stage.tasks_max_per_host * C > N:
        m = min(stage.tasks_max_per_host, N)
        notes.append(f"placement: the busiest host ran {m} of {N} tasks, {m * C / N:.2f}x an even share; rounds "
                     f"counted on it")
        return m * C
    return N
