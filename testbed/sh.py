"""Running commands as root or as the testbed user, inside a host's namespaces or not."""
import os
import subprocess

from . import layout


class BedError(Exception):
    """A testbed operation failed; the message is one line for the user."""


def run(argv, *, check=True, input=None, timeout=30, env=None):
    """Run argv, capture output; on failure raise BedError quoting the command's own error."""
    try:
        p = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout, env=env)
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
    try:
        return int(open(path).read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
