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
signal N).  Every command uses these names; each `--help` ends with exit_table() of the codes that command
can return (EPILOG: the ones every command can), one row per code.

In a command's code:

    from mtcio.exitcodes import BAD_INPUT, EPILOG, STATE, exit_table, guard, printable
    p = argparse.ArgumentParser(..., epilog=EPILOG)        # and on each subparser; or
    p.epilog = exit_table({FAILED: "some points failed"})  # the common codes, one of them said more precisely
    return guard("mtcenvelope import", cmd_import, args)   # Ctrl-C 130, closed pipe 0, anything unexpected 1
    print(f"mtcenvelope import: {printable(path)}: not an IOR output", file=sys.stderr); return BAD_INPUT

The same case gets the same code in every command: a missing or malformed input file is BAD_INPUT wherever it
is read, a testbed that is not up is STATE wherever it is needed.
"""
from __future__ import annotations

import os
import sys
import textwrap

OK = 0
FAILED = 1
BAD_INPUT = 2
STATE = 3
UNKNOWN_HOST = 4
INTERRUPTED = 130

# What each code means, in the table every `--help` ends with.
WORDS = {
    OK: "ok",
    FAILED: "failed: the operation was tried and did not succeed, or an unexpected error",
    BAD_INPUT: "bad input: bad arguments, or an input file or db that is missing, unreadable or malformed",
    STATE: "wrong state: the testbed is already up, or none is up",
    UNKNOWN_HOST: "unknown host",
    INTERRUPTED: "interrupted (Ctrl-C)",
}
# Every command can return these: argparse exits 2 on bad arguments, guard() 1 on an unexpected error.
COMMON = (OK, FAILED, BAD_INPUT, INTERRUPTED)


def exit_table(rows: dict | None = None, *, codes=COMMON, first: str | None = None) -> str:
    """The 'exit codes:' block of a `--help`: one row per code, `codes` in their own words unless `rows` words
    them (a row None drops that code; a code in `rows` that is not in `codes` is added).  `first`: a line
    before the rows (e.g. "CMD's own exit status once CMD runs; before it starts:")."""
    words = {c: WORDS[c] for c in codes}
    for c, w in (rows or {}).items():
        if w is None:
            words.pop(c, None)
        else:
            words[c] = w
    lines = ["exit codes:"] + ([f"  {first}"] if first else [])
    for c in sorted(words):         # a long row wrapped under its words, at 100 columns as a terminal shows
        lines += textwrap.wrap(words[c], 100, initial_indent=f"  {c:<4} ", subsequent_indent=" " * 7,
                               break_long_words=False, break_on_hyphens=False)
    return "\n".join(lines)


EPILOG = exit_table()

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
