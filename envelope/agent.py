"""One long-lived shell per host, reached once through the launcher template.

Starting ``mtcbed exec HOST --`` (a Python program) or ``ssh HOST`` for every engine run costs
0.1 s to seconds per point; a sweep sends hundreds of commands. An :class:`Agent` starts
``<launcher> sh`` once and feeds it one command line at a time; each command's stdout comes
back followed by a framed return code and its stderr::

    CMD </dev/null 2>"$E"; echo "@@rc N $?"; sed 's/^/@@e /' "$E"; echo "@@end N"

:func:`run_many` sends one command to several agents at once and collects them together
(select on every pipe), with one deadline. An agent that misses its deadline is killed with
its whole process group (its engine too) and started again on next use. Agents run in their
own session, so a Ctrl-C on the terminal reaches only the orchestrator, which then kills them.
"""
from __future__ import annotations

import os
import select
import shlex
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Sequence


class AgentError(RuntimeError):
    """The launcher could not start a shell on the host (or the shell died)."""


@dataclass
class Result:
    host: str
    rc: int | None          # None: no answer before the deadline (the agent was killed)
    stdout: str
    stderr: str
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.rc is None


class Agent:
    def __init__(self, host: str, launcher: Sequence[str], *, start_timeout: float = 30.0,
                 env: dict[str, str] | None = None):
        self.host = host
        self.launcher = [a.format(host=host) for a in launcher]
        self.start_timeout = start_timeout
        self.env = env
        self.proc: subprocess.Popen | None = None
        self._buf = b""
        self._n = 0
        self._errtail: list[str] = []

    # ------------------------------------------------------------------ life cycle
    def start(self) -> None:
        if self.proc and self.proc.poll() is None:
            return
        argv = [*self.launcher, "sh"]
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, start_new_session=True,
                                         env=self.env)
        except OSError as e:
            raise AgentError(f"{self.host}: cannot start {shlex.join(argv)}: {e}") from e
        self._buf = b""
        self._errtail = []
        t = threading.Thread(target=self._drain_stderr, args=(self.proc,), daemon=True)
        t.start()
        # Each command's stderr goes to a file unlinked at once (fd 4 writes, fd 5 reads on from
        # where the last command's ended): nothing is left behind however the shell ends.
        self._send('E=$(mktemp "${TMPDIR:-/tmp}/mtcagent.XXXXXX") || exit 1; '
                   'exec 4>"$E" 5<"$E"; rm -f "$E"; echo "@@ready $(hostname)"')
        deadline = time.monotonic() + self.start_timeout
        line = self._readline(deadline)
        if line is None or not line.startswith("@@ready"):
            err = " | ".join(self._errtail[-3:])
            self.kill()
            raise AgentError(f"{self.host}: the launcher {shlex.join(argv)!r} did not give a "
                             f"shell within {self.start_timeout:.0f} s"
                             + (f": {err}" if err else "") + (f" (got {line!r})" if line else ""))
        self.remote_hostname = line.split(" ", 1)[1] if " " in line else ""

    def _drain_stderr(self, proc: subprocess.Popen) -> None:
        for raw in iter(proc.stderr.readline, b""):
            self._errtail = (self._errtail + [raw.decode(errors="replace").rstrip()])[-20:]

    def kill(self) -> None:
        p, self.proc = self.proc, None
        if p is None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(p.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                p.wait(timeout=2)
                break
            except subprocess.TimeoutExpired:
                continue
        for f in (p.stdin, p.stdout):
            try:
                f.close()
            except OSError:
                pass

    def close(self) -> None:
        p = self.proc
        if p is None:
            return
        try:
            p.stdin.write(b"exit\n")
            p.stdin.flush()
            p.stdin.close()
            p.wait(timeout=5)
            self.proc = None
        except (OSError, ValueError, subprocess.TimeoutExpired):
            self.kill()

    # ------------------------------------------------------------------ protocol
    def _send(self, text: str) -> None:
        try:
            self.proc.stdin.write(text.encode() + b"\n")
            self.proc.stdin.flush()
        except (OSError, ValueError) as e:
            raise AgentError(f"{self.host}: the shell is gone ({e}): "
                             + " | ".join(self._errtail[-3:])) from e

    def _fill(self, deadline: float) -> bool:
        """Read what is there (waiting until deadline); False on EOF or deadline."""
        fd = self.proc.stdout.fileno()
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        r, _, _ = select.select([fd], [], [], left)
        if not r:
            return False
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return False
        self._buf += chunk
        return True

    def _readline(self, deadline: float) -> str | None:
        while b"\n" not in self._buf:
            if not self._fill(deadline):
                return None
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode(errors="replace")

    def submit(self, argv: Sequence[str] | str) -> int:
        """Send one command (argv list, or a shell string); returns its number."""
        self.start()
        self._n += 1
        cmd = f"( {argv} )" if isinstance(argv, str) else shlex.join(argv)
        self._send(f'{cmd} </dev/null 2>&4 4>&- 5<&-; echo "@@rc {self._n} $?"; '
                   f'sed \'s/^/@@e /\' <&5; echo "@@end {self._n}"')
        self._t0 = time.monotonic()
        self._out: list[str] = []
        self._err: list[str] = []
        self._rc: int | None = None
        return self._n

    def poll_lines(self) -> Result | None:
        """Consume complete lines already buffered; a Result once the command is done."""
        n = self._n
        while b"\n" in self._buf:
            line, self._buf = self._buf.split(b"\n", 1)
            s = line.decode(errors="replace")
            if s.startswith(f"@@rc {n} "):
                self._rc = int(s.split()[2])
            elif s == f"@@end {n}":
                return Result(self.host, self._rc, "\n".join(self._out) + ("\n" if self._out else ""),
                              "\n".join(self._err), time.monotonic() - self._t0)
            elif self._rc is not None and s.startswith("@@e "):
                self._err.append(s[4:])
            else:
                self._out.append(s)
        return None

    def run(self, argv: Sequence[str] | str, timeout: float) -> Result:
        return run_many([(self, argv)], timeout)[0]


def run_many(jobs: Sequence[tuple[Agent, Sequence[str] | str]], timeout: float) -> list[Result]:
    """Run one command on each agent concurrently; results in the same order. An agent that
    does not finish within ``timeout`` s is killed (Result.rc None, its partial output kept)."""
    for a, argv in jobs:
        a.submit(argv)
    deadline = time.monotonic() + timeout
    results: dict[int, Result] = {}
    pending = {id(a): a for a, _ in jobs}
    while pending:
        for k, a in list(pending.items()):
            r = a.poll_lines()
            if r is not None:
                results[k] = r
                del pending[k]
        if not pending:
            break
        fds = {a.proc.stdout.fileno(): a for a in pending.values()}
        left = deadline - time.monotonic()
        ready = select.select(list(fds), [], [], max(0.0, left))[0] if left > 0 else []
        if not ready:
            for k, a in list(pending.items()):
                results[k] = Result(a.host, None, "\n".join(a._out),
                                    _join(a._err, f"no answer within {timeout:g} s: killed"),
                                    time.monotonic() - a._t0)
                a.kill()
            break
        for fd in ready:
            a = fds[fd]
            chunk = os.read(fd, 1 << 16)
            if chunk:
                a._buf += chunk
            else:           # the shell died
                k = id(a)
                a.poll_lines()
                err = " | ".join(a._errtail[-3:])
                results[k] = Result(a.host, a._rc if a._rc is not None else 255,
                                    "\n".join(a._out),
                                    _join(a._err, f"the host's shell died{': ' + err if err else ''}"),
                                    time.monotonic() - a._t0)
                del pending[k]
                a.kill()
    return [results[id(a)] for a, _ in jobs]


def _join(lines: list[str], last: str) -> str:
    return "\n".join([*lines, last])
