"""Entry points of the console scripts.

`mtcprof` is a dispatcher: each subcommand lives in its own module exposing add_arguments(parser) and
main(args) -> int, listed in _MTCPROF_SUBCOMMANDS.  Only the module of the subcommand being run is imported
(the others pull in numpy/pandas/matplotlib, ~0.1-0.4 s), so `mtcprof run` costs a tracing workflow little
per task; `mtcprof --help` is drawn from the table alone.
"""
import argparse
import os
import sys

from mtcio.exitcodes import BAD_INPUT, EPILOG, exit_table, guard, printable
from mtcio.helptext import HelpFormatter, add_version

# name -> (module, one-line help)
_MTCPROF_SUBCOMMANDS = {
    "run": ("mtcio.preload.run", "run a command under the I/O tracing shim (one log per process)"),
    "dump": ("mtcio.db.dump", "print shim logs as JSON lines"),
    "ingest": ("mtcio.db.ingest", "load a run's shim logs into the SQLite store (tasks, files, locality)"),
    "model": ("mtcio.db.model", "write the per-stage workflow model (YAML) the predictor reads, of a traced run "
                                 "or a WfFormat instance"),
    "report": ("mtcio.db.report", "write a self-contained HTML report of a run (stages, locality, files, timeline)"),
    "export": ("mtcio.db.export_chrome", "export a run as Chrome-trace JSON (Perfetto) or as a WfFormat instance "
                                         "(WfCommons, WRENCH)"),
    "plugin-path": ("mtcio.pwrake_plugin.plugin_path", "print where the Rake/Pwrake tracing plugin is (for -I / -r)"),
    "pwrake-import": ("mtcio.db.pwrake_import", "import Pwrake's own profile (task.csv, command.csv) next to a traced run"),
}

# Libraries that a subcommand's module imports at its top but that its add_arguments() never uses.
_HEAVY = ("numpy", "pandas", "matplotlib", "yaml")


def _defer_heavy_imports() -> None:
    """For `--help` only: import the libraries in _HEAVY lazily (executed at their first attribute use), so
    that building a subcommand's parser from its module does not pay for pandas it will never call."""
    import importlib.abc
    import importlib.util

    class SpecKeepingModule(importlib.util._LazyModule):
        # A second `import numpy` reads only __spec__ (is it still initialising?): answer that without loading,
        # or each module that imports numpy after the first would load it.
        def __getattribute__(self, attr):
            if attr == "__spec__":
                return object.__getattribute__(self, attr)
            return super().__getattribute__(attr)

    class SpecKeepingLoader(importlib.util.LazyLoader):
        def exec_module(self, module):
            super().exec_module(module)
            module.__class__ = SpecKeepingModule

    class LazyHeavy(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name not in _HEAVY:
                return None
            for finder in sys.meta_path:
                if finder is not self and hasattr(finder, "find_spec"):
                    spec = finder.find_spec(name, path, target)
                    if spec is not None and spec.loader is not None:
                        spec.loader = SpecKeepingLoader(spec.loader)
                        return spec
            return None

    sys.meta_path.insert(0, LazyHeavy())


def _chosen(argv: list, names) -> str | None:
    """The subcommand named on the command line (the first word that is not an option), if it is one of ours."""
    for a in argv:
        if a == "--":
            return None
        if not a.startswith("-"):
            return a if a in names else None
    return None


def _check_db_arg(prog: str, args) -> int | None:
    """--db must name a database file (or a new one): one line instead of sqlite's 'unable to open'."""
    db = getattr(args, "db", None)
    if isinstance(db, str) and db != ":memory:":
        if os.path.isdir(db):
            print(f"{prog}: --db {printable(db)} is a folder, not a database file", file=sys.stderr)
            return BAD_INPUT
        parent = os.path.dirname(os.path.abspath(db))
        if not os.path.isdir(parent):
            print(f"{prog}: --db {printable(db)}: no such folder {printable(parent)}", file=sys.stderr)
            return BAD_INPUT
    return None


def mtcprof(argv=None) -> int:
    # guarded as a whole too: a Ctrl-C while the subcommand's module is still being imported is one line, 130
    return guard("mtcprof", _mtcprof, sys.argv[1:] if argv is None else list(argv))


def _mtcprof(argv: list) -> int:
    p = argparse.ArgumentParser(
        prog="mtcprof",
        description="mtcprof: per-task file I/O profiling of many-task workflows. An LD_PRELOAD shim writes one "
                    "log per process; ingest loads a run's logs into SQLite; model, report and export read it.",
        epilog="examples:\n  mtcprof run --dir logs --task t1 --stage mProjectPP -- mProjectPP in.fits out.fits t.hdr\n"
               "  mtcprof dump logs/*.mtclog\n"
               "  mtcprof ingest logs --db mtc.db --run montage1\n"
               "  mtcprof COMMAND --help      options of one command\n\n"
               + exit_table(first="(mtcprof run: the command's own once it runs; each command's --help lists its own)",
                            rows={126: "mtcprof run: the command cannot be executed",
                                  127: "mtcprof run: the command is not found"}),
        formatter_class=HelpFormatter)
    add_version(p, "mtcprof")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", prog="mtcprof")   # prog: no help formatter now
    # A subcommand's module may set its own epilog (its exit codes) in add_arguments; EPILOG otherwise.
    parsers = {name: sub.add_parser(name, help=help_, description=help_, epilog=EPILOG,
                                    formatter_class=HelpFormatter)
               for name, (_mod, help_) in _MTCPROF_SUBCOMMANDS.items()}
    name = _chosen(argv, _MTCPROF_SUBCOMMANDS)
    mod = None
    if name is not None:
        opts = argv[:argv.index("--")] if "--" in argv else argv
        if "-h" in opts or "--help" in opts:
            _defer_heavy_imports()
        import importlib
        mod = importlib.import_module(_MTCPROF_SUBCOMMANDS[name][0])
        sp = parsers[name]
        doc = (mod.__doc__ or "").strip()
        if doc:
            sp.description = doc.splitlines()[0]
        mod.add_arguments(sp)
    args = p.parse_args(argv)
    if not args.command:
        p.print_help(sys.stderr)
        return BAD_INPUT
    prog = f"mtcprof {args.command}"
    bad = _check_db_arg(prog, args)
    if bad is not None:
        return bad
    return guard(prog, mod.main, args)


def mtcenvelope(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    opts = argv[:argv.index("--")] if "--" in argv else argv
    for i, a in enumerate(opts):         # the same --db check as mtcprof's, before sqlite says 'unable to open'
        db = opts[i + 1] if a == "--db" and i + 1 < len(opts) else a[5:] if a.startswith("--db=") else None
        if db is not None and "-h" not in opts and "--help" not in opts:
            bad = _check_db_arg(f"mtcenvelope {opts[0]}" if opts else "mtcenvelope", argparse.Namespace(db=db))
            if bad is not None:
                return bad

    def run(argv):
        from mtcio.envelope.cli import main
        return main(argv)

    return guard("mtcenvelope", run, argv)


def _not_yet(name: str) -> int:
    print(f"{name}: not yet implemented", file=sys.stderr)
    return 2


def mtcpredict(argv=None) -> int:
    from mtcio.predictor.cli import main
    return main(argv)
