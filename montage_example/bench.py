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
import struct
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


def poll_idle():
    """An open /dev/cpu_dma_latency holding 0 us: idle CPUs poll instead of halting while it stays open (on this VM a
    halted vCPU's wake-up sat in every small op: docs/experiments/montage-passes.md, passes S and T). None (and a
    line saying so) where the machine has no such device or it may not be written."""
    try:
        fd = os.open("/dev/cpu_dma_latency", os.O_WRONLY)
        os.write(fd, struct.pack("i", 0))
    except OSError as e:
        print(f"idle CPUs left as they are: /dev/cpu_dma_latency: {e.strerror}", flush=True)
        return None
    print("idle CPUs kept polling (/dev/cpu_dma_latency: 0 us) until this command ends", flush=True)
    return fd


def run_once(bed, src: str, hosts: list, *, run: str, db: str, slots: int = 2, placement: str = "with",
             extra_env: dict | None = None, keep: bool = False, top: str | None = None) -> float:
    """Stage `src` (a prepared folder) into a fresh Gfarm folder `top` (default /mbench-PID-RUN), run the workflow
    there; returns rake's wall time.  The folder is removed afterwards unless keep."""
    top = top or f"/mbench-{os.getpid()}-{run}"
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
