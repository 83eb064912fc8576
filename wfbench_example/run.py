"""A prepared WfBench folder (wfbench_example/prepare.py) on the running testbed, through montage_example's
plumbing: the workflow's inputs stored round-robin over the hosts (`stage_inputs`: raw/ file i on hosts[i % n]),
rake with the plugin and its placement (`run_workflow`), every task traced.

    wall = run_once(bed, src, hosts, run="blast45x2r1", db="mtc.db")

The shim records only paths under the Gfarm mounts (MTCPROF_INCLUDE): a wfbench task is a Python program whose
start reads a thousand library files of the local disk, which are not the workflow's I/O.
"""
from __future__ import annotations

import os

from montage_example import bench, run as mrun


def trace_env(bed: mrun.Bed) -> dict:
    return {"MTCPROF_INCLUDE": os.path.commonpath(list(bed.mounts.values()))}


def run_once(bed: mrun.Bed, src: str, hosts: list, *, run: str, db: str, slots: int = 2, top: str | None = None,
             keep: bool = False) -> float:
    """montage_example's run_once with the Gfarm-only trace: `src` staged into a fresh folder `top` (default
    /wfbench-PID-RUN) and run there; returns rake's wall time.  The folder is removed afterwards unless keep."""
    return bench.run_once(bed, src, hosts, run=run, db=db, slots=slots, extra_env=trace_env(bed), keep=keep,
                          top=top or f"/wfbench-{os.getpid()}-{run}")
