"""Decoding a run's logs in a second process while ingest writes the ones before (`Decoder`).

Reading and decoding a shim log (db/ingest_read.py, then ingest_writer.prepare: everything that needs no id) is
about half of ingest's work, SQLite's inserts the other half; this process does the first half beside the writer:

    with Decoder(max_log_bytes) as dec:
        for path, got in dec.each(paths, wanted):   # in the paths' order
            prep, warning = got                      # as decode(path) gives; got is None for a path not wanted

The worker is `python -m mtcio.db.ingest_decode MAX_LOG_BYTES BIG CHUNK_BYTES` (not multiprocessing: no re-import
of the caller's main module, nothing inherited).  Protocol on its stdin/stdout: the parent writes a job (8-byte
little-endian length + a pickled list of paths), the worker answers with 8-byte length + the list of decode()
results, marshalled (pickled when marshal cannot take them: a tag byte says which) (None: a log over BIG bytes, or
past CHUNK_BYTES in its job, which the parent decodes itself when its turn comes).  A job's logs are read by
READERS threads as soon as it comes (prefetch.read_piece), while the job before is decoded.  Bounded: at most
WINDOW jobs of CHUNK logs are in flight, so no more than WINDOW x CHUNK_BYTES (+ one big log) is held.

The worker reads through logformat.read_bytes like ingest itself (regular files only, no symlink followed, at most
max_log_bytes).  A worker that dies (killed, out of memory) raises DecoderDied: the run being ingested is rolled
back, never stored in part.
"""
from __future__ import annotations

import gc
import marshal
import os
import pickle
import queue
import signal
import struct
import subprocess
import sys
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from mtcio.db import logformat as lf
from mtcio.db import prefetch
from mtcio.db.ingest_read import read_log
from mtcio.db.ingest_writer import prepare

CHUNK = 256             # logs per job
# jobs in flight: more logs than the writer's batch (ingest_writer.BATCH), so the worker still has logs to decode
# while the parent inserts a batch (8 jobs, fewer than a batch, left both processes waiting for each other)
WINDOW = 24
BIG = 1 << 20           # a log larger than this is decoded by the parent in its turn
CHUNK_BYTES = 4 << 20   # bytes of logs one job decodes at most (WINDOW x CHUNK_BYTES: 96 MiB held at most)
PIECE = 32              # logs one reading thread reads at a time
READERS = 2             # the worker's reading threads
_LEN = struct.Struct("<Q")


def _dumps(answer: list) -> bytes:
    """An answer's bytes: marshal's (it writes decoded rows, tuples of ints and strings, in ~0.6 of pickle's time,
    the decoder's main cost after decoding), pickle's for an object marshal does not take.  marshal would write a
    numpy scalar or array (any buffer) as bytes: decoded rows hold only None, bool, int, float, str, bytes, tuples
    and lists (tests/test_db_ingest_decoder.py compares them with the rows decoded in process)."""
    try:
        return b"m" + marshal.dumps(answer)
    except ValueError:
        return b"p" + pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)


def _loads(blob: bytes) -> list:
    """_dumps undone; a torn or unknown answer raises (the worker died midway)."""
    kind, body = blob[:1], memoryview(blob)[1:]
    if kind == b"m":
        return marshal.loads(body)
    if kind == b"p":
        return pickle.loads(body)
    raise ValueError("unknown answer")


class DecoderDied(RuntimeError):
    """The decoder process ended before it answered (killed, out of memory)."""


def decode(path: str, max_log_bytes: int = lf.MAX_LOG_BYTES, load=None):
    """(prepared rows or None, None or the log's one warning): ingest_read.read_log, then ingest_writer.prepare."""
    rows, warning = read_log(path, max_log_bytes, load)
    return (prepare(path, rows) if rows is not None else None), warning


def _submit(paths: list, max_log_bytes: int, big: int, chunk_bytes: int, pool) -> list:
    """A job's logs to read, PIECE logs per task of the pool's threads (the kernel's part of reading a million small
    files, and a disk's latency, beside the decoding); at most chunk_bytes read for the job."""
    pieces = [paths[i:i + PIECE] for i in range(0, len(paths), PIECE)]
    most = chunk_bytes // max(len(pieces), 1)
    return [(p, pool.submit(prefetch.read_piece, p, max_log_bytes, big, most)) for p in pieces]


def _decode(submitted: list, max_log_bytes: int) -> list:
    """decode() of each log of a submitted job, in order; None for a log left to the parent."""
    out = []
    for piece, fut in submitted:
        for path, load in zip(piece, fut.result()):
            out.append(None if load is None else decode(path, max_log_bytes, load))
    return out


class Decoder:
    """The parent's side: jobs written to the worker, its answers read by a thread into a queue (never more than
    WINDOW answers, so the worker never waits on a full pipe while the parent waits on it)."""

    def __init__(self, max_log_bytes: int = lf.MAX_LOG_BYTES):
        self.max_log_bytes = max_log_bytes
        # the parent's import path first, so the worker runs the same mtcio as the parent (a source tree on sys.path)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([p for p in sys.path if p] +
                                                          [os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
        self.proc = subprocess.Popen([sys.executable, "-m", "mtcio.db.ingest_decode", str(max_log_bytes), str(BIG),
                                      str(CHUNK_BYTES)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
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
                self.answers.put(_loads(blob))
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
    pool = ThreadPoolExecutor(max_workers=READERS, thread_name_prefix="mtcio-read")
    jobs: queue.Queue = queue.Queue()   # at most the parent's WINDOW

    def take_jobs() -> None:        # a job's reads start as it comes, while the one before is decoded
        try:
            while True:
                head = inp.read(_LEN.size)
                if len(head) < _LEN.size:
                    break
                paths = pickle.loads(inp.read(_LEN.unpack(head)[0]))
                jobs.put(_submit(paths, max_log_bytes, big, chunk_bytes, pool))
        finally:
            jobs.put(None)
    threading.Thread(target=take_jobs, name="mtcio-jobs", daemon=True).start()
    n = 0
    try:
        while (job := jobs.get()) is not None:
            blob = _dumps(_decode(job, max_log_bytes))
            out.write(_LEN.pack(len(blob)))
            out.write(blob)
            out.flush()
            n += 1
            if n % 200 == 0:
                gc.collect()
    except BrokenPipeError:         # the parent is gone (killed): nobody reads the answers
        os._exit(0)
    pool.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
