"""Entry points of the console scripts.

`mtcprof` is a dispatcher: each subcommand lives in its own module exposing add_arguments(parser) and
main(args) -> int, listed in _MTCPROF_SUBCOMMANDS (add ingest/model/report/export there).
Scripts whose part is not built yet say so and exit 2.
"""
import argparse
import importlib
import sys


def _not_yet(name: str) -> int:
    print(f"{name}: not yet implemented", file=sys.stderr)
    return 2


# name -> (module, one-line help)
_MTCPROF_SUBCOMMANDS = {
    "run": ("mtcio.preload.run", "run a command under the I/O tracing shim (one log per process)"),
    "dump": ("mtcio.db.dump", "print shim logs as JSON lines"),
    "ingest": ("mtcio.db.ingest", "load a run's shim logs into the SQLite store (tasks, files, locality)"),
    "model": ("mtcio.db.model", "write the per-stage workflow model (YAML) the predictor reads"),
    "report": ("mtcio.db.report", "write a self-contained HTML report of a run (stages, locality, files, timeline)"),
    "export": ("mtcio.db.export_chrome", "export a run as Chrome-trace JSON for Perfetto / chrome://tracing"),
    "plugin-path": ("mtcio.pwrake_plugin.plugin_path", "print where the Rake/Pwrake tracing plugin is (for -I / -r)"),
}


def mtcprof(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="mtcprof",
        description="mtcprof: per-task file I/O profiling of many-task workflows. The LD_PRELOAD shim writes one "
                    "log per process into MTCPROF_DIR (see preload/FORMAT.md).",
        epilog="examples:\n  mtcprof run --dir logs --task t1 --stage mProjectPP -- mProjectPP in.fits out.fits t.hdr\n"
               "  mtcprof dump logs/*.mtclog",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    mods = {}
    for name, (modname, help_) in _MTCPROF_SUBCOMMANDS.items():
        mod = importlib.import_module(modname)
        sp = sub.add_parser(name, help=help_, description=(mod.__doc__ or help_).strip().splitlines()[0])
        mod.add_arguments(sp)
        mods[name] = mod
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    if not args.command:
        p.print_help(sys.stderr)
        return 2
    return mods[args.command].main(args)


def mtcenvelope(argv=None) -> int:
    from mtcio.envelope.cli import main
    return main(argv)


def mtcpredict() -> int:
    return _not_yet("mtcpredict")
