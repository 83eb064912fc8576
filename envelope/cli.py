"""mtcenvelope: measure, import, list, show, export and plot the MTC envelope of a Gfarm file system.

examples:
  mtcenvelope measure --db mtc.db --name bed4              # default sweep on the running testbed
  mtcenvelope measure --db mtc.db --sizes 1k,16m --procs 1,4 --repeat 2
  mtcenvelope measure --db mtc.db --sizes-from instance.json --block whole   # the workload's own file sizes
  mtcenvelope measure --db mtc.db --hosts n1,n2 --launcher 'ssh {host}' --mount /gfarm
  mtcenvelope import ior-*.json mdtest-*.txt --db mtc.db --name site
  mtcenvelope list --db mtc.db
  mtcenvelope show --db mtc.db --name bed4
  mtcenvelope export --db mtc.db --name bed4 --format yaml -o bed4.yaml
  mtcenvelope plot --db mtc.db --name bed4 -o fig/
"""
from __future__ import annotations

import argparse
import os
import sys
import time

from mtcio.exitcodes import exit_table, printable
from mtcio.helptext import HelpFormatter, add_version

from .points import METRICS, ParseError, parse_size

_BAD = "bad input: bad options; a --db that is missing, unreadable or not SQLite; a --name it does not have"
_OUT = "failed: the output file or folder could not be written"
EXIT_CODES = {
    "measure": exit_table({1: "failed: some points failed (their reasons: show --failed); the db could not be written",
                           2: "bad input: bad options; --db not SQLite; an existing run without --append; "
                              "an unknown host; a tool that is not installed",
                           130: "interrupted (Ctrl-C, SIGTERM): the points measured so far are kept, the run "
                                "is marked interrupted in list and export"}),
    "import": exit_table({1: "failed: the db could not be written",
                          2: "bad input: a FILE or --db that is missing, unreadable or malformed; an implausible "
                             "benchmark output; a duplicate import; an existing run without --append"}),
    "list": exit_table({2: "bad input: bad options; a --db that is missing, unreadable or not SQLite"}),
    "show": exit_table({2: _BAD}),
    "export": exit_table({1: _OUT, 2: _BAD}),
    "plot": exit_table({1: _OUT, 2: _BAD}),
}


