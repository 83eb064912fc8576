"""Synthetic workflow stages on the testbed, traced by the real shim, for the predictor's tests and benchmark.

    logdir = run_stage(bed, share, kind="write", N=16, C=2, ppn=2, size=1 << 20, run="w1")

kind: write (each task writes one size-byte file on its host), read-local / read-remote (each task reads
its own file, written beforehand on its own host / on the next host), read-shared (every task reads one
file written on the first host). Each host runs its N/C tasks `ppn` at a time (xargs -P); hosts run at
once. Transfers are 1 MiB calls (dd), as the envelope engine's. Reads start with the gfsd spools'
pages evicted, as `mtcenvelope measure` does before a read run.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys

MTCBED = [sys.executable, "-m", "mtcio.testbed.cli"]
MiB = 1 << 20


def prepare_share(base: str) -> str:
    """A folder every testbed host can read, holding the shim."""
    from mtcio.preload.testing import LIB, ensure_built
    ensure_built()
    os.makedirs(base, exist_ok=True)
    os.chmod(base, 0o755)
    lib = os.path.join(base, "libmtcprof.so")
    shutil.copy(LIB, lib)
    os.chmod(lib, 0o755)
    return lib


def make_logdir(bed, path: str) -> str:
    """A log folder the shim accepts from the tasks: owned by the testbed user, writable by it only."""
    os.makedirs(path, exist_ok=True)
    shutil.chown(path, bed.user, bed.user)
    os.chmod(path, 0o700)
    return path


def _dd(src, dst, size):
    bs = min(size, MiB) or 1
    count = max(1, -(-size // bs))
    return f"dd if={src} of={dst} bs={bs} count={count} status=none"


def evict(bed_status: dict) -> None:
    os.sync()
    base = bed_status.get("state_dir")
    for h in bed_status.get("hosts", []):
        for d, _, fs in os.walk(os.path.join(base, "hosts", h["name"], "spool")):
            for f in fs:
                try:
                    fd = os.open(os.path.join(d, f), os.O_RDONLY)
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    os.close(fd)
                except OSError:
                    pass


def run_stage(bed, lib: str, logdir: str, *, kind: str, N: int, C: int, ppn: int, size: int, run: str,
              stage: str | None = None, top: str | None = None) -> dict:
    """Run one traced stage; returns {stage, top, tasks: {task: host}}."""
    hosts = bed.hosts[:C]
    stage = stage or f"{kind}-{size}-{C}x{ppn}"
    top = top or f"/synth-{os.getpid()}-{run}-{stage}"
    bed.exec(hosts[0], ["mkdir", "-p", bed.mount(hosts[0]) + top])
    tasks = {f"{stage}.t{i}": hosts[i % C] for i in range(N)}
    if kind.startswith("read"):
        jobs = []
        for i, (t, h) in enumerate(tasks.items()):
            if kind == "read-shared":
                if i:
                    continue
                wh, name = hosts[0], "shared"
            else:
                wh = h if kind == "read-local" else hosts[(hosts.index(h) + 1) % C]
                name = f"in{i}"
            jobs.append(subprocess.Popen(MTCBED + ["exec", wh, "--", "sh", "-c",
                                                   _dd("/dev/zero", f"{bed.mount(wh)}{top}/{name}", size)]))
        for j in jobs:
            assert j.wait() == 0
        status = json.loads(subprocess.run(MTCBED + ["status", "--json"], capture_output=True, text=True,
                                           check=True).stdout)
        evict(status)
    procs = []
    for h in hosts:
        m = bed.mount(h) + top
        lines = []
        for i, (t, th) in enumerate(tasks.items()):
            if th != h:
                continue
            if kind == "write":
                cmd = _dd("/dev/zero", f"{m}/out{i}", size)
            elif kind == "read-shared":
                cmd = _dd(f"{m}/shared", "/dev/null", size)
            else:
                cmd = _dd(f"{m}/in{i}", "/dev/null", size)
            env = (f"LD_PRELOAD={lib} MTCPROF_DIR={logdir} MTCPROF_RUN={run} MTCPROF_TASK={t} "
                   f"MTCPROF_STAGE={stage}")
            lines.append(f"env {env} sh -c {shlex.quote(cmd)}")
        script = "\n".join(lines) + "\n"
        procs.append(subprocess.Popen(
            MTCBED + ["exec", h, "--", "sh", "-c", f"xargs -d '\\n' -P {ppn} -I CMD sh -c CMD"],
            stdin=subprocess.PIPE, text=True))
        procs[-1].stdin.write(script)
        procs[-1].stdin.close()
    for p in procs:
        assert p.wait() == 0
    return {"stage": stage, "top": top, "tasks": tasks}


def ingest(bed, logdir: str, db: str, run: str) -> None:
    r = subprocess.run([sys.executable, "-c", "import sys; from mtcio.cli import mtcprof; sys.exit(mtcprof())",
                        "ingest", logdir, "--db", db, "--run", run,
                        "--gfwhere-cmd", " ".join(MTCBED + ["exec", bed.hosts[0], "--", "gfwhere"])],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
