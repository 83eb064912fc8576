"""Finding a run's shim logs: every *.mtclog under a folder in path order (`find_logs`, a compact `LogList`), and
the folders whose logs another user could have put there (`untrusted_folders`).
"""
from __future__ import annotations

import heapq
import itertools
import os


class LogList:
    """The logs under a folder in sorted order, kept compact: a folder's file names as one string (a million
    logs take ~40 MB here, ~140 MB as a list of paths).  Iterating gives the full paths."""

    def __init__(self):
        self._folders: list = []    # (folder, "\0"-joined sorted names, how many)
        self._n = 0

    def add(self, folder: str, names: list) -> None:
        if names:
            self._folders.append((folder, "\0".join(names), len(names)))
            self._n += len(names)

    def __len__(self) -> int:
        return self._n

    def __iter__(self):
        for k in range(len(self._folders)):
            yield from self.of_folder(k)

    def of_folder(self, k: int):
        """The full paths of the k-th folder entry, in order."""
        folder, names, _n = self._folders[k]
        i, end = 0, len(names)
        while i <= end:
            j = names.find("\0", i)
            if j < 0:
                j = end
            yield os.path.join(folder, names[i:j])
            i = j + 1

    def folders(self) -> int:
        return len(self._folders)

    def __getitem__(self, i: int) -> str:
        if not 0 <= i < self._n:
            raise IndexError(i)
        return next(itertools.islice(iter(self), i, None))


def find_logs(logdir: str) -> LogList:
    """All *.mtclog files under logdir (recursively), sorted by path.  Hidden .tmp files of running writers are
    skipped.  Listed folder by folder, each folder's names made compact at once (a million logs peak at ~130 MB
    here, not a list of a million paths); several folders are merged into the order of their full paths."""
    if not os.path.isdir(logdir):
        raise NotADirectoryError(logdir)
    folders = LogList()
    for root, dirs, files in os.walk(logdir):
        dirs.sort()
        files[:] = [f for f in files if f.endswith(".mtclog") and not f.startswith(".")]
        files.sort()
        folders.add(root, files)
        del files[:]                # os.walk's list of the folder: not kept beside the compact one
    if folders.folders() <= 1:
        return folders
    out, folder, names = LogList(), None, []
    # a/x, a/b/y, a/z: one folder's logs may come in several runs of the full paths' order
    for p in heapq.merge(*(folders.of_folder(i) for i in range(folders.folders()))):
        d, name = os.path.split(p)
        if d != folder:
            out.add(folder, names)
            folder, names = d, []
        names.append(name)
    out.add(folder, names)
    return out


def untrusted_folders(logdir: str) -> list[tuple[str, str]]:
    """(folder, why) for each folder under logdir (itself included) whose logs another user could have put or
    replaced there, by the shim's rule: owned by neither this user nor root, or writable by others and not
    sticky.  The shim and `mtcprof run` refuse to write into such a folder; ingest reads it, and says so."""
    me = os.geteuid()
    out = []
    for root, dirs, _files in os.walk(logdir):
        dirs.sort()
        try:
            st = os.stat(root)
        except OSError:
            continue
        if st.st_uid not in (me, 0):
            out.append((root, f"owned by another user ({_user(st.st_uid)}; you are {_user(me)})"))
        elif st.st_mode & 0o002 and not st.st_mode & 0o1000:
            out.append((root, f"writable by others (mode {st.st_mode & 0o7777:04o})"))
    return out


def _user(uid: int) -> str:
    try:
        import pwd
        return f"uid {uid}, {pwd.getpwuid(uid).pw_name}"
    except (ImportError, KeyError):
        return f"uid {uid}"
