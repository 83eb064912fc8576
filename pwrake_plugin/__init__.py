"""The Ruby plugin that traces every task of a Rake or Pwrake workflow (lib/mtcio/*.rb, see README.md)."""
import os

LIB_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib")
FILES = {"rake": "mtcio/rake.rb", "pwrake": "mtcio/pwrake.rb", "compat": "mtcio/pwrake_compat.rb"}


def path(which: str | None = None) -> str:
    """The folder to put on Ruby's load path (-I), or the file to load (-r) for `rake`, `pwrake` or `compat`."""
    return LIB_DIR if which is None else os.path.join(LIB_DIR, FILES[which])
