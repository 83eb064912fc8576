"""Running commands as root or as the testbed user, inside a host's namespaces or not."""
import os
import stat
import subprocess
import time

from . import layout


class BedError(Exception):
    """A testbed operation failed; the message is one line for the user."""


def run(argv, *, check=True, input=None, timeout=30, env=None, umask=-1):
    """Run argv, capture output; on failure raise BedError quoting the command's own error."""
    try:
        p = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout, env=env,
                           umask=umask)
    except FileNotFoundError:
        raise BedError(f"command not found: {argv[0]}")
    except subprocess.TimeoutExpired:
        raise BedError(f"timed out after {timeout}s: {' '.join(map(str, argv))}")
    if check and p.returncode != 0:
        raise BedError(f"{' '.join(map(str, argv))}: {gist(p.stderr or p.stdout) or f'exit {p.returncode}'}")
    return p


def gist(text):
    """The line of a daemon's output that says what went wrong (libgfarm prints backtraces after it)."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    for ln in lines:
        if any(w in ln.lower() for w in ("<err>", "error", "fatal", "cannot", "failed")):
            return ln
    return lines[0] if lines else ""


def user_env(extra=None):
    """Environment of the testbed user: the caller's, with identity and Gfarm config replaced."""
    env = dict(os.environ)
    env.update(HOME=str(layout.HOME), USER=layout.USER, LOGNAME=layout.USER,
               GFARM_CONFIG_FILE=str(layout.GFARM_CONFIG))
    if extra:
        env.update(extra)
    return env


def as_user(argv):
    """Prefix that drops to the testbed user (with its supplementary groups)."""
    return ["setpriv", f"--reuid={layout.USER}", f"--regid={layout.USER}", "--init-groups", "--", *argv]


def user_sh(script, *args, input=None):
    """Run a shell script as the testbed user. Root writes into folders that user owns go through
    here: a symlink planted there then reaches only what the user could write anyway."""
    return run(as_user(["sh", "-c", script, "sh", *map(str, args)]), input=input, env=user_env())


def user_ids():
    """(uid, gid) of the testbed user, or None before it exists."""
    import pwd
    try:
        pw = pwd.getpwnam(layout.USER)
    except KeyError:
        return None
    return pw.pw_uid, pw.pw_gid


def in_host(name, argv):
    """Prefix that enters host `name`'s network and UTS namespaces but keeps the root mount namespace,
    so a FUSE mount made there is visible everywhere while its traffic leaves from the host."""
    return ["nsenter", f"--net=/run/netns/{name}", f"--uts={layout.uts_path(name)}", "--", *argv]


def pid_alive(pid) -> bool:
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, ValueError):
        return False
    except PermissionError:
        return True
    # a zombie is not alive for our purposes
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def read_pid(path):
    """The pid in a pid file. Daemons running as the testbed user write theirs in folders that user
    owns: a symlink, FIFO or device there is not followed, read or waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return int(os.read(fd, 32).split()[0])
    except (OSError, ValueError, IndexError):
        return None
    finally:
        os.close(fd)


def wait_pid_file(path, what, log=None, timeout=5.0):
    """The pid a daemon writes after it has forked into the background: the command that started it
    may return before the file exists."""
    deadline = time.monotonic() + timeout
    while True:
        pid = read_pid(path)
        if pid_alive(pid):
            return pid
        if time.monotonic() >= deadline:
            hint = f" (see {log})" if log else ""
            raise BedError(f"{what} wrote no pid file {path} within {timeout:.0f}s{hint}")
        time.sleep(0.01)
