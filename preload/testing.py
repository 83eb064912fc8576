"""Helpers for the shim's tests and benchmarks: build, run a command traced or untraced, read its logs."""
from __future__ import annotations

import os
import subprocess
import threading

from mtcio.db.logformat import MtcLog, read_log

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(HERE, "build")
LIB = os.path.join(BUILD, "libmtcprof.so")
PROGS = os.path.join(BUILD, "progs")
_built = threading.Lock()
_done = False


def ensure_built() -> None:
    """make -C preload once per process (builds the shim and the C test programs)."""
    global _done
    with _built:
        if not _done:
            subprocess.run(["make", "-s", "-C", HERE], check=True)
            _done = True


def prog(name: str) -> str:
    ensure_built()
    return os.path.join(PROGS, name)


def env_for(logdir: str | None, base: dict | None = None, preload: bool = True, **extra) -> dict:
    """Environment for a run: traced when logdir is given; untraced (no LD_PRELOAD, no MTCPROF_*) otherwise.
    preload=True with logdir=None gives the shim loaded but MTCPROF_DIR unset (pass-through)."""
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if not k.startswith("MTCPROF_") and k != "LD_PRELOAD"}
    if logdir is not None or (preload and extra.pop("_loaded_only", False)):
        ensure_built()
        env["LD_PRELOAD"] = LIB
    if logdir is not None:
        env["MTCPROF_DIR"] = logdir
    for k, v in extra.items():
        env[k] = str(v)
    return env


def run(argv, logdir: str | None = None, env_extra: dict | None = None, **kw) -> subprocess.CompletedProcess:
    env = env_for(logdir, **(env_extra or {}))
    kw.setdefault("capture_output", True)
    kw.setdefault("timeout", 300)       # a hung traced program fails its test instead of holding the suite
    return subprocess.run(argv, env=env, **kw)


def check_untraced(tmp_path, logdir, expect_warning: bool = True) -> list[str]:
    """errno_check under a log folder the shim cannot use runs exactly as untraced (same status and output);
    returns its stderr lines, after checking there is one 'running untraced' warning when expected."""
    d_un, d_tr = tmp_path / "un", tmp_path / "tr"
    d_un.mkdir(), d_tr.mkdir()
    ref = run([prog("errno_check"), str(d_un)])
    r = run([prog("errno_check"), str(d_tr)], str(logdir))
    assert r.returncode == ref.returncode == 0
    assert r.stdout.decode().replace(str(d_tr), "D") == ref.stdout.decode().replace(str(d_un), "D")
    lines = r.stderr.decode().splitlines()
    if expect_warning:
        assert len(lines) == 1 and lines[0].startswith("mtcprof: warning:") and "untraced" in lines[0], lines
    return lines


def log_paths(logdir: str) -> list:
    return sorted(os.path.join(logdir, f) for f in os.listdir(logdir) if f.endswith(".mtclog"))


def logs(logdir: str) -> list[MtcLog]:
    return [read_log(p, strict=True) for p in log_paths(logdir)]


def nonzero(rec: dict, skip_times: bool = True) -> dict:
    """The nonzero integer counters of a file record (timings and timestamps left out)."""
    out = {}
    for k, v in rec.items():
        if k in ("id",) or not isinstance(v, int) or not v:
            continue
        if skip_times and (k.startswith("t_") or k in ("first_open_ns", "last_close_ns")):
            continue
        out[k] = v
    return out
