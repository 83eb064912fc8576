"""The round-based I/O-time formulas of the MTC prediction model, in the paper's symbols.

N   tasks in the stage                    C    compute nodes (hosts); one task per node per round
D   bytes per task file                   D_N  bytes of the shared (N-to-1) input
α   fraction of 1-to-1 reads that are local (a replica on the reading task's node)
Tm  create throughput (ops/s)
TL, BL    local write throughput (ops/s) and bandwidth (bytes/s)
T1L, B1L  1-to-1 local read;  T1R, B1R  1-to-1 remote read;  TN, BN  N-to-1 read

Throughputs and bandwidths are aggregate rates of all concurrent processes (an envelope point at
concurrency k is k processes' ops over the same span), so C ops issued at once take C/T.

`write_bandwidth_bound`, `write_throughput_bound` and `read_time` are equations (1), (2) and (3)
exactly as written; `task_io_time` is the refined per-task form (predictor/README.md, "Refined").
Only `math` is imported: this module is the arithmetic and nothing else.
"""
import math


def rounds(N: int, C: int) -> int:
    """⌈N/C⌉: rounds of C concurrent tasks needed for N tasks."""
    if N < 0 or C < 1:
        raise ValueError(f"rounds needs N >= 0 and C >= 1, got N={N}, C={C}")
    return math.ceil(N / C)


def write_bandwidth_bound(N, C, D, Tm, BL):
    """Equation (1), write, bandwidth-bound:  Time = ⌈N/C⌉ · (1/Tm + C·D/BL)."""
    return rounds(N, C) * (1 / Tm + C * D / BL)


def write_throughput_bound(N, C, Tm, TL):
    """Equation (2), write, throughput-bound:  Time = ⌈N/C⌉ · (1/Tm + C/TL)."""
    return rounds(N, C) * (1 / Tm + C / TL)


def read_time(N, C, alpha, D, D_N, T1L, B1L, T1R, B1R, TN, BN):
    """Equation (3), read:

        Time = ⌈N/C⌉ · [ max(αC/T1L, C·αD/B1L) + max((1−α)C/T1R, C·(1−α)D/B1R) + max(C/TN, C·D_N/BN) ]

    A stage without N-to-1 input passes D_N = 0 and TN = BN = None: its third term is 0 (the
    equation is written for a stage that has all three read classes)."""
    return rounds(N, C) * sum(read_terms(C, alpha, D, D_N, T1L, B1L, T1R, B1R, TN, BN).values())


def read_terms(C, alpha, D, D_N, T1L, B1L, T1R, B1R, TN, BN):
    """The three per-round terms of equation (3): {'local': ..., 'remote': ..., 'shared': ...} seconds."""
    local = max(alpha * C / T1L, C * alpha * D / B1L) if alpha > 0 else 0.0
    remote = max((1 - alpha) * C / T1R, C * (1 - alpha) * D / B1R) if alpha < 1 else 0.0
    shared = max(C / TN, C * D_N / BN) if D_N > 0 else 0.0
    return {"local": local, "remote": remote, "shared": shared}


def write_terms(C, D, Tm, TL, BL):
    """Per-round terms of equations (1)/(2): metadata 1/Tm and the data term of the bound that applies.

    Returns (terms, bound): bound is 'bandwidth' when C·D/BL >= C/TL (equation (1) is the larger),
    else 'throughput' (equation (2)). The larger of the two is the write time charged."""
    by_bw, by_ops = C * D / BL, C / TL
    bound = "bandwidth" if by_bw >= by_ops else "throughput"
    return {"meta": 1 / Tm, "write": max(by_bw, by_ops)}, bound


def task_io_time(k, ops, rates):
    """Refined model: the I/O time of one task whose operations run while k tasks do I/O at once.

    `ops` maps a term to the task's operations of that kind and `rates` to the aggregate rate (ops/s)
    at concurrency k, so the task's share of each is k·ops/rate: equation (2)'s C/TL per op with C
    replaced by k, summed over the task's operations. Returns {term: seconds}."""
    return {term: (k * n / rates[term] if n else 0.0) for term, n in ops.items()}
