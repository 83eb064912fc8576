"""A prepared WfBench folder (wfbench_example/prepare.py) on the running testbed, through montage_example's
plumbing: the workflow's inputs stored round-robin over the hosts (`stage_inputs`: raw/ file i on hosts[i % n]),
rake with the plugin and its placement (`run_workflow`), every task traced.

    wall = run_once(bed, src, hosts, run="blast45x2r1", db="mtc.db")
    wall = run_pwrake_once(bed, src, hosts, run="blast45pw", db="mtc.db")    # under real Pwrake (PWRAKE_SRC)

The shim records only paths under the Gfarm mounts (MTCPROF_INCLUDE): a wfbench task is a Python program whose
start reads a thousand library files of the local disk, which are not the workflow's I/O.
"""
from __future__ import annotations

import os
import shutil
import tempfile

from montage_example import bench, run as mrun


def trace_env(bed: mrun.Bed) -> dict:
    return {"MTCPROF_INCLUDE": os.path.commonpath(list(bed.mounts.values()))}


def run_once(bed: mrun.Bed, src: str, hosts: list, *, run: str, db: str, slots: int = 2, top: str | None = None,
             keep: bool = False) -> float:
    """montage_example's run_once with the Gfarm-only trace: `src` staged into a fresh folder `top` (default
    /wfbench-PID-RUN) and run there; returns rake's wall time.  The folder is removed afterwards unless keep."""
    return bench.run_once(bed, src, hosts, run=run, db=db, slots=slots, extra_env=trace_env(bed), keep=keep,
                          top=top or f"/wfbench-{os.getpid()}-{run}")


def run_pwrake_once(bed: mrun.Bed, src: str, hosts: list, *, run: str, db: str, slots: int = 2,
                    top: str | None = None, keep: bool = False, timeout: float = 900) -> float:
    """The same under real Pwrake in its Gfarm mode with the plugin (montage_example.run.run_pwrake; needs
    `mtcbed up --sshd`): Pwrake places the tasks by their inputs' locations.  Its workers mount their own
    gfarm2fs under a folder made for this run (GFARM_BASEDIR), the one the shim records (MTCPROF_INCLUDE).
    Returns Pwrake's wall time."""
    top = top or f"/wfbench-{os.getpid()}-{run}"
    mrun.stage_inputs(bed, top, src, hosts)
    logs = mrun.make_logdir(bed)
    base = tempfile.mkdtemp(prefix="mtcpwmnt.")
    os.chmod(base, 0o1777)                          # the workers (testbed user) make their mount points here
    try:
        res = mrun.run_pwrake(bed, top, hosts, run=run, db=db, logdir=logs, slots=slots, timeout=timeout,
                              extra_env={"GFARM_BASEDIR": base, "MTCPROF_INCLUDE": base})
    finally:
        shutil.rmtree(logs, ignore_errors=True)
        os.rmdir(base)                              # Pwrake unmounted and removed its mount points in it
        if not keep:
            bed.exec(hosts[0], ["rm", "-rf", bed.mounts[hosts[0]] + top], check=False)
    return res.wall_s
