"""`--what-if hosts=2,4,8 alpha=0.6,1.0 filesize=x2 procs=1,4`: re-predict under changed parameters.

Each KEY=V1,V2,... is one axis; every combination is predicted (refined model) and each stage's total
and dominant term are reported, so one sees where the bottleneck moves.
  size=S,..      the workflow's size (a model that scales, `mtcprof model --size`): the stages instantiated
                 there (db/scaling.py); xF scales the size the model is at
  hosts=N,..     C of every stage; on a model that scales, with α, the busiest host's tasks and the I/O
                 concurrency by the rules of db/scaling.py (else a stage's tasks stay the same)
  procs=P,..     tasks at once per host
  alpha=A,..     local fraction of 1-to-1 reads (0..1)
  filesize=xF,.. every file size and byte count scaled by F (filesize=x2 doubles them); a plain number is a
                 size in bytes for every task file (read and write)
  tasks=xF|N     task count scaled by F or set to N
"""
from __future__ import annotations

import copy
import dataclasses
import itertools

from .model import predict_stage

KEYS = ("size", "hosts", "procs", "alpha", "filesize", "tasks")
ALLOWED = {"hosts": "a whole number >= 1", "procs": "a whole number >= 1", "alpha": "a number from 0 to 1",
           "size": "the workflow's size > 0, or xF to scale it by F > 0",
           "filesize": "bytes > 0, or xF to scale by F > 0", "tasks": "a whole number >= 1, or xF to scale by F > 0"}
AT = ("size", "hosts", "procs")      # the keys a model that scales is instantiated at


class WhatIfError(ValueError):
    pass


def parse(items: list[str]) -> list[tuple[str, list]]:
    axes = []
    for item in items:
        key, sep, vals = item.partition("=")
        key = key.strip()
        if not sep or key not in KEYS or not vals.strip():
            raise WhatIfError(f"--what-if {item!r}: expected KEY=V1,V2,... with KEY one of {', '.join(KEYS)}")
        out = []
        for v in vals.split(","):
            v = v.strip()
            try:
                if v.startswith("x"):
                    if key not in ("size", "filesize", "tasks"):
                        raise ValueError
                    f = float(v[1:])
                    if not f > 0:
                        raise ValueError
                    out.append(("x", f))
                elif key in ("hosts", "procs", "tasks"):
                    n = int(v)
                    if n < 1:
                        raise ValueError
                    out.append(("=", n))
                else:
                    f = float(v)
                    if key == "alpha" and not 0 <= f <= 1 or key in ("size", "filesize") and not f > 0:
                        raise ValueError
                    out.append(("=", f))
            except ValueError:
                raise WhatIfError(f"--what-if {key}: bad value {v!r} ({key} takes {ALLOWED[key]})") from None
        axes.append((key, out))
    if len({k for k, _ in axes}) != len(axes):
        raise WhatIfError("--what-if: a key given twice")
    return axes


def label(combo) -> str:
    return " ".join(f"{k}={'x' if op == 'x' else ''}{v:g}" for k, (op, v) in combo)


def apply(stage, combo):
    s = _copy(stage)
    for key, (op, v) in combo:
        if key == "hosts":
            s.hosts = int(v)
        elif key == "procs":
            s.procs_per_host = int(v)
        elif key == "alpha":
            s.read.alpha = float(v)
            if s.read.alpha_files is not None:      # refinement alpha_files splits the ops by it: the same share
                s.read.alpha_files = float(v)
        elif key == "tasks":
            s.tasks = max(1, int(round(s.tasks * v))) if op == "x" else int(v)
        elif key == "filesize":
            _scale_sizes(s, v, absolute=op == "=")
        else:           # size= is instantiated by run(), never applied to a stage: a key ignored here was a bug
            raise WhatIfError(f"--what-if {key}: not a change of one stage")
    return s


def _copy(obj):
    """A copy of a model's dataclass and of the dataclasses in it, their lists shared: apply() replaces a list,
    never edits one in place (a stage's op-size quantiles made copy.deepcopy a third of a stage-time map's time)."""
    if not dataclasses.is_dataclass(obj):
        return obj
    c = copy.copy(obj)
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if dataclasses.is_dataclass(v):
            setattr(c, f.name, _copy(v))
    return c


def _scale_sizes(s, v, absolute):
    def scale(d, per_file_count=1.0):
        if d is None:
            return
        for f in ("min", "mean", "max"):
            setattr(d, f, v * per_file_count if absolute else getattr(d, f) * v)
    scale(s.read.bytes_per_task, s.read.files_per_task or 1)
    scale(s.read.file_size)
    scale(s.write.bytes_per_task, s.write.files_per_task or 1)
    scale(s.write.file_size)
    for part in (s.read, s.shared, s.write):   # a spread of sizes is kept when scaled, gone when one size is given
        q = part.op_size_quantiles
        part.op_size_quantiles = None if absolute or not q else [x * v for x in q]
    if not absolute:
        s.shared.bytes = int(s.shared.bytes * v)
        s.shared.bytes_read_per_task *= v
    s.envelope = None


def check(axes, scaled) -> None:
    """size= needs a model that scales (WhatIfError otherwise)."""
    if any(k == "size" for k, _ in axes) and scaled is None:
        raise WhatIfError("--what-if size: this model has no workflow size (fit one from traced runs with "
                          "`mtcprof model --run R1,R2 --size R1=S1,R2=S2`); filesize= scales its file sizes")


def run(wf, surface, axes, refine=None, variant="refined", keep: list | None = None, scaled=None) -> list[dict]:
    """One row per (combination, stage): label, stage, total_s, read/write/meta, dominant. `keep`: a list the
    predictions are appended to (their look-ups say where the envelope was extrapolated). `scaled`: (model that
    scales, size, hosts, procs) that `wf` was instantiated at: size, hosts and procs instantiate it again."""
    from mtcio.db import scaling
    check(axes, scaled)
    rows = []
    for combo in itertools.product(*[[(k, v) for v in vals] for k, vals in axes]):
        stages = wf.stages
        if scaled is not None and any(k in AT for k, _ in combo):
            base, size, hosts, procs = scaled
            at = {"size": size, "hosts": hosts, "procs": procs}
            for k, (op, v) in combo:
                if k in AT:
                    at[k] = at[k] * v if op == "x" else v
            stages, _ = scaling.instantiate(base, at["size"], int(at["hosts"]), int(at["procs"]))
            combo_rest = [(k, v) for k, v in combo if k not in AT]
        else:
            combo_rest = combo
        for st in stages:
            p = predict_stage(apply(st, combo_rest), surface, variant, refine)
            if keep is not None:
                keep.append(p)
            rows.append({"what_if": label(combo), "stage": st.name, "N": p.N, "C": p.C, "slots": p.slots,
                         "alpha": p.alpha, "read_s": p.read_s, "write_s": p.write_s, "meta_s": p.meta_s,
                         "total_s": p.total_s, "dominant": p.dominant})
    return rows
