"""`mtcprof model --db DB --run R -o workflow.yaml`: the per-stage workflow model the predictor reads."""
import argparse
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", required=True)
    p.add_argument("--run", required=True)
    p.add_argument("-o", "--output", required=True)


def main(args) -> int:
    print("mtcprof model: not yet implemented", file=sys.stderr)
    return 2
