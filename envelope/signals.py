"""SIGTERM stops a sweep as Ctrl-C does (KeyboardInterrupt), so a killed sweep keeps what it measured."""
from __future__ import annotations

import contextlib
import signal
import threading


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


@contextlib.contextmanager
def sigterm_as_interrupt():
    """Within the block SIGTERM raises KeyboardInterrupt; the old handler is back after it. Only the main thread may
    set a handler: elsewhere nothing changes."""
    main = threading.current_thread() is threading.main_thread()
    old = signal.getsignal(signal.SIGTERM)
    if main:
        signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        if main:
            signal.signal(signal.SIGTERM, old)