def _sizes(text: str) -> list[int]:
    try:
        return [parse_size(x) for x in text.split(",") if x.strip()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _size(text: str) -> int:
    try:
        n = parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if not 1 <= n <= 1 << 30:
        raise argparse.ArgumentTypeError(f"expected 1 byte .. 1 GiB, got {text!r}")
    return n


WHOLE = "whole"        # --block whole: one call per file


def _block(text: str):
    return WHOLE if text == WHOLE else _size(text)


def _ints(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")
    if not out or any(v < 1 for v in out):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return out


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return n


def _metrics(text: str) -> list[str]:
    ms = [x.strip() for x in text.split(",") if x.strip()]
    bad = [m for m in ms if m not in METRICS]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown metric(s) {', '.join(bad)}; one of "
                                         f"{', '.join(METRICS)}")
    return ms


def _host_counts(text: str) -> list[int] | str:
    if text.strip() in ("all", "1..all"):
        return text.strip()
    return _ints(text)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mtcenvelope", description=__doc__.split("\n")[0],
                                epilog=__doc__.split("\n", 2)[2] + "\n" + exit_table(
                                    first="(each COMMAND's --help says what they mean for it)"),
                                formatter_class=HelpFormatter)
    add_version(p, "mtcenvelope")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")

    def command(name, help_, description=None):
        return sub.add_parser(name, help=help_, description=description or help_[0].upper() + help_[1:] + ".",
                              epilog=EXIT_CODES[name], formatter_class=HelpFormatter)

    m = command("measure", "run an envelope sweep and store its points",
                       description="Measure Tm, Ts, Tf, T1L/B1L, T1R/B1R, TN/BN, TL/BL for every file "
                       "size x processes per host x host count, each point until its 90% "
                       "interval is within --precision of its mean (at least --repeat times), "
                       "with the native engine (or an external tool) on every host at once.")
    m.add_argument("--db", required=True, help="SQLite db (created if missing)")
    m.add_argument("--name", help="run name (default envelope-YYYYmmdd-HHMMSS)")
    m.add_argument("--append", action="store_true", help="add to an existing run of that name")
    m.add_argument("--hosts", help="comma-separated hosts (default: every testbed host)")
    m.add_argument("--host-counts", type=_host_counts, default="all", metavar="N,..|all|1..all",
                   help="numbers of hosts to sweep (the first N of --hosts); default all")
    m.add_argument("--sizes", type=_sizes, default=None, metavar="S,..",
                   help="file sizes (default 1k,128k,1m,16m)")
    m.add_argument("--sizes-from", metavar="FILE,..",
                   help="file sizes spanning a workload's own instead of --sizes: WfFormat instances (JSON) or "
                   "workflow models (YAML), together; --size-points sizes evenly spaced in log scale from their "
                   "smallest file to their largest, both included")
    m.add_argument("--size-points", type=int, default=None, metavar="N",
                   help="with --sizes-from: how many sizes (default 8)")
    m.add_argument("--procs", type=_ints, default=None, metavar="P,..",
                   help="processes per host (default 1,2,4,8)")
    m.add_argument("--repeat", type=int, default=3, help="repeats per point at least "
                   "(default 3); more until --precision is met")
    m.add_argument("--precision", type=float, default=0.05, metavar="FRACTION",
                   help="repeat a point until the 90%% interval of its mean is within "
                   "+-FRACTION of the mean (default 0.05), its share of --time-budget is "
                   "spent or --max-repeat is reached; 0 = exactly --repeat repeats")
    m.add_argument("--max-repeat", type=int, default=None, help="repeats per point at most "
                   "(default 30, or --repeat if larger)")
    m.add_argument("--budget-factor", type=float, default=2.5, metavar="F",
                   help="a point's repeats stop once they took F times as long as its --repeat "
                   "minimum (default 2.5)")
    m.add_argument("--time-budget", type=float, default=270.0, metavar="SECONDS",
                   help="time for the whole sweep (default 270: the default sweep on a 4-host "
                   "testbed stays within 5 minutes); each point's extra repeats get at most "
                   "its share of what is left; the --repeat minimum is always measured; "
                   "0 = no limit")
    m.add_argument("--metrics", type=_metrics, default=None,
                   help=f"subset of {','.join(METRICS)} (default all)")
    m.add_argument("--tool", choices=["native", "ior", "mdtest", "fio"], default="native",
                   help="native engine (default) or an external tool on PATH")
    m.add_argument("--launcher", help="argv prefix reaching a host, with {host} (default: "
                   "'mtcbed exec {host} --' when a testbed is up, else 'ssh {host}')")
    m.add_argument("--mpi-launcher", default="mpirun --oversubscribe -np {nprocs} --host "
                   "{hostlist}", help="how IOR/mdtest are started ({nprocs} {hostlist} {ppn})")
    m.add_argument("--mount", help="gfarm2fs mount point on the hosts, may hold {host} "
                   "(default: the testbed's /mnt/mtcbed/{host})")
    m.add_argument("--backend", choices=["posix", "gfarm"], default="posix",
                   help="posix on the gfarm2fs mount (default; what Montage tasks use) or "
                   "gfarm (libgfarm gfs_pio_*)")
    m.add_argument("--engine", help="mtcengine path on the hosts (default: this tree's build)")
    m.add_argument("--workdir", default="/mtcenvelope", help="Gfarm directory for the files "
                   "(a fresh subdirectory per sweep; removed at the end unless --keep-files)")
    m.add_argument("--keep-files", action="store_true",
                   help="leave the sweep's files in --workdir (to look at them; default: removed)")
    m.add_argument("--ops-per-proc", type=int, help="files per process and run (default: "
                   "enough for 2 MiB per process, 1..16)")
    m.add_argument("--block", type=_block, default=1 << 20, metavar="SIZE|whole",
                   help="bytes per read/write call (default 1m); a workflow writing in small calls "
                   "(Montage: 2880-byte FITS blocks) can be measured at its own call size; whole: every file "
                   "in one call (the block is the sweep's largest size), as a program reading and writing "
                   "each file with one read(2) and one write(2)")
    m.add_argument("--creates-per-proc", type=int, default=16, help="Tm creates per process "
                   "(default 16)")
    m.add_argument("--timeout", type=float, default=60.0, help="seconds per engine run before "
                   "it is killed and the point recorded failed (default 60)")
    m.add_argument("--start-delay", type=float, help="seconds between dispatch and the common "
                   "start instant (default 0.15 posix, 0.4 gfarm; grows if a host is late)")
    m.add_argument("--drop-caches", choices=["auto", "evict", "drop", "off"], default="auto",
                   help="before every read run: evict = write back and evict every gfsd spool "
                   "file from the page cache (testbed: one kernel, root); drop = sync + "
                   "echo 3 > /proc/sys/vm/drop_caches on every host (needs root/sudo -n); "
                   "auto (default) = evict on a testbed, else drop; off")
    m.add_argument("--fsync", action="store_true", help="fsync before close on writes")
    m.add_argument("--write-compute-ms", type=int, default=0, metavar="MS",
                   help="TL/BL writers compute (spin) MS ms before their first write, as a task "
                   "computes what it writes (default 0: they write right after the start, idle); "
                   "on some machines a write soon after compute costs several times more "
                   "(envelope/README.md)")
    m.add_argument("--hogs-per-host", type=int, default=0, metavar="H",
                   help="H processes per host only compute (spin) beside every measured run: the "
                   "envelope of hosts whose CPUs tasks keep busy (default 0). mtcpredict blends it "
                   "with an idle envelope by each stage's traced cpu_load (refinement cpu_load)")
    m.add_argument("--hogs-per-kernel", type=int, default=0, metavar="K",
                   help="K processes per kernel only compute (spin) beside every measured run: on a "
                   "testbed, whose hosts share this machine's kernel, K in all; on separate machines K "
                   "per host (default 0). On a VM small ops cost less beside them (vCPUs kept from "
                   "halting), which a workflow's own busy processes do not give: Montage predicted from "
                   "such envelopes came out 27-55 %% too fast (envelope/README.md)")
    m.add_argument("--call-gap-us", type=int, default=0, metavar="US",
                   help="every process computes (spins) US microseconds between two of its read or "
                   "write calls, as a task computes each row it writes (default 0: back to back); the "
                   "times leave the spins out. On a VM whose file system daemons idle between calls, "
                   "calls apart cost more (envelope/README.md)")
    m.add_argument("--young", action="store_true",
                   help="T1L/B1L only, read at once after their write run (no check or cache drop in between): "
                   "files another process wrote on the reader's host ~0.2 s before, within FUSE's entry and "
                   "attribute timeouts (1 s). mtcpredict uses it for the reads of files a stage's host wrote "
                   "moments before (refinement young_reads)")
    m.add_argument("--idle-ms", type=int, default=0, metavar="MS",
                   help="reads only: every reader sleeps MS ms before each op after its first, and its first op "
                   "(after the launch's idle) is dropped from the points: the cost of a read after the host's I/O "
                   "path idled MS ms (a task's first read follows the idle since its host's last I/O; on the "
                   "testbed 1 KiB costs 0.8 ms back to back, 1.4 after 50 ms idle, 1.9 after 300)")
    m.add_argument("--look", type=float, default=0.5, metavar="SECONDS",
                   help="before the sweep, watch this machine's CPUs and disks this long and warn when other work "
                   "keeps them busy (CPUs > 25 %%, a disk > 20 %% busy or > 32 MiB/s written): an envelope "
                   "measured beside other work measures it too (default 0.5; 0 = do not look). What was seen goes "
                   "into the run's meta")
    m.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS",
                   help="when the machine is busy, look again until it is quiet, at most this long, then "
                   "measure anyway (default 0: do not wait)")
    m.add_argument("--quiet", action="store_true", help="no progress bar")

    im = command("import", "store the points of benchmark outputs made elsewhere (IOR JSON, mdtest, fio, iozone)")
    im.add_argument("files", nargs="+", metavar="FILE",
                    help="benchmark outputs: IOR --json, mdtest text, fio --output-format=json, iozone text")
    im.add_argument("--db", required=True, help="SQLite db to store the points in (created if missing)")
    im.add_argument("--name", required=True, help="run to store the points in (created; an existing "
                    "one only with --append)")
    im.add_argument("--append", action="store_true", help="add to an existing run of that name "
                    "(one made by import: measured runs are not mixed with imported points)")
    im.add_argument("--metric", choices=["T1L", "T1R", "TN", "B1L", "B1R", "BN"],
                    help="which read metric the files' read phases stand for (outputs cannot "
                    "tell local from remote); refused when no file has a read phase")
    im.add_argument("--tool", choices=["ior", "mdtest", "fio", "iozone"],
                    help="force a parser instead of detecting it from the content")
    im.add_argument("--hosts", type=_positive, help="hosts the run used (fio/iozone outputs, "
                    "which do not record it; IOR and mdtest outputs record their own)")
    im.add_argument("--procs-per-host", type=_positive, help="processes per host (fio/iozone "
                    "outputs; default: all the output's processes on one host)")

    ls = command("list", "list the envelope runs in a db (name, tool, hosts, points, state)")
    ls.add_argument("--db", required=True, help="SQLite db holding envelope runs")
    ls.add_argument("--json", action="store_true", help="one JSON document instead of the table")

    sh = command("show", "print a run's points: mean, min, max over repeats, with units")
    sh.add_argument("--db", required=True, help="SQLite db holding envelope runs")
    sh.add_argument("--name", help="run (default: the latest envelope run)")
    sh.add_argument("--metric", type=_metrics, metavar="M,..",
                    help=f"only these metrics, of {','.join(METRICS)} (default all)")
    sh.add_argument("--failed", action="store_true", help="list the failed points with reasons")

    ex = command("export", "write a run's points to YAML or CSV (envelope/README.md gives the format)")
    ex.add_argument("--db", required=True, help="SQLite db holding envelope runs")
    ex.add_argument("--name", help="run (default: the latest envelope run)")
    ex.add_argument("--format", choices=["yaml", "csv"], default=None,
                    help="default: from the -o suffix, else yaml")
    ex.add_argument("-o", "--output", metavar="FILE", help="file, or - for stdout (default stdout)")

    pl = command("plot", "draw one PNG per metric (ops/s or MiB/s over total processes, a line per file size) "
                         "and an index.html showing them")
    pl.add_argument("--db", required=True, help="SQLite db holding envelope runs")
    pl.add_argument("--name", help="run (default: the latest envelope run)")
    pl.add_argument("-o", "--output", required=True, metavar="DIR",
                    help="folder for the PNGs and index.html (created 0700 if missing)")
    for sp in sub.choices.values():
        add_version(sp, "mtcenvelope")
    return p


