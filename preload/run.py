"""`mtcprof run [options] -- CMD...`: run one command (and all its children) under the shim.

mtcprof run replaces itself with CMD (exec), so CMD's exit status, signals and Ctrl-C are CMD's own and no
Python process waits beside every task of a workflow.  This module imports nothing heavy: a workflow may
start thousands of tasks through it.
"""
from __future__ import annotations

import argparse
import os
import re
import stat
import sys

from mtcio.exitcodes import BAD_INPUT, FAILED, exit_table, printable
from mtcio.private import private_dir
from mtcio.preload import lib_path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.usage = "mtcprof run [-h] [--dir DIR] [--run RUN] [--task TASK] [--stage STAGE] [options] -- CMD..."
    p.epilog = exit_table(
        {0: None, FAILED: "failed: an unexpected error before CMD started",
         BAD_INPUT: "bad input: bad options, no command, an unusable log folder, no shim",
         126: "CMD cannot be executed", 127: "CMD not found"},
        first="once CMD starts, CMD's own (mtcprof run becomes CMD; 128+N if it died of signal N); before:")
    p.add_argument("--dir", default=os.environ.get("MTCPROF_DIR", "."),
                   help="log folder (MTCPROF_DIR; default: $MTCPROF_DIR or the current folder); created 0700 "
                        "if missing; refused if another user owns it or others may write to it")
    p.add_argument("--run", help="run id (MTCPROF_RUN)")
    p.add_argument("--task", help="task id (MTCPROF_TASK)")
    p.add_argument("--stage", help="workflow stage (MTCPROF_STAGE)")
    p.add_argument("--host", help="host name recorded in the logs (MTCPROF_HOST; default: uname)")
    p.add_argument("--include", help="colon-separated path prefixes to trace (MTCPROF_INCLUDE; default: all)")
    p.add_argument("--exclude", help="colon-separated path prefixes not to trace (MTCPROF_EXCLUDE; "
                                     "/proc, /sys, /dev and the log folder always are)")
    p.add_argument("--trace-ops", action="store_true", help="also record the full op trace (MTCPROF_TRACE=ops)")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD...",
                   help="the command to run, with its arguments, after --")


def cpus_online(path: str = "/sys/devices/system/cpu/online") -> str | None:
    """The kernel's list of online CPUs ("0-1,4"), or None when it cannot be read."""
    try:
        with open(path) as fh:
            return fh.readline().strip() or None
    except OSError:
        return None


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
    /proc/self/mounts (~25 us each) at exit, and MTCPROF_CPUS_ONLINE the online CPUs (the cpu_clock record), so
    that none opens sysfs (~20 us); a value already in the environment is kept."""
    env = dict(os.environ if base is None else base)
    mounts = gfarm_mounts()
    if not any(":" in m for m in mounts):       # a ':' in a mount path: let each process read the table
        env.setdefault("MTCPROF_GFARM_MOUNTS", ":".join(mounts))
    online = cpus_online()
    if online:
        env.setdefault("MTCPROF_CPUS_ONLINE", online)
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


class LogDirError(Exception):
    """The log folder cannot be used (a one-line reason)."""


def check_log_dir(path: str) -> str:
    """Make sure `path` is a log folder only this user can write into: create it (0700) if missing, refuse a
    file, a folder or a link that another user owns, and a folder others may write to (another user could
    pre-create it, or swap logs in it, to read or fake a run's traces).  Returns the absolute path."""
    path = os.path.abspath(path)
    uid = os.geteuid()
    try:
        private_dir(path)                  # it and missing parents 0700, whatever the umask
    except FileExistsError:
        raise LogDirError(f"log folder {printable(path)} is a file, not a folder") from None
    except PermissionError:
        raise LogDirError(f"log folder {printable(path)} cannot be created: permission denied") from None
    except OSError as e:
        raise LogDirError(f"log folder {printable(path)} cannot be created: {e.strerror}") from None
    lst, st = os.lstat(path), os.stat(path)
    if stat.S_ISLNK(lst.st_mode) and lst.st_uid not in (uid, 0):
        raise LogDirError(f"log folder {printable(path)} is a link owned by another user (uid {lst.st_uid})")
    if not stat.S_ISDIR(st.st_mode):
        raise LogDirError(f"log folder {printable(path)} is not a folder")
    if st.st_uid != uid:
        raise LogDirError(f"log folder {printable(path)} belongs to another user (uid {st.st_uid}, you are "
                          f"{uid}): use a folder of your own")
    if st.st_mode & stat.S_IWOTH:
        raise LogDirError(f"log folder {printable(path)} is writable by others (mode "
                          f"{stat.S_IMODE(st.st_mode):04o}): chmod o-w it or use another folder")
    return path


def main(args: argparse.Namespace) -> int:
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        print("mtcprof run: no command given (usage: mtcprof run [--dir D --task T --stage S] -- CMD...)",
              file=sys.stderr)
        return BAD_INPUT
    try:
        lib_path()
    except FileNotFoundError as e:
        print(f"mtcprof run: {e}", file=sys.stderr)
        return BAD_INPUT
    try:
        logdir = check_log_dir(args.dir)
    except LogDirError as e:
        print(f"mtcprof run: {e}", file=sys.stderr)
        return BAD_INPUT
    env = shim_env(dir=logdir, run=args.run, task=args.task, stage=args.stage, host=args.host,
                   include=args.include, exclude=args.exclude, trace_ops=args.trace_ops)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(cmd[0], cmd, env)            # returns only if CMD could not be started
    except FileNotFoundError:
        print(f"mtcprof run: command not found: {printable(cmd[0])}", file=sys.stderr)
        return 127
    except PermissionError:
        print(f"mtcprof run: cannot execute {printable(cmd[0])}: permission denied", file=sys.stderr)
        return 126
    except OSError as e:
        print(f"mtcprof run: cannot execute {printable(cmd[0])}: {e.strerror}", file=sys.stderr)
        return 126
