"""What the Montage benchmarks (tests/bench/montage_*.py) share: a testbed session of their own, and one
traced run of the workflow in a fresh Gfarm folder.

    with testbed_session(4) as bed: ...          # waits for the machine's testbed lock; always torn down
    wall = run_once(bed, src, hosts, run="r1", db=..., extra_env=...)
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys

from . import run as mrun

MTCBED = [sys.executable, "-m", "mtcio.testbed.cli"]


@contextlib.contextmanager
def testbed_session(nodes: int = 4, up_args=()):
    with open("/run/mtcbed.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run(MTCBED + ["down"], capture_output=True)
        r = subprocess.run(MTCBED + ["up", "--nodes", str(nodes), *up_args], capture_output=True, text=True)
        if r.returncode:
            raise SystemExit(f"mtcbed up failed: {r.stderr.strip()}")
        try:
            yield mrun.Bed.current()
        finally:
            subprocess.run(MTCBED + ["down"], capture_output=True)


def run_once(bed, src: str, hosts: list, *, run: str, db: str, slots: int = 2, placement: str = "with",
             extra_env: dict | None = None, keep: bool = False) -> float:
    """Stage `src` (a prepared folder) into a fresh Gfarm folder, run the workflow there; returns rake's wall
    time.  The folder is removed afterwards unless keep."""
    top = f"/mbench-{os.getpid()}-{run}"
    mrun.stage_inputs(bed, top, src, hosts)
    logs = mrun.make_logdir(bed)
    try:
        res = mrun.run_workflow(bed, top, hosts, run=run, db=db, logdir=logs, placement=placement, slots=slots,
                                extra_env=extra_env)
    finally:
        shutil.rmtree(logs, ignore_errors=True)
        if not keep:
            bed.exec(hosts[0], ["rm", "-rf", bed.mounts[hosts[0]] + top], check=False)
    return res.wall_s
