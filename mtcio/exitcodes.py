"""The exit codes of every mtcio command (mtcprof, mtcenvelope, mtcpredict, mtcbed), and the guard that keeps
Python tracebacks away from users.

    0    ok
    1    failed: the operation was tried and did not succeed (a measurement, a build, a daemon...)
    2    bad input: arguments, or a file or db that is missing, unreadable, malformed or of the wrong kind, a
         --run the db does not have
    3    state: the operation does not fit the current state (a testbed already up / none up)
    4    unknown host
    130  interrupted (Ctrl-C)

`mtcprof run` and `mtcbed exec` otherwise exit with the status of the command they ran (128+N if it died of
signal N).  Every command uses these names; EPILOG is the line each `--help` ends with.

In a command's code:

    from mtcio.exitcodes import BAD_INPUT, EPILOG, STATE, guard, printable
    p = argparse.ArgumentParser(..., epilog=EPILOG)        # and on each subparser
    return guard("mtcenvelope import", cmd_import, args)   # Ctrl-C 130, closed pipe 0, anything unexpected 1
    print(f"mtcenvelope import: {printable(path)}: not an IOR output", file=sys.stderr); return BAD_INPUT

The same case gets the same code in every command: a missing or malformed input file is BAD_INPUT wherever it
is read, a testbed that is not up is STATE wherever it is needed.
"""
from __future__ import annotations

import os
import sys

OK = 0
FAILED = 1
BAD_INPUT = 2
STATE = 3
UNKNOWN_HOST = 4
INTERRUPTED = 130

EPILOG = "exit codes: 0 ok, 1 failed, 2 bad input, 3 wrong state, 4 unknown host, 130 interrupted"

# MTCIO_DEBUG=1 lets an unexpected exception through with its traceback (for bug reports).
DEBUG_ENV = "MTCIO_DEBUG"


def printable(text, limit: int = 200) -> str:
    """`text` made safe for a one-line message: control bytes, undecodable bytes and non-printable characters
    escaped (so binary garbage read from a file is never echoed raw), cut to `limit` characters."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", "surrogateescape")
    text = str(text)
    out = []
    for ch in text:
        if ch.isprintable():
            out.append(ch)
        elif 0xDC80 <= ord(ch) <= 0xDCFF:           # an undecodable byte kept by surrogateescape
            out.append("\\x%02x" % (ord(ch) - 0xDC00))
        else:
            out.append(ch.encode("unicode_escape").decode("ascii"))
        if len(out) > limit:
            return "".join(out[:limit]) + "..."
    return "".join(out)


def quiet_broken_pipe() -> None:
    """The reader of our stdout went away (`... | head`), or we were interrupted: point stdout at /dev/null so
    that the interpreter's final flush neither complains nor blocks."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except OSError:
        pass


def guard(prog: str, fn, *args) -> int:
    """Run fn(*args) -> exit code the way every command ends: Ctrl-C exits 130 with one line, a closed output
    pipe ends quietly with 0, any unexpected exception is one line naming its kind and exits 1 (or shows its
    traceback with MTCIO_DEBUG=1)."""
    try:
        rc = fn(*args)
        sys.stdout.flush()
        return OK if rc is None else rc
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        quiet_broken_pipe()         # drop what is still buffered: a stalled reader must not hold up the exit
        return INTERRUPTED
    except BrokenPipeError:
        quiet_broken_pipe()
        return OK
    except SystemExit:
        raise
    except Exception as e:  # noqa: BLE001 - the last line of defence: one line, not a traceback
        if os.environ.get(DEBUG_ENV):
            raise
        from mtcio.db.write_errors import disk_words      # a full disk or a read-only one, said so
        words = disk_words(printable(getattr(e, "filename", None) or "the output"), e)
        if words is not None:
            print(f"{prog}: {words}", file=sys.stderr)
            return FAILED
        if isinstance(e, IsADirectoryError):
            msg = f"is a folder, not a file: {printable(e.filename)}"
        elif isinstance(e, NotADirectoryError):
            msg = f"not a folder: {printable(e.filename)}"
        elif isinstance(e, FileNotFoundError):
            msg = f"no such file: {printable(e.filename)}" if e.filename else printable(e)
        elif isinstance(e, PermissionError):
            msg = f"permission denied: {printable(e.filename)}" if e.filename else printable(e)
        elif isinstance(e, OSError):
            msg = printable(e)
        else:
            msg = f"{type(e).__name__}: {printable(e)} (unexpected; {DEBUG_ENV}=1 shows where)"
        print(f"{prog}: {msg}", file=sys.stderr)
        return BAD_INPUT if isinstance(e, (FileNotFoundError, IsADirectoryError, NotADirectoryError,
                                            PermissionError)) else FAILED
