"""Decoding a run's logs in a second process while ingest writes the ones before (`Decoder`).

Reading and decoding a shim log (db/ingest_read.py, then ingest_writer.prepare: everything that needs no id) is
about half of ingest's work, SQLite's inserts the other half; this process does the first half beside the writer:

    with Decoder(max_log_bytes) as dec:
        for path, got in dec.each(paths, wanted):   # in the paths' order
            prep, warning = got                      # as decode(path) gives; got is None for a path not wanted

The worker is `python -m mtcio.db.ingest_decode MAX_LOG_BYTES BIG CHUNK_BYTES` (not multiprocessing: no re-import
main module, nothing inherited).  Protocol on its stdin/stdout: the parent writes a job (8-byte little-endian length
+ a pickled list of paths), the worker answers with 8-byte length + a pickled list of decode() results (None: a log
over BIG bytes, or past CHUNK_BYTES in its job, which the parent decodes itself when its turn comes).  Bounded: at
most WINDOW jobs of CHUNK logs are in flight, so no more than WINDOW x CHUNK_BYTES (+ one big log) is held.

The worker reads through logformat.read_bytes like ingest itself (regular files only, no symlink followed, at most
max_log_bytes).  A worker that dies (killed, out of memory) raises DecoderDied: the run being ingested is rolled
back, never stored in part.
"""
from __future__ import annotations

import gc
import os
from collections import deque
import pickle
import queue
import signal
import struct
import subprocess
import sys
import threading

from mtcio.db import logformat as lf
from mtcio.db.ingest_read import read_log
from mtcio.db.ingest_writer import prepare

CHUNK = 256             # logs per job
WINDOW = 8              # jobs in flight
BIG = 1 << 20           # a log larger than this is decoded by the parent in its turn
CHUNK_BYTES = 8 << 20   # bytes of logs one job decodes at most
_LEN = struct.Struct("<Q")


class DecoderDied(RuntimeError):
    """The decoder process ended before it answered (killed, out of memory)."""


def decode(path: str, max_log_bytes: int = lf.MAX_LOG_BYTES, load=None):
    """(prepared rows or None, None or the log's one warning): ingest_read.read_log, then ingest_writer.prepare."""
    rows, warning = read_log(path, max_log_bytes, load)
    return (prepare(path, rows) if rows is not None else None), warning


def decode_job(paths: list, max_log_bytes: int, big: int = BIG, chunk_bytes: int = CHUNK_BYTES) -> list:
    """decode() of each path; None for a log left to the parent (over big, or past chunk_bytes in this job)."""
    out, held = [], 0
    for path in paths:
        try:
            size = os.lstat(path).st_size
        except OSError:
            size = 0                    # read_log names the error
        if size > big or held + size > chunk_bytes:
            out.append(None)
            continue
        held += size
        out.append(decode(path, max_log_bytes))
    return out


class Decoder:
    """The parent's side: jobs written to the worker, its answers read by a thread into a queue (never more than
    WINDOW answers, so the worker never waits on a full pipe while the parent waits on it)."""

    def __init__(self, max_log_bytes: int = lf.MAX_LOG_BYTES):
        self.max_log_bytes = max_log_bytes
        self.proc = subprocess.Popen([sys.executable, "-m", "mtcio.db.ingest_decode", str(max_log_bytes), str(BIG),
                                      str(CHUNK_BYTES)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.answers: queue.Queue = queue.Queue()
        self.reader = threading.Thread(target=self._read_answers, name="mtcio-decode", daemon=True)
        self.reader.start()

    def __enter__(self) -> "Decoder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _read_answers(self) -> None:
        out = self.proc.stdout
        try:
            while True:
                head = out.read(_LEN.size)
                if len(head) < _LEN.size:
                    break
                blob = out.read(_LEN.unpack(head)[0])
                self.answers.put(pickle.loads(blob))
        except Exception:           # noqa: BLE001 -- a torn answer: the worker died midway, said below
            pass
        self.answers.put(None)

    def _died(self) -> DecoderDied:
        try:
            rc = self.proc.wait(timeout=10)
            why = f"killed by signal {-rc}" if rc < 0 else f"exit status {rc}"
        except subprocess.TimeoutExpired:
            why = "its answer cut short"
        return DecoderDied(f"the log decoder process ended ({why}) before it had decoded every log")

    def _send(self, paths: list) -> None:
        blob = pickle.dumps(paths, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self.proc.stdin.write(_LEN.pack(len(blob)))
            self.proc.stdin.write(blob)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._died() from None

    def _answer(self) -> list:
        got = self.answers.get()
        if got is None:
            self.answers.put(None)          # every later call says it too
            raise self._died()
        return got

    def each(self, paths, wanted=lambda path: True):
        """(path, decode(path) or None when not wanted(path)) for each path, in order.  wanted is asked when a path
        is sent to the worker (up to WINDOW x CHUNK paths ahead of the one yielded)."""
        it = iter(paths)
        jobs: deque = deque()       # (paths, which of them were sent) per job in flight, oldest first

        def submit() -> bool:
            chunk = [p for _, p in zip(range(CHUNK), it)]
            if not chunk:
                return False
            sent = [wanted(p) for p in chunk]
            if any(sent):
                self._send([p for p, s in zip(chunk, sent) if s])
            jobs.append((chunk, sent))
            return True
        for _ in range(WINDOW):
            if not submit():
                break
        while jobs:
            chunk, sent = jobs.popleft()
            got = iter(self._answer() if any(sent) else ())
            submit()
            for path, s in zip(chunk, sent):
                if not s:
                    yield path, None
                    continue
                res = next(got)
                yield path, (res if res is not None else decode(path, self.max_log_bytes))

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()     # the worker ends at the end of its input
            except OSError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()            # busy on a job nobody reads any more
                self.proc.wait()
        self.reader.join(timeout=5)
        self.proc.stdout.close()



def main(argv: list | None = None) -> int:
    max_log_bytes, big, chunk_bytes = map(int, sys.argv[1:4] if argv is None else argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)    # ^C is the parent's: it closes our input, and we end
    # the answers go to the parent on a private fd; fd 1 then points at stderr, so a stray print cannot tear them
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    inp = sys.stdin.buffer
    gc.disable()                    # decoded rows are many new tuples and hold no cycles (as in the parent)
    n = 0
    while True:
        head = inp.read(_LEN.size)
        if len(head) < _LEN.size:
            return 0
        paths = pickle.loads(inp.read(_LEN.unpack(head)[0]))
        blob = pickle.dumps(decode_job(paths, max_log_bytes, big, chunk_bytes), protocol=pickle.HIGHEST_PROTOCOL)
        out.write(_LEN.pack(len(blob)))
        out.write(blob)
        out.flush()
        n += 1
        if n % 200 == 0:
            gc.collect()


if __name__ == "__main__":
    sys.exit(main())
