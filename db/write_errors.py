"""What a failed write of a database or an output means, in the user's words: a full disk, a read-only file system,
a file or folder not writable by this user.  SQLite says "database or disk is full" or "attempt to write a
readonly database", and the OS ENOSPC or EROFS; none of them is "not an mtcio database" or a hint at an API.

    words = disk_words(path, exc)     # one line naming `path`, or None when exc is none of these
"""
from __future__ import annotations

import errno
import os

_FULL = (errno.ENOSPC, errno.EDQUOT)


def read_only_fs(path: str) -> bool:
    """The file system holding `path` (or, if it does not exist, its folder) is mounted read-only."""
    p = os.path.abspath(path)
    while not os.path.exists(p) and os.path.dirname(p) != p:
        p = os.path.dirname(p)
    try:
        return bool(os.statvfs(p).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def full_words(path: str) -> str:
    return f"{path}: the disk is full (no space left on the file system that holds it); free some space or " \
           f"write somewhere else"


_RO_FS = "is on a read-only file system; write to a database (or folder) on a writable one"
_RO_DB = "make it writable, or write to another database"


def read_only_fs_words(path: str) -> str:
    return f"{path}: {_RO_FS}"


def read_only_words(path: str) -> str:
    return f"{path}: the database is read-only to you (its file or its folder is not writable by you); {_RO_DB}"


def fs_full(path: str) -> bool:
    """No block or no inode left for this user on the file system holding `path`."""
    p = os.path.abspath(path)
    while not os.path.exists(p) and os.path.dirname(p) != p:
        p = os.path.dirname(p)
    try:
        st = os.statvfs(p)
    except OSError:
        return False
    return st.f_bavail == 0 or (st.f_files > 0 and st.f_favail == 0)


def is_disk_fault(path: str, e: BaseException) -> bool:
    """`e` is the disk's doing (full, or an I/O error), not the input's: exit 1 rather than 2."""
    words = disk_words(path, e)
    return words is not None and not words.endswith((_RO_FS, _RO_DB))


def disk_words(path: str, e: BaseException) -> str | None:
    """The one line for a write that failed with `e`, or None when `e` is not such a failure."""
    if isinstance(e, OSError):
        if e.errno in _FULL:
            return full_words(path)
        if e.errno == errno.EROFS:
            return read_only_fs_words(path)
        return None
    text = str(e).lower()
    if type(e).__module__ == "sqlite3":
        if "disk is full" in text:
            return full_words(path)
        if "readonly" in text or "read-only" in text:
            return read_only_fs_words(path) if read_only_fs(path) else read_only_words(path)
        if "disk i/o error" in text:    # what SQLite says when it cannot make the -shm of a WAL db on a full disk
            if fs_full(path):
                return full_words(path)
            if read_only_fs(path):
                return read_only_fs_words(path)
            return f"{path}: the disk failed to read or write it (disk I/O error)"
    return None
