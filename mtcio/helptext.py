"""How every mtcio `--help` and `--version` looks: descriptions and option help wrapped at word boundaries
(never inside a word such as a refinement's name), blocks written on several lines (the exit-code table,
examples) kept as written, and one version line "PROG (mtcio) VERSION" for every tool.  Imports nothing heavy."""
from __future__ import annotations

import argparse
import textwrap

from mtcio import __version__


def version_text(prog: str) -> str:
    return f"{prog} (mtcio) {__version__}"


def add_version(p: argparse.ArgumentParser, prog: str) -> None:
    p.add_argument("--version", action="version", version=version_text(prog), help="print the version and exit")


class HelpFormatter(argparse.HelpFormatter):
    """A one-line text is wrapped; a text of several lines (tables, examples) is printed as written."""

    def _fill_text(self, text, width, indent):
        if "\n" in text.strip("\n"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)

    def _split_lines(self, text, width):
        text = self._whitespace_matcher.sub(" ", text).strip()
        return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)
