"""Where a sweep's files go in Gfarm, the directories made for them, and where their replicas really are (gfwhere).

One directory per run (``<workdir>/<name>-<pid>-<time>``); under it one per size x processes per host x hosts x
repeat x writer host, so a read run can name exactly the files another host wrote.
"""
from __future__ import annotations

import os
import time
from typing import Callable, Sequence

from mtcio.db.gfarm import parse_gfwhere

from .agent import Result
from .sweep import MeasureError, Step

GFWHERE_BATCH = 500     # paths per gfwhere call: one call per batch, well under the argument length limit


def safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:60]


class Placement:
    """``helper(argv, timeout)`` runs a metadata command (gfmkdir, gfwhere, gfrm) on the first host."""

    def __init__(self, workdir: str, run_name: str, hosts: Sequence[str],
                 helper: Callable[..., Result], timeout: float, log: Callable[[str], None]):
        self.root = f"{workdir.rstrip('/')}/{safe_name(run_name) or 'run'}-{os.getpid()}-" \
                    f"{int(time.time())}"
        self.hosts = list(hosts)
        self.helper = helper
        self.timeout = timeout
        self.log = log

    def wdir(self, size, ppn, h, rep, host) -> str:
        return f"{self.root}/s{size}/p{ppn}h{h}/r{rep}/{host}"

    def tmdir(self, ppn, h, rep) -> str:
        return f"{self.root}/tm/p{ppn}h{h}/r{rep}"

    def shared_path(self, size, h) -> str:
        return f"{self.root}/shared/s{size}h{h}"

    def files(self, size, ppn, h, rep, host, k) -> list[str]:
        d = self.wdir(size, ppn, h, rep, host)
        return [f"{d}/f{lr}_{i}" for lr in range(ppn) for i in range(k)]

    def where(self, paths: Sequence[str]) -> tuple[dict[str, list[str]], str]:
        """Replica hosts of many Gfarm paths with as few gfwhere calls as possible."""
        out: dict[str, list[str]] = {}
        errs = []
        for i in range(0, len(paths), GFWHERE_BATCH):
            chunk = list(paths[i:i + GFWHERE_BATCH])
            if len(chunk) == 1:   # keep the block format: one path makes gfwhere terse
                chunk = chunk + chunk
            r = self.helper(["gfwhere", *chunk], timeout=max(30.0, self.timeout))
            out.update(parse_gfwhere(r.stdout, chunk))
            if r.rc:
                errs.append(r.stderr.strip().splitlines()[0] if r.stderr.strip() else
                            f"gfwhere exit {r.rc}")
        return out, "; ".join(errs)

    def make_all(self, steps: Sequence[Step]) -> None:
        """The directories of every planned step, in one gfmkdir."""
        dirs = {self.root}
        for s in steps:
            if s.kind == "create":
                dirs.add(self.tmdir(s.ppn, s.h, s.rep))
            elif s.kind == "write":
                dirs.update(self.wdir(s.size, s.ppn, s.h, s.rep, host)
                            for host in self.hosts[:s.h])
            elif s.kind == "setup-shared":
                dirs.add(f"{self.root}/shared")
        r = self.helper(["gfmkdir", "-p", *sorted(dirs)], timeout=120)
        if r.rc:
            raise MeasureError(f"gfmkdir -p {self.root}/... on {self.hosts[0]} failed: "
                               f"{r.stderr.strip()[:500]}")

    def make_extra(self, batch: Sequence[Step]) -> None:
        """Directories of an extra repeat (make_all made the planned repeats' ones)."""
        dirs = []
        for s in batch:
            if s.kind == "create":
                dirs.append(self.tmdir(s.ppn, s.h, s.rep))
            elif s.kind == "write":
                dirs += [self.wdir(s.size, s.ppn, s.h, s.rep, host)
                         for host in self.hosts[:s.h]]
        if dirs:
            r = self.helper(["gfmkdir", "-p", *dirs], timeout=60)
            if r.rc:
                self.log(f"gfmkdir of an extra repeat failed: {r.stderr.strip()[:300]}")

    def remove(self, paths: Sequence[str]) -> None:
        self.helper(["gfrm", "-rf", *paths], timeout=max(60.0, self.timeout))
