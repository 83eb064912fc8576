"""Where a sweep runs: the hosts, how to start a command on each, the mount and the engine (a running testbed's
own when one is up)."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from typing import Sequence

from . import engine as eng
from .sweep import MeasureError

TESTBED_LAUNCHER_DOC = "mtcbed exec {host} --"


@dataclass
class Target:
    hosts: list[str]
    launcher: list[str]                    # argv prefix with {host}
    launcher_doc: str
    backend: str = "posix"                 # posix on a gfarm2fs mount, or gfarm (libgfarm)
    mount: str = ""                        # posix path prefix of the Gfarm root, may hold {host}
    engine: str = str(eng.ENGINE)
    same_kernel: bool = False              # every host runs on this machine's kernel (testbed)
    testbed: dict | None = None

    def prefix(self, host: str) -> str:
        return "" if self.backend == "gfarm" else self.mount.format(host=host).rstrip("/")


def testbed_status() -> dict | None:
    """`mtcbed status --json` when a testbed is up on this machine, else None."""
    try:
        cp = subprocess.run([sys.executable, "-m", "mtcio.testbed.cli", "status", "--json"],
                            capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if cp.returncode:
        return None
    try:
        st = json.loads(cp.stdout)
    except ValueError:
        return None
    return st if st.get("phase") == "up" and st.get("hosts") else None


def make_target(hosts: Sequence[str] | None = None, launcher: str | None = None,
                mount: str | None = None, backend: str = "posix",
                engine: str | None = None) -> Target:
    st = testbed_status() if launcher is None or mount is None or not hosts else None
    exe = engine or str(eng.ENGINE)
    if engine is None:
        eng.build()
    if st:
        names = [h["name"] for h in st["hosts"]]
        mounts = {h["name"]: h["mount"] for h in st["hosts"]}
        hs = list(hosts) if hosts else names
        unknown = [h for h in hs if h not in names]
        if unknown and launcher is None:
            raise MeasureError(f"unknown testbed host(s) {', '.join(unknown)}; hosts are "
                               f"{', '.join(names)}")
        tmpl = mount
        if tmpl is None:
            tmpl = os.path.commonpath(list(mounts.values())) + "/{host}" \
                if all(mounts[n] == os.path.join(os.path.dirname(mounts[n]), n) for n in names) \
                else None
            if tmpl is None:
                raise MeasureError("cannot derive a mount template from the testbed; give --mount")
        if launcher is None:
            lau = [sys.executable, "-m", "mtcio.testbed.cli", "exec", "{host}", "--"]
            doc = TESTBED_LAUNCHER_DOC
        else:
            lau, doc = shlex.split(launcher), launcher
        return Target(hs, lau, doc, backend, tmpl, exe, same_kernel=True, testbed=st)
    if not hosts:
        raise MeasureError("no testbed is up here: name the hosts (--hosts h1,h2,...) and how to "
                           "reach them (--launcher 'ssh {host}')")
    if backend == "posix" and not mount:
        raise MeasureError("--backend posix needs --mount (the gfarm2fs mount point on every "
                           "host, may contain {host}), or use --backend gfarm")
    lau = launcher or "ssh {host}"
    return Target(list(hosts), shlex.split(lau), lau, backend, mount or "", exe,
                  same_kernel=False)
