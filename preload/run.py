"""`mtcprof run [options] -- CMD...`: run one command (and all its children) under the shim."""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

from mtcio.preload import lib_path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dir", default=os.environ.get("MTCPROF_DIR", "."),
                   help="log folder (MTCPROF_DIR; default: $MTCPROF_DIR or the current folder)")
    p.add_argument("--run", help="run id (MTCPROF_RUN)")
    p.add_argument("--task", help="task id (MTCPROF_TASK)")
    p.add_argument("--stage", help="workflow stage (MTCPROF_STAGE)")
    p.add_argument("--host", help="host name recorded in the logs (MTCPROF_HOST; default: uname)")
    p.add_argument("--include", help="colon-separated path prefixes to trace (MTCPROF_INCLUDE; default: all)")
    p.add_argument("--exclude", help="colon-separated path prefixes not to trace (MTCPROF_EXCLUDE; "
                                     "/proc, /sys, /dev and the log folder always are)")
    p.add_argument("--trace-ops", action="store_true", help="also record the full op trace (MTCPROF_TRACE=ops)")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD...", help="the command to run")


def gfarm_mounts(mounts_file: str = "/proc/self/mounts") -> list[str]:
    """Mount points of fuse.gfarm2fs file systems (octal escapes such as \\040 decoded)."""
    out = []
    with open(mounts_file, "rb") as fh:
        for line in fh:
            f = line.split(b" ")
            if len(f) > 2 and f[2] == b"fuse.gfarm2fs":
                out.append(re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), f[1])
                           .decode("utf-8", "surrogateescape"))
    return out


def shim_env(base: dict | None = None, *, dir: str, run=None, task=None, stage=None, host=None, include=None,
             exclude=None, trace_ops=False) -> dict:
    """Environment that runs a command under the shim (also used by tests and the Pwrake plugin).

    MTCPROF_GFARM_MOUNTS lists the gfarm2fs mounts once here, so that no traced process has to read
    /proc/self/mounts (~25 us each) at exit; a value already in the environment is kept."""
    env = dict(os.environ if base is None else base)
    mounts = gfarm_mounts()
    if not any(":" in m for m in mounts):       # a ':' in a mount path: let each process read the table
        env.setdefault("MTCPROF_GFARM_MOUNTS", ":".join(mounts))
    lib = lib_path()
    pre = env.get("LD_PRELOAD", "")
    if lib not in pre.split(":"):
        env["LD_PRELOAD"] = lib + (":" + pre if pre else "")
    env["MTCPROF_DIR"] = os.path.abspath(dir)
    for k, v in (("MTCPROF_RUN", run), ("MTCPROF_TASK", task), ("MTCPROF_STAGE", stage), ("MTCPROF_HOST", host),
                 ("MTCPROF_INCLUDE", include), ("MTCPROF_EXCLUDE", exclude)):
        if v is not None:
            env[k] = v
    if trace_ops:
        env["MTCPROF_TRACE"] = "ops"
    return env


def main(args: argparse.Namespace) -> int:
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        print("mtcprof run: no command given (usage: mtcprof run [--dir D --task T --stage S] -- CMD...)",
              file=sys.stderr)
        return 2
    try:
        lib_path()
    except FileNotFoundError as e:
        print(f"mtcprof run: {e}", file=sys.stderr)
        return 2
    os.makedirs(args.dir, exist_ok=True)
    env = shim_env(dir=args.dir, run=args.run, task=args.task, stage=args.stage, host=args.host,
                   include=args.include, exclude=args.exclude, trace_ops=args.trace_ops)
    try:
        rc = subprocess.call(cmd, env=env)
    except FileNotFoundError:
        print(f"mtcprof run: command not found: {cmd[0]}", file=sys.stderr)
        return 127
    return 128 - rc if rc < 0 else rc