def main(argv=None) -> int:
    p = parser()
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    if not args.cmd:
        p.print_help(sys.stderr)
        return 2
    try:
        return {"measure": cmd_measure, "import": cmd_import, "list": cmd_list,
                "show": cmd_show, "export": cmd_export, "plot": cmd_plot}[args.cmd](args)
    except BrokenPipeError:   # `mtcenvelope export | head`: the reader has seen enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("mtcenvelope: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - one clear line, not a traceback, for known errors
        from .sweep import MeasureError
        from .tools import ToolMissing
        known = (MeasureError, ToolMissing, ParseError, LookupError, ValueError, OSError)
        try:
            from mtcio.db.store import StoreError
            known += (StoreError,)
        except ImportError:
            pass
        if isinstance(e, known):
            print(f"mtcenvelope {args.cmd}: {e}", file=sys.stderr)
            # a missing input is bad input; an output that cannot be written a failure
            return 1 if isinstance(e, OSError) and not isinstance(e, FileNotFoundError) else 2
        raise


def cmd_measure(a) -> int:
    from . import measure as M
    from . import sweep as SW
    from .target import make_target
    name = a.name or time.strftime("envelope-%Y%m%d-%H%M%S")
    if a.max_repeat is None:
        a.max_repeat = max(30, a.repeat)
    if a.repeat < 1 or a.max_repeat < a.repeat or a.precision < 0 or a.time_budget < 0 or \
            a.budget_factor < 1:
        raise ValueError("need 1 <= --repeat <= --max-repeat, --precision >= 0, "
                         "--budget-factor >= 1 and --time-budget >= 0")
    if not 0 <= a.write_compute_ms <= 600000:
        raise ValueError(f"--write-compute-ms: expected 0..600000 ms, got {a.write_compute_ms}")
    if not 0 <= a.hogs_per_host <= 256:
        raise ValueError(f"--hogs-per-host: expected 0..256, got {a.hogs_per_host}")
    if a.hogs_per_host and a.tool != "native":
        raise ValueError(f"--hogs-per-host: only the native engine runs them (not --tool {a.tool})")
    if not 0 <= a.hogs_per_kernel <= 256:
        raise ValueError(f"--hogs-per-kernel: expected 0..256, got {a.hogs_per_kernel}")
    if a.hogs_per_kernel and a.tool != "native":
        raise ValueError(f"--hogs-per-kernel: only the native engine runs them (not --tool {a.tool})")
    if not 0 <= a.call_gap_us <= 10_000_000:
        raise ValueError(f"--call-gap-us: expected 0..10000000 us, got {a.call_gap_us}")
    if a.call_gap_us and a.tool != "native":
        raise ValueError(f"--call-gap-us: only the native engine spins between calls (not --tool {a.tool})")
    if a.young and a.tool != "native":
        raise ValueError(f"--young: only the native engine reads at once after writing (not --tool {a.tool})")
    if a.young and a.metrics and set(a.metrics) - {"T1L", "B1L"}:
        raise ValueError("--young measures T1L and B1L only")
    if not 0 <= a.idle_ms <= 600000:
        raise ValueError(f"--idle-ms: expected 0..600000 ms, got {a.idle_ms}")
    if a.idle_ms and a.tool != "native":
        raise ValueError(f"--idle-ms: only the native engine sleeps between ops (not --tool {a.tool})")
    if a.idle_ms and a.young:
        raise ValueError("--idle-ms and --young: give one")
    if not 0 <= a.look <= 60:
        raise ValueError(f"--look: expected 0..60 s, got {a.look}")
    if not 0 <= a.wait_quiet <= 86400:
        raise ValueError(f"--wait-quiet: expected 0..86400 s, got {a.wait_quiet}")
    if a.wait_quiet and not a.look:
        raise ValueError("--wait-quiet needs --look > 0")
    if a.sizes_from and a.sizes:
        raise ValueError("--sizes and --sizes-from: give one")
    if a.size_points is not None and not a.sizes_from:
        raise ValueError("--size-points needs --sizes-from")
    if a.sizes_from:
        from .sizes_from import DEFAULT_POINTS, sizes_from
        a.sizes = sizes_from([x for x in a.sizes_from.split(",") if x],
                             DEFAULT_POINTS if a.size_points is None else a.size_points)
    if a.block == WHOLE:
        a.block = max(a.sizes or SW.DEFAULT_SIZES)
        if a.block > 1 << 30:
            raise ValueError(f"--block whole: the largest size, {a.block} bytes, is above 1 GiB")
    sweep = SW.Sweep(sizes=a.sizes or list(SW.DEFAULT_SIZES),
                    procs=a.procs or list(SW.DEFAULT_PROCS), repeat=a.repeat,
                    max_repeat=a.max_repeat, precision=a.precision,
                    budget_factor=a.budget_factor,
                    time_budget=a.time_budget or None,
                    metrics=a.metrics or (["T1L", "B1L"] if a.young else list(M.IDLE_METRICS) if a.idle_ms
                                          else list(METRICS)),
                    ops_per_proc=a.ops_per_proc,
                    creates_per_proc=a.creates_per_proc, timeout=a.timeout,
                    start_delay=a.start_delay, drop_caches=a.drop_caches, workdir=a.workdir,
                    keep_files=a.keep_files, fsync=a.fsync, block=a.block,
                    write_compute_ms=a.write_compute_ms, hogs_per_host=a.hogs_per_host,
                    hogs_per_kernel=a.hogs_per_kernel,
                    call_gap_us=a.call_gap_us, young=a.young, idle_ms=a.idle_ms)
    hosts = [h for h in (a.hosts or "").split(",") if h] or None
    if a.tool != "native":
        from . import tools
        tools.require(a.tool)            # a clear error before anything else happens
    target = make_target(hosts, a.launcher, a.mount, a.backend, a.engine)
    n = len(target.hosts)
    sweep.host_counts = (list(range(1, n + 1)) if a.host_counts == "1..all" else
                         [n] if a.host_counts == "all" else a.host_counts)
    machine = _look(a)
    if a.tool != "native":
        from . import tools
        res = tools.measure_with_tool(a.tool, a.db, name, target, sweep, append=a.append,
                                      mpi_launcher=a.mpi_launcher, progress=not a.quiet)
    else:
        res = M.measure(a.db, name, target, sweep, append=a.append, progress=not a.quiet, machine=machine)
    print(f"{'interrupted' if res['interrupted'] else 'done'}: run {res['run']!r} in "
          f"{res['db']}: {res['points']} points ({res['failed']} failed) in "
          f"{res['seconds']:.1f} s"
          + (f"; files left under {res['workdir']} (gfrm -rf to remove)"
             if res["interrupted"] and res.get("workdir") else ""), file=sys.stderr)
    if res["interrupted"]:
        return 130
    swung_msg = _swung(res["db"], res["run"])
    if swung_msg:
        print(f"warning: {swung_msg}", file=sys.stderr)
    return 1 if res["failed"] else 0


