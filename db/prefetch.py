"""Reading logs ahead of ingest in two threads: a log's bytes are read while the one before is parsed and stored.

    with Prefetch(max_log_bytes) as pf:
        for path, load in pf.each(paths):     # in the paths' order
            buf = load()                      # the bytes, or the OSError reading them raised (as read_bytes would)

The threads call logformat.read_bytes, so every check it makes (regular files only, no symlink followed, at most
max_log_bytes, reads stop at the size fstat gave) holds.  The kernel's part of reading (syscalls, a page not
cached) runs beside the main thread, which is what a million small logs cost.  Bounded: CHUNK logs per job, at
most WINDOW jobs ahead, and a log over BIG bytes (or past CHUNK_BYTES in its job) is left for load() to read
when its turn comes, so no more than WINDOW x CHUNK_BYTES (+ one big log) is held.
"""
from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor

from mtcio.db import logformat as lf

CHUNK = 64              # logs per job
WINDOW = 6              # jobs in flight
BIG = 1 << 20           # a log larger than this is read when its turn comes
CHUNK_BYTES = 8 << 20   # bytes one job holds at most


class Prefetch:
    def __init__(self, max_log_bytes: int = lf.MAX_LOG_BYTES, threads: int = 2):
        self.max_log_bytes = max_log_bytes
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="mtcio-read")

    def __enter__(self) -> "Prefetch":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)

    def each(self, paths):
        """(path, load) for each path in order; load() returns its bytes or raises what reading it raised."""
        it = iter(paths)
        jobs: deque = deque()

        def submit() -> bool:
            chunk = [p for _, p in zip(range(CHUNK), it)]
            if chunk:
                jobs.append((chunk, self.pool.submit(read_piece, chunk, self.max_log_bytes, BIG, CHUNK_BYTES)))
            return bool(chunk)
        for _ in range(WINDOW):
            if not submit():
                break
        while jobs:
            chunk, fut = jobs.popleft()
            got = fut.result()
            submit()
            for path, g in zip(chunk, got):
                yield path, (g if g is not None else self._loader(path))

    def _loader(self, path):
        return lambda: lf.read_bytes(path, self.max_log_bytes)


def read_piece(paths: list, max_log_bytes: int, big: int, most: int) -> list:
    """For each path, load() giving its bytes (or raising what reading them raised), or None for a log left to be
    read in its turn: over big bytes, or past most bytes read for these paths.  (Also the ingest decoder's reads.)"""
    out, held = [], 0
    for path in paths:
        try:
            buf = lf.read_bytes(path, max_log_bytes, most=min(big, most - held))
            held += len(buf)
            out.append(_given(buf))
        except lf.NotNow:
            out.append(None)
        except Exception as e:          # noqa: BLE001 -- raised again by load(), where ingest names it
            out.append(_raising(e))
    return out


def _given(buf: bytes):
    return lambda: buf


def _raising(e: Exception):
    def load():
        raise e
    return load
