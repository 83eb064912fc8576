"""Private outputs: every file an mtcio command writes is 0600 and every folder it creates 0700, whatever the umask
(traces reveal users' paths and argv).  Imports nothing heavy: `mtcprof run` uses it beside every task."""
from __future__ import annotations

import os

PRIVATE_FILE, PRIVATE_DIR = 0o600, 0o700


def write_private(path: str, data: bytes | str) -> None:
    """Write a whole output file atomically, mode 0600: a temp file beside it, renamed over it.  A folder at `path`
    is refused (IsADirectoryError) before anything is written; the temp file never stays behind."""
    import tempfile
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(21, "is a folder, not a file name", path)
    d, base = os.path.split(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + base + ".", suffix=".tmp", dir=d)   # mkstemp: O_EXCL
    except OSError as e:        # name the file asked for, not the temp file
        raise type(e)(e.errno, e.strerror, path) from None
    try:
        os.fchmod(fd, PRIVATE_FILE)     # exactly 0600: mkstemp's mode is cut by the umask
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def private_dir(path: str) -> None:
    """Create an output folder and its missing parents, each exactly 0700 (os.makedirs gives the parents the
    umask's mode: 0777 under umask 000); existing folders are left as they are.  A file in the way raises as in
    os.makedirs (FileExistsError for the folder itself, NotADirectoryError for a parent)."""
    path = os.path.abspath(os.fspath(path))
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if parent != path and not os.path.lexists(parent):
        private_dir(parent)
    try:
        os.mkdir(path, PRIVATE_DIR)
    except FileExistsError:
        if os.path.isdir(path):     # made by another process meanwhile: theirs, left as it is
            return
        raise
    os.chmod(path, PRIVATE_DIR)     # the umask may have taken owner bits
