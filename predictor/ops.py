"""The ops one task of a stage does, by the time component they are charged to (a prediction's `terms`).

    task = task_ops(stage, surface, on, need, notes)   # task.ops: component -> ops, task.size: bytes per op

Components: 1-to-1 reads of a local and of a remote replica, N-to-1 reads of the shared input, writes, and
metadata ops; each is looked up at one envelope throughput (TERM_METRIC). The refined model's terms
(predictor/terms/) that shape the ops are applied here, in this order: data_ops, alpha_files, reopen, metadata.
"""
from __future__ import annotations

from dataclasses import dataclass

from .terms import alpha_files, data_ops, metadata, reopen

TERMS = ("meta", "read_local", "read_remote", "read_shared", "write")
# component -> the envelope throughput its ops are looked up at
TERM_METRIC = {"read_local": "T1L", "read_remote": "T1R", "read_shared": "TN", "write": "TL", "meta": "Tm"}
TERM_LABEL = {"meta": "metadata", "read_local": "local read", "read_remote": "remote read",
              "read_shared": "N-to-1 read", "write": "write"}


@dataclass
class TaskOps:
    ops: dict             # component -> ops per task (> 0 only)
    size: dict            # component -> bytes per op
    reopened: dict        # read component -> opens per file (> 1 only; term reopen)
    n_stat: float         # of the metadata ops, those at Ts
    n_fstat: float        # and at Tf
    D: float              # bytes read per task (1-to-1), as charged
    D_N: float            # bytes of the shared input per task
    D_write: float        # bytes written per task
    alpha: float


def alpha_of(stage, reads: bool, notes) -> float:
    """α, the local share of the 1-to-1 read bytes; 1 when unknown (said in the notes)."""
    if stage.read.alpha is None:
        if reads:
            notes.append("α unknown (replicas not resolved): taken as 1.0, every 1-to-1 read local")
        return 1.0
    return stage.read.alpha


def task_ops(stage, surface, on, need, notes) -> TaskOps:
    alpha = alpha_of(stage, need["read"], notes)
    D = data_ops.read_bytes(stage, on)
    D_N = data_ops.shared_bytes(stage, on) if need["shared"] else 0.0
    D_w = stage.write.bytes_per_task.mean
    ops, size = {}, {}
    if need["read"]:
        n, s = data_ops.split(D, stage.read.files_per_task, on)
        a = alpha_files.local_share(stage, on, alpha)
        ops["read_local"], ops["read_remote"] = a * n, (1 - a) * n
        size["read_local"] = size["read_remote"] = s
    if need["shared"]:
        ops["read_shared"], size["read_shared"] = data_ops.split(D_N, data_ops.shared_files(stage, on, D_N), on)
    if need["write"]:
        ops["write"], size["write"] = data_ops.split(D_w, stage.write.files_per_task, on)
    reopened = reopen.opens(stage, ops, on)
    reopen.apply(ops, size, reopened)
    n_stat, n_fstat = metadata.charge(stage, surface, ops, size, on, notes)
    ops = {t: n for t, n in ops.items() if n > 0}
    return TaskOps(ops, size, reopened, n_stat, n_fstat, D, D_N, D_w, alpha)
