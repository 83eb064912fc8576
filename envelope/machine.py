"""What else the machine is doing before an envelope is measured: its CPUs' busy share and its disks' busy share.

An envelope measured beside other work measures that work too. On the testbed (every host on one machine) a copy of
a 172 MB file and a `sync`, over and over at nice 19, halved the median rate of small ops and made one-op points
swing 2-5x between repeats; two CPU-bound processes at nice 19 slowed every point ~14 %
(docs/experiments/montage-passes.md, pass AL). `mtcenvelope measure` looks for a moment before it starts, says what it saw, and can wait for a quiet one.

Only this machine is seen: /proc/stat and /proc/diskstats of the kernel running the command. On a cluster that is
the client the sweep runs from, not the file system's servers.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

# a busier machine is said to be busy: one CPU-bound process on 4 CPUs is 25 %; before each of pass AN's 9 envelopes
# the testbed showed CPUs 0-3 % busy, disks 0 %, nothing written. A fast virtual disk can take 134 MiB/s of direct
# writes at 8 % busy, hence the written rate too.
CPU_BUSY = 0.25
DISK_BUSY = 0.20
WRITTEN_BUSY = 32 << 20


@dataclass(frozen=True)
class Load:
    """The machine over a window: share of CPU time not idle (iowait counts as idle), the busiest disk's share of
    time with I/O in flight (io_ticks), and bytes written to disks per second."""
    seconds: float
    cpu: float
    disk: float
    written: float

    def busy(self) -> bool:
        return self.cpu > CPU_BUSY or self.disk > DISK_BUSY or self.written > WRITTEN_BUSY

    def __str__(self) -> str:
        return (f"CPUs {self.cpu:.0%} busy, disks {self.disk:.0%} busy, {self.written / 2**20:.1f} MiB/s written "
                f"(over {self.seconds:.1f} s)")

    def as_dict(self) -> dict:
        return {"seconds": round(self.seconds, 2), "cpu": round(self.cpu, 3), "disk": round(self.disk, 3),
                "written_Bps": round(self.written)}


def _cpu() -> tuple[int, int]:
    """(busy, total) clock ticks of all CPUs since boot."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, steal = v + [0] * (8 - len(v))
    busy = user + nice + system + irq + softirq + steal
    return busy, busy + idle + iowait


def _disks() -> dict[str, tuple[int, int]]:
    """{disk: (sectors written, ms with I/O in flight)} of whole hardware disks: those with a device behind them in
    /sys/block (not partitions, loop, ram or device-mapper devices, which would count the same I/O twice)."""
    out = {}
    with open("/proc/diskstats") as f:
        for line in f:
            p = line.split()
            if len(p) >= 13 and os.path.exists(f"/sys/block/{p[2]}/device"):
                out[p[2]] = (int(p[9]), int(p[12]))
    return out


def look(seconds: float = 0.5) -> Load:
    """The machine's load over the next ``seconds``."""
    c0, d0, t0 = _cpu(), _disks(), time.monotonic()
    time.sleep(seconds)
    c1, d1, t1 = _cpu(), _disks(), time.monotonic()
    dt = max(t1 - t0, 1e-3)
    cpu = (c1[0] - c0[0]) / max(c1[1] - c0[1], 1)
    disk = max(((d1[k][1] - d0[k][1]) / 1000 / dt for k in d1 if k in d0), default=0.0)
    written = sum(d1[k][0] - d0[k][0] for k in d1 if k in d0) * 512 / dt
    return Load(dt, min(cpu, 1.0), min(disk, 1.0), written)


def wait_quiet(max_wait: float, seconds: float = 0.5, say=None) -> tuple[Load, float]:
    """Look until the machine is quiet or ``max_wait`` seconds have passed: (the last look, seconds waited).
    ``say`` gets a line when the first look is busy (and it will wait)."""
    t0 = time.monotonic()
    load = look(seconds)
    if load.busy() and max_wait > 0 and say:
        say(f"the machine is busy ({load}); waiting up to {max_wait:.0f} s for it to quiet down")
    while load.busy() and time.monotonic() - t0 + seconds <= max_wait:
        load = look(seconds)
    return load, time.monotonic() - t0