def _look(a) -> dict | None:
    """This machine's load just before the sweep (--look), after waiting for a quiet moment (--wait-quiet); a
    warning when it stayed busy."""
    if not a.look:
        return None
    from . import machine

    def say(line):
        print(f"mtcenvelope: {line}", file=sys.stderr)
    load, waited = machine.wait_quiet(a.wait_quiet, a.look, say)
    if load.busy():
        print(f"warning: the machine is busy before the sweep ({load}"
              + (f", still after waiting {waited:.0f} s" if a.wait_quiet else "")
              + "): an envelope measured beside other work measures that work too; measure when it is quiet"
              + ("" if a.wait_quiet else " (--wait-quiet waits for it)"), file=sys.stderr)
    elif waited > 2 * a.look:
        say(f"quiet after {waited:.0f} s ({load})")
    return dict(load.as_dict(), busy=load.busy(), waited_s=round(waited, 1))


def _swung(db, run) -> str | None:
    """A line when a tenth or more of the run's op-rate points of 5+ repeats swung > 2x between their quartiles."""
    from mtcio.db import envelope_rows

    from .stats import SWUNG_SHARE, swung
    ops = [m for m, unit in METRICS.items() if unit == "ops/s"]
    conn = envelope_rows.open_readonly(db)
    try:
        rows = envelope_rows.ok_values(conn, run, ops)
    finally:
        conn.close()
    cells: dict = {}
    for *cell, v in rows:
        cells.setdefault(tuple(cell), []).append(v)
    five = [v for v in cells.values() if len(v) >= 5]
    bad = sum(swung(v) for v in five)
    if not five or bad < SWUNG_SHARE * len(five):
        return None
    return (f"{bad} of {len(five)} op-rate points of 5 or more repeats swung more than 2x between their repeats' "
            "quartiles: the machine was not steady while they were measured (other work writing to its disks "
            "does this); measure again when it is quiet")


