"""Start-up time of the console scripts (benchmark, not a test), each beside `python -c pass` measured in turn.

Targets (issue 13): `mtcprof run`, `mtcprof dump` and `mtcbed exec` < 50 ms; `--help` of every command and
subcommand < 150 ms.  Issue 56: `mtcpredict montage_example/montage.yaml` (the terminal table) < 0.5 s, with
`--out DIR` (figures and page) < 2 s, on a quiet machine.  Each command runs BENCH_RUNS (11) times alternating
with the bare interpreter; the median wall time of each is printed, with the libraries a command must not
import checked in the same run.
Python's byte-code cache is on (PYTHONDONTWRITEBYTECODE removed) as for a user: a warm-up run fills it.
`mtcbed exec` without a testbed up measures its start and its read of the state file (it then exits 3); with
one up, it runs /bin/true on the first host (nsenter and setpriv included).
`cli_start_bench.py WORD...` runs only the commands whose name contains one of the words (e.g. `mtcpredict`).
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
from mtcio.preload.testing import ensure_built  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "11"))
BIN = os.path.dirname(sys.executable)
HEAVY = ("numpy", "pandas", "yaml", "matplotlib")
# the libraries a command must not load: checked by running the same entry point in-process under -c
PROBE = ("import sys, runpy; sys.argv = {argv!r}; "
         "import atexit; atexit.register(lambda: print('LOADED', [m for m in {heavy!r} if m in sys.modules and "
         "type(sys.modules[m]).__name__ == 'module'], file=sys.stderr)); "
         "from mtcio.cli import mtcprof; from mtcio.testbed.cli import main as bed; "
         "sys.exit((bed if sys.argv[0] == 'mtcbed' else mtcprof)(sys.argv[1:]))")


# as a user runs them: byte-code caches written (the warm-up run writes them) and used
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def wall(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    return time.perf_counter() - t0


def loaded(argv: list[str]) -> str:
    # the probe must return instead of exec'ing: a command and a host that do not exist
    argv = ["/nonexistent" if a == "/bin/true" else a for a in argv]
    if argv[:2] == ["mtcbed", "exec"]:
        argv[2] = "no-such-host"
    r = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv, heavy=HEAVY)], capture_output=True,
                       text=True, stdin=subprocess.DEVNULL)
    line = [x for x in r.stderr.splitlines() if x.startswith("LOADED")]
    return line[-1][7:] if line else "?"


def main() -> int:
    ensure_built()
    tmp = tempfile.mkdtemp(prefix="mtcio-clibench-")
    logs = os.path.join(tmp, "logs")
    subprocess.run([os.path.join(BIN, "mtcprof"), "run", "--dir", logs, "--", "/bin/true"], check=True)
    log = os.path.join(logs, os.listdir(logs)[0])
    from mtcio.testbed import state
    st = state.load() or {}
    host = st["hosts"][0]["name"] if st.get("phase") == "up" and st.get("hosts") else None
    cases = [
        ("mtcprof run", ["mtcprof", "run", "--dir", logs, "--", "/bin/true"], 0.050),
        ("mtcprof dump", ["mtcprof", "dump", log], 0.050),
        ("mtcbed exec", ["mtcbed", "exec", host or "mtc-node1", "--", "/bin/true"], 0.050),
        ("mtcprof --help", ["mtcprof", "--help"], 0.150),
    ]
    cases += [(f"mtcprof {c} --help", ["mtcprof", c, "--help"], 0.150)
              for c in ("run", "dump", "ingest", "model", "report", "export")]
    cases += [("mtcenvelope --help", ["mtcenvelope", "--help"], 0.150),
              ("mtcenvelope measure --help", ["mtcenvelope", "measure", "--help"], 0.150),
              ("mtcbed --help", ["mtcbed", "--help"], 0.150),
              ("mtcpredict --help", ["mtcpredict", "--help"], 0.150)]
    model = os.path.join(HERE, "..", "..", "montage_example", "montage.yaml")
    cases += [("mtcpredict montage.yaml", ["mtcpredict", model], 0.500),
              ("mtcpredict montage.yaml --out", ["mtcpredict", model, "--out", os.path.join(tmp, "out")], 2.000)]
    cases = [c for c in cases if not sys.argv[1:] or any(w in c[0] for w in sys.argv[1:])]
    print(f"median wall of {RUNS} runs each, alternating with `python -c pass`"
          f"{'' if host else ' (no testbed up: mtcbed exec exits 3 after reading the state)'}")
    print(f"{'command':<28} {'ms':>7} {'python -c pass':>15} {'target':>7}  heavy libraries loaded")
    bad = 0
    for name, argv, target in cases:
        cmd = [os.path.join(BIN, argv[0])] + argv[1:]
        a, b = [], []
        wall(cmd)                                   # warm the page cache
        for _ in range(RUNS):
            a.append(wall(cmd))
            b.append(wall([sys.executable, "-c", "pass"]))
        ma, mb = statistics.median(a), statistics.median(b)
        heavy = loaded(argv) if argv[0] in ("mtcprof", "mtcbed") else "-"
        ok = ma < target
        bad += not ok
        print(f"{name:<28} {ma * 1e3:7.1f} {mb * 1e3:15.1f} {target * 1e3:7.0f}  {heavy}"
              f"{'' if ok else '   OVER TARGET'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
