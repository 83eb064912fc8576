"""A prepared WfBench folder (wfbench_example/prepare.py) on the running testbed, through montage_example's
plumbing: the workflow's inputs stored round-robin over the hosts (`stage_inputs`: raw/ file i on hosts[i % n]),
rake with the plugin and its placement (`run_workflow`), every task traced.

    wall = run_once(bed, src, hosts, run="blast45x2r1", db="mtc.db")

The shim records only paths under the Gfarm mounts (MTCPROF_INCLUDE): a wfbench task is a Python program whose
start reads a thousand library files of the local disk, which are not the workflow's I/O.
"""
from __future__ import annotations

import os
import shutil

from montage_example import run as mrun


def trace_env(bed: mrun.Bed) -> dict:
    return {"MTCPROF_INCLUDE": os.path.commonpath(list(bed.mounts.values()))}


def run_once(bed: mrun.Bed, src: str, hosts: list, *, run: str, db: str, slots: int = 2, top: str | None = None,
             keep: bool = False) -> float:
    """Stage `src` into a fresh Gfarm folder `top` (default /wfbench-PID-RUN), run it there traced; returns rake's
    wall time.  The folder is removed afterwards unless keep."""
    top = top or f"/wfbench-{os.getpid()}-{run}"
    mrun.stage_inputs(bed, top, src, hosts)
    logs = mrun.make_logdir(bed)
    try:
        return mrun.run_workflow(bed, top, hosts, run=run, db=db, logdir=logs, slots=slots,
                                 extra_env=trace_env(bed)).wall_s
    finally:
        shutil.rmtree(logs, ignore_errors=True)
        if not keep:
            bed.exec(hosts[0], ["rm", "-rf", bed.mounts[hosts[0]] + top], check=False)
