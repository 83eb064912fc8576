"""`mtcprof plugin-path [rake|pwrake|compat]`: where the Rake/Pwrake tracing plugin is installed."""
from __future__ import annotations

import argparse
import os
import sys

from mtcio.exitcodes import exit_table
from mtcio.pwrake_plugin import FILES, path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("which", nargs="?", choices=sorted(FILES),
                   help="print the file to load with -r instead of the folder for -I: rake (plain Rake), "
                        "pwrake (Pwrake), compat (Pwrake 2.3.1 on Ruby >= 3.0.2)")
    p.epilog = ('examples:\n  rake -I "$(mtcprof plugin-path)" -r mtcio/rake -m -j 8\n'
                '  pwrake -r "$(mtcprof plugin-path compat)" -r "$(mtcprof plugin-path pwrake)" -j 8\n\n'
                + exit_table({1: "failed: the plugin is not installed where mtcio looks for it"}))


def main(args: argparse.Namespace) -> int:
    p = path(args.which)
    if not os.path.exists(p):
        print(f"mtcprof plugin-path: not installed: {p}", file=sys.stderr)
        return 1
    print(p)
    return 0
