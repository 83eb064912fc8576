"""FUSE set-up the testbed needs on this machine, and undoing it.

gfarm2fs runs as the testbed user; root (the tests, the envelope) reads its mounts, which needs the
mount option allow_other and so `user_allow_other` in /etc/fuse.conf. mtcbed adds that line only when
it is missing, marked by a comment line so `down` removes exactly what `up` added, even after a crash
lost the state file."""
import os

from .sh import BedError

CONF = "/etc/fuse.conf"
LINE = "user_allow_other"
MARK = "# added by mtcbed up, removed by mtcbed down"


def _read():
    try:
        return open(CONF).read()
    except FileNotFoundError:
        return ""


def _write(text):
    # rewritten in place, like /etc/hosts: the file may be a bind mount
    with open(CONF, "a+") as f:
        f.seek(0)
        f.truncate()
        f.write(text)


def ensure():
    """Make /dev/fuse usable and allow_other allowed; True when /etc/fuse.conf was changed."""
    if not os.path.exists("/dev/fuse"):
        raise BedError("/dev/fuse does not exist: this machine cannot mount FUSE file systems")
    os.chmod("/dev/fuse", 0o666)
    text = _read()
    if any(ln.strip() == LINE for ln in text.splitlines()):
        return False
    _write(text + ("\n" if text and not text.endswith("\n") else "") + f"{MARK}\n{LINE}\n")
    return True


def added():
    return MARK in _read().splitlines()


def restore():
    """Remove the line `ensure` added (with its mark); a line someone else wrote stays."""
    lines = _read().splitlines(keepends=True)
    keep, skip = [], False
    for ln in lines:
        if ln.rstrip("\n") == MARK:
            skip = True
            continue
        if skip and ln.strip() == LINE:
            skip = False
            continue
        skip = False
        keep.append(ln)
    if len(keep) != len(lines):
        _write("".join(keep))