def cmd_import(a) -> int:
    from .importer import import_files
    import_files(a.files, a.db, a.name, read_metric=a.metric, tool=a.tool, hosts=a.hosts,
                 procs_per_host=a.procs_per_host, append=a.append,
                 log=lambda m: print(m, file=sys.stderr))
    return 0


def cmd_list(a) -> int:
    from .export import runs_table
    df = runs_table(a.db)
    if a.json:
        print(df.to_json(orient="records"))
        return 0
    if df.empty:
        print(f"no envelope runs in {a.db}")
        return 0
    print(df.to_string(index=False))
    return 0


def cmd_show(a) -> int:
    from .export import load, summary
    df = load(a.db, a.name)
    if a.metric:
        df = df[df["metric"].isin(a.metric)]
    if a.failed:
        bad = df[~df["ok"]]
        if bad.empty:
            print("no failed points")
        for r in bad.to_dict("records"):   # not iterrows: r.repeat is Series.repeat there
            print(f"{r['metric']:>4} size={r['file_size']} ppn={r['procs_per_host']} "
                  f"hosts={r['hosts']} repeat={r['repeat']}: {r['error']}")
        return 0
    print(summary(df).to_string(index=False))
    return 0


def cmd_export(a) -> int:
    from mtcio.private import write_private

    from .export import export
    fmt = a.format or ("csv" if (a.output or "").endswith(".csv") else "yaml")
    text = export(a.db, a.name, fmt)
    if a.output and a.output != "-":
        try:
            write_private(a.output, text)      # 0600 whatever the umask, as every output
        except OSError as e:
            return _cannot_write("export", a.output, e)
        print(f"wrote {a.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _cannot_write(cmd: str, path: str, e: OSError) -> int:
    """One line for an output that cannot be written, exit 1 as the help says (main would call a
    missing folder a missing input, 2, and print the raw errno text)."""
    if isinstance(e, FileNotFoundError):
        why = f"no such folder {printable(os.path.dirname(os.path.abspath(path)))}"
    elif isinstance(e, FileExistsError):        # plot's output folder
        why = "it is a file, not a folder"
    elif isinstance(e, NotADirectoryError):
        why = "a part of its path is a file, not a folder"
    elif isinstance(e, IsADirectoryError):
        why = "it is a folder"
    else:
        why = (e.strerror or str(e)).lower()
        if isinstance(e.filename, str) and e.filename != path:
            why += f" ({printable(e.filename)})"
    print(f"mtcenvelope {cmd}: cannot write {printable(path)}: {why}", file=sys.stderr)
    return 1


def _under(path, folder: str) -> bool:
    try:
        return os.path.commonpath([os.path.abspath(path), os.path.abspath(folder)]) == \
            os.path.abspath(folder)
    except (TypeError, ValueError):
        return False


def cmd_plot(a) -> int:
    from .plot import plot
    try:
        files = plot(a.db, a.name, a.output)
    except OSError as e:
        # the output folder's errors only: a missing --db stays bad input (main)
        if not _under(e.filename, a.output):
            raise
        return _cannot_write("plot", a.output, e)
    print(f"wrote {len(files)} files into {a.output} (open {os.path.join(a.output, 'index.html')})",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
