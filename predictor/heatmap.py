"""The maps of a prediction (numpy arrays; report.py draws them).

x is always the file size (log), y the concurrency k (processes doing I/O at once) or the node count C.
- bandwidth(metric): the predicted aggregate bandwidth of k concurrent whole-file ops of one size; for
  writes with the model's one create per round, k·s / (1/Tm + k/TL) (equation (2) per round, T at the size);
- stage_time: the refined prediction of one stage with every task file of size s on C nodes;
- dominant: per cell, which term of a stage-shaped task (its α, files and shared header) is largest.
"""
from __future__ import annotations

import math

import numpy as np

from .model import TERMS
from .surface import SIZELESS, grid_values

DOMINANT_LABELS = ["metadata", "local read", "remote read", "N-to-1 read", "write"]


def axes(surface, stages, n=64):
    """Log-spaced sizes (the envelope's and every stage's, with margin) and concurrencies (1 to the largest measured
    or used)."""
    sizes, ks = [], []
    for (m, _), g in surface.grids.items():
        if m not in SIZELESS:
            sizes += [g.sizes[0], g.sizes[-1]]
        ks += [g.ks[0], g.ks[-1]]
    for st in stages:
        for d in (st.read.file_size, st.write.file_size):
            if d and d.mean > 0:
                sizes.append(d.mean)
        ks.append(st.hosts * (st.procs_per_host or 1))
    lo, hi = max(min(sizes) / 4, 64), max(sizes) * 4
    # concurrency up to what was measured (or a stage's own, if higher): beyond it a map would be regression only
    return (np.exp(np.linspace(math.log(lo), math.log(hi), n)),
            np.exp(np.linspace(0, math.log(max(max(ks), 2)), n)))


def bandwidth(surface, metric_t, sizes, ks, hosts=None, with_create=False):
    """Predicted aggregate bandwidth (bytes/s) [k, size] of k concurrent ops on files of each size."""
    T = grid_values(surface, metric_t, sizes, ks, hosts)
    per_round = ks[:, None] / T
    if with_create:
        per_round = per_round + 1.0 / grid_values(surface, "Tm", sizes, ks, hosts)
    return ks[:, None] * sizes[None, :] / per_round


def stage_time(surface, stage, sizes, nodes):
    """Refined-model I/O time [C, size] of `stage` with its task files resized to each size on C nodes."""
    from .model import predict_stage
    from .whatif import apply
    out = np.zeros((len(nodes), len(sizes)))
    for i, c in enumerate(nodes):
        for j, s in enumerate(sizes):
            st = apply(stage, [("hosts", ("=", int(c))), ("filesize", ("=", float(s)))])
            st.tasks = max(st.tasks, 1)
            out[i, j] = predict_stage(st, surface, "refined", {"slots", "size_lookup", "files", "small_files"}).total_s
    return out


def reference_size(stage) -> float:
    """The stage's largest task file: the x position of the stage on the dominant-term map."""
    sizes = [d.mean for d in (stage.read.file_size, stage.write.file_size) if d and d.mean > 0]
    if not sizes:
        per = [x for x in (stage.read.bytes_per_task.mean / (stage.read.files_per_task or 1),
                           stage.write.bytes_per_task.mean / (stage.write.files_per_task or 1)) if x > 0]
        sizes = per or [1.0]
    return max(sizes)


def dominant(surface, stage, sizes, ks, hosts=None):
    """Index into DOMINANT_LABELS [k, size] of the largest per-task term of a task shaped like `stage` whose
    files are all scaled by size / reference_size(stage) (the shared header keeps its size)."""
    r, sh, w = stage.read, stage.shared, stage.write
    a = 1.0 if r.alpha is None else r.alpha
    K = ks[:, None]
    F = sizes / reference_size(stage)
    terms = np.zeros((len(TERMS), len(ks), len(sizes)))
    fr = r.files_per_task or (1.0 if r.bytes_per_task.mean > 0 else 0.0)
    fw = w.files_per_task or (1.0 if w.bytes_per_task.mean > 0 else 0.0)
    s_r = (r.bytes_per_task.mean / fr if fr else 0.0) * F
    s_w = (w.bytes_per_task.mean / fw if fw else 0.0) * F
    if fr and a > 0:
        terms[1] = K * a * fr / grid_values(surface, "T1L", s_r, ks, hosts)
    if fr and a < 1:
        terms[2] = K * (1 - a) * fr / grid_values(surface, "T1R", s_r, ks, hosts)
    if sh.files and sh.bytes:
        s_n = np.full_like(sizes, max(sh.bytes / sh.files, 1.0))
        terms[3] = K * sh.files / grid_values(surface, "TN", s_n, ks, hosts)
    if fw:
        terms[4] = K * fw / grid_values(surface, "TL", s_w, ks, hosts)
    extra = max(0.0, stage.metadata.ops_per_task - fr - fw - (sh.files if sh.bytes else 0))
    extra += max(0.0, stage.metadata.creates_per_task - fw)
    terms[0] = K * extra / grid_values(surface, "Tm", sizes, ks, hosts) if extra else 0.0
    return terms.argmax(axis=0)
