"""Every command's and subcommand's `--help` as a user reads it: a description line, help text for every option
and argument, an exit-code table listing exactly the codes that command can return, no word broken across lines;
one `--version` format for every tool."""
import argparse
import os
import re
import subprocess
import sys

import pytest

from mtcio import __version__

BIN = os.path.dirname(sys.executable)

# The codes each command can return (the tables must list exactly these): every command can return 0, 1 (an
# unexpected error, or its own failure), 2 (argparse's bad arguments) and 130 (Ctrl-C).
COMMON = {0, 1, 2, 130}
EXPECTED = {
    ("mtcprof",): COMMON | {126, 127},
    ("mtcprof", "run"): {1, 2, 126, 127, 130},          # and CMD's own once it runs
    **{("mtcprof", c): COMMON for c in ("dump", "ingest", "model", "report", "export", "plugin-path",
                                         "pwrake-import")},
    ("mtcenvelope",): COMMON,
    **{("mtcenvelope", c): COMMON for c in ("measure", "import", "list", "show", "export", "plot")},
    ("mtcpredict",): COMMON,
    ("mtcbed",): COMMON | {3, 4},
    ("mtcbed", "up"): COMMON | {3},
    ("mtcbed", "down"): COMMON,
    ("mtcbed", "status"): COMMON | {3},
    ("mtcbed", "exec"): {1, 2, 3, 4, 130},               # and CMD's own once it runs
}


def subcommands():
    """Every subcommand the tools define, read from their parsers (a new one must be added to EXPECTED)."""
    from mtcio import cli
    from mtcio.envelope.cli import parser as envelope_parser
    from mtcio.testbed.cli import _parser as bed_parser

    def choices(p):
        return next(a for a in p._actions if isinstance(a, argparse._SubParsersAction)).choices
    found = {("mtcprof",), ("mtcenvelope",), ("mtcpredict",), ("mtcbed",)}
    found |= {("mtcprof", c) for c in cli._MTCPROF_SUBCOMMANDS}
    found |= {("mtcenvelope", c) for c in choices(envelope_parser())}
    found |= {("mtcbed", c) for c in choices(bed_parser())}
    return found


def help_of(argv):
    r = subprocess.run([os.path.join(BIN, argv[0]), *argv[1:], "--help"], capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "100"}, stdin=subprocess.DEVNULL)
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    return r.stdout


def entries_without_help(text: str) -> list[str]:
    """The argument and option entries of a help text with no help beside or under them."""
    missing, section, lines = [], None, text.splitlines()
    for i, line in enumerate(lines):
        if re.fullmatch(r"(positional arguments|options):", line):
            section = line
            continue
        if not line.strip() or not line.startswith("  "):
            section = None if not line.startswith(" ") else section
            continue
        if section and re.match(r"  \S", line):          # an entry: its invocation, then help after 2+ spaces
            if re.search(r"\S {2,}\S", line[2:]):
                continue
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            if not re.match(r" {3,}\S", nxt):               # nor on the next line, indented under it
                missing.append(line.strip())
    return missing


def exit_table(text: str) -> list[int]:
    lines = text.splitlines()
    assert "exit codes:" in lines, "no exit-code table"
    rows = lines[lines.index("exit codes:") + 1:]
    codes = []
    for row in rows:
        m = re.match(r"  (\d+) +\S", row)
        if m:
            codes.append(int(m.group(1)))
        else:       # a note before the rows, or a row's continuation; nothing but the table follows it
            assert re.match(r"  \(|  \S| {7}\S", row), f"not part of the exit-code table: {row!r}"
    assert codes == sorted(codes), codes
    return codes


def test_every_subcommand_is_checked():
    assert subcommands() == set(EXPECTED)


@pytest.mark.parametrize("argv", sorted(EXPECTED), ids=" ".join)
def test_help_page(argv):
    out = help_of(list(argv))
    paragraphs = out.split("\n\n")
    assert paragraphs[0].startswith(f"usage: {' '.join(argv)}")
    assert paragraphs[1].strip() and not paragraphs[1].startswith(" "), f"no description line: {paragraphs[1]!r}"
    assert entries_without_help(out) == []
    assert set(exit_table(out)) == EXPECTED[argv]


def test_refinement_names_are_never_broken():
    from mtcio.predictor.model import REFINEMENTS
    out = help_of(["mtcpredict"])
    words = set(re.split(r"[\s,()]+", out))
    assert [r for r in REFINEMENTS if r not in words] == []


def test_the_checker_finds_an_option_without_help():
    p = argparse.ArgumentParser(prog="x", epilog="exit codes:\n  0    ok")
    p.add_argument("--db", required=True)
    p.add_argument("--name", help="a name")
    p.add_argument("-o", "--output-folder-with-a-long-name", help="where")
    assert entries_without_help(p.format_help()) == ["--db DB"]


@pytest.mark.parametrize("argv", [["mtcprof"], ["mtcenvelope"], ["mtcpredict"], ["mtcbed"], ["mtcenvelope", "list"]])
def test_one_version_format(argv):
    r = subprocess.run([os.path.join(BIN, argv[0]), *argv[1:], "--version"], capture_output=True, text=True)
    assert (r.returncode, r.stdout, r.stderr) == (0, f"{argv[0]} (mtcio) {__version__}\n", "")
