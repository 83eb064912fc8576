"""Entry points of the console scripts whose parts are not built yet.

Each says so and exits 2, so no script pretends to work before its part lands.
"""
import sys


def _not_yet(name: str) -> int:
    print(f"{name}: not yet implemented", file=sys.stderr)
    return 2


def mtcprof() -> int:
    return _not_yet("mtcprof")


def mtcenvelope() -> int:
    return _not_yet("mtcenvelope")


def mtcpredict() -> int:
    return _not_yet("mtcpredict")
