"""Keep a read run's inputs out of every cache before it starts, and say what was done (into the point's config).

On the testbed (one kernel, root) every gfsd spool file is written back (sync) and evicted (POSIX_FADV_DONTNEED): a
global drop_caches would also evict the daemons' and the engine's code and make every run start late. Elsewhere
``sync; echo 3 > /proc/sys/vm/drop_caches`` on every host where permitted. Whether gfarm2fs keeps a client page cache
is checked once per sweep with fincore.
"""
from __future__ import annotations

import os
import subprocess
import time
from typing import Any, Mapping

from .agent import Agent, run_many
from .sweep import Sweep
from .target import Target


class CacheEviction:
    def __init__(self, target: Target, sweep: Sweep, agents: Mapping[str, Agent]):
        self.t = target
        self.sw = sweep
        self.agents = agents
        self.client_cache: str | None = None    # what check_client_cache found, once

    def spools(self) -> list[str]:
        st = self.t.testbed or {}
        base = st.get("state_dir")
        return [os.path.join(base, "hosts", h["name"], "spool") for h in st.get("hosts", [])] \
            if base else []

    def drop(self) -> dict[str, Any]:
        """Keep reads from being served by a cache; returns what was done (for the config)."""
        t0 = time.monotonic()
        note = self.evict()
        note["seconds"] = round(time.monotonic() - t0, 3)
        return note

    def evict(self) -> dict[str, Any]:
        mode = self.sw.drop_caches
        if mode == "auto":
            mode = "evict" if self.t.same_kernel and self.spools() else "drop"
        note: dict[str, Any] = {"mode": mode, "inputs": "written by other processes",
                                "client": self.client_cache}
        if mode == "off":
            note["done"] = "nothing (--drop-caches off): reads may come from the page cache"
        elif mode == "evict":
            os.sync()         # one bulk write-back: dirty pages cannot be evicted
            n = 0
            errs = set()
            for sp in self.spools():
                for d, _, fs in os.walk(sp):
                    for f in fs:
                        try:
                            fd = os.open(os.path.join(d, f), os.O_RDONLY)
                            try:
                                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                                n += 1
                            finally:
                                os.close(fd)
                        except OSError as e:
                            errs.add(e.strerror)
            note["done"] = (f"sync, then every gfsd spool file ({n}) evicted from the page "
                            "cache (POSIX_FADV_DONTNEED) before the run"
                            + (f"; errors: {', '.join(sorted(errs))}" if errs else ""))
        elif self.t.same_kernel:
            try:
                os.sync()
                with open("/proc/sys/vm/drop_caches", "w") as f:
                    f.write("3\n")
                note["done"] = "sync + echo 3 > /proc/sys/vm/drop_caches (one kernel, all hosts)"
            except OSError as e:
                note["done"] = f"drop_caches not permitted ({e.strerror}): page cache kept"
        else:
            res = run_many([(a, "sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || "
                                "sudo -n sh -c 'echo 3 > /proc/sys/vm/drop_caches'")
                            for a in self.agents.values()], timeout=60)
            bad = [r.host for r in res if r.rc != 0]
            note["done"] = ("sync + drop_caches on every host" if not bad else
                            f"drop_caches not permitted on {', '.join(bad)}: their page cache kept")
        return note

    def check_client_cache(self, mount_path: str) -> None:
        """Once: does the gfarm2fs mount keep file pages after a read? (fincore)"""
        if self.client_cache is not None:
            return
        if self.t.backend == "gfarm":
            self.client_cache = "libgfarm backend: no kernel page cache on the client side"
            return
        if not self.t.same_kernel:
            self.client_cache = "not checked (remote hosts)"
            return
        try:
            cp = subprocess.run(["fincore", "--bytes", "--noheadings", "--raw",
                                 "--output", "RES", mount_path], capture_output=True, text=True,
                                timeout=10)
            res = int(cp.stdout.split()[0])
            self.client_cache = (f"fincore after a read through the mount: {res} bytes resident"
                                 + (" (gfarm2fs keeps no page cache for it)" if res == 0 else
                                    " (FUSE page cache used; evicted only by --drop-caches drop)"))
        except (OSError, ValueError, IndexError, subprocess.TimeoutExpired) as e:
            self.client_cache = f"not checked ({e})"
