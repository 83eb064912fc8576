"""Benchmark: what tracing costs a real Montage run on gfarm2fs — the workflow traced vs untraced, alternating.

Both runs are the same Rake + plugin + placement run on a 4-host testbed (each task on the host holding its
input, started by a shell script doing what `mtcbed exec` does), in a fresh Gfarm folder each time; the untraced
one preloads an empty shared library instead of the mtcprof shim, so the only difference is the shim.  Ingest is
off in both (it runs after the workflow; its time is shown apart).  Runs alternate (traced first in even rounds,
untraced first in odd ones); the figure is median(traced) / median(untraced) wall time, with the per-round ratios
beside it.

    python tests/bench/montage_overhead.py [--preset demo|tiny|paper] [--repeat 3] [--hosts 4] [--results FILE]
(--results FILE: the ratio also written as this command's row of FILE's "overhead" section, e.g.
montage_example/results.json; `python -m montage_example.results` renders RESULTS.md.)
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from montage_example import bench, prepare, results  # noqa: E402


def noop_lib(folder):
    path = os.path.join(folder, "libnoop.so")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", path, "-x", "c", "-"], input="", text=True, check=True)
    os.chmod(path, 0o755)
    return path


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="demo", choices=["tiny", "demo", "paper"])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--hosts", type=int, default=4)
    p.add_argument("--results", metavar="FILE", help="write the ratio into this results file too")
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="mtcmontage-overhead.")
    os.chmod(work, 0o755)
    try:
        src = os.path.join(work, "src")
        pairs = prepare.prepare(src, a.preset)
        noop = noop_lib(work)
        off = {"MTCPROF_INGEST": "off"}
        times = {"traced": [], "untraced": []}
        with bench.testbed_session(4) as bed:
            hosts = bed.hosts[:a.hosts]
            for i in range(a.repeat):
                order = ("traced", "untraced") if i % 2 == 0 else ("untraced", "traced")
                for mode in order:
                    env = dict(off) if mode == "traced" else dict(off, MTCPROF_LIB=noop)
                    w = bench.run_once(bed, src, hosts, run=f"{mode}{i}", db=os.path.join(work, "x.db"),
                                       extra_env=env)
                    times[mode].append(w)
                    print(f"round {i}: {mode:<8} {w:7.2f} s", flush=True)
            # ingest of one traced run, apart
            logs_db = os.path.join(work, "ing.db")
            t = time.monotonic()
            bench.run_once(bed, src, hosts, run="ingested", db=logs_db)
            with_ingest = time.monotonic() - t
        tr, un = statistics.median(times["traced"]), statistics.median(times["untraced"])
        tiles = len(os.listdir(os.path.join(src, "raw")))
        print(f"\nMontage {a.preset}: {tiles} tiles, {len(pairs)} overlaps, {a.hosts} hosts x 2 slots, "
              f"rake -m with the plugin and placement on gfarm2fs")
        print(f"traced   (s): {' '.join(f'{x:.2f}' for x in times['traced'])}   median {tr:.2f}")
        print(f"untraced (s): {' '.join(f'{x:.2f}' for x in times['untraced'])}   median {un:.2f}")
        print("per-round ratio: " + " ".join(f"{x / y:.3f}" for x, y in zip(times["traced"], times["untraced"])))
        print(f"Median wall-time ratio traced/untraced: {tr / un:.3f} (target <= 1.01)")
        print(f"one traced run with ingest at its end: {with_ingest:.2f} s (staging the tiles included)")
        if a.results:
            rounds = [x / y for x, y in zip(times["traced"], times["untraced"])]
            results.set_overhead_row(a.results, {
                "command": results.command_line("tests/bench/montage_overhead.py", sys.argv[1:]),
                "what": f"{tiles} tiles ({a.preset} preset), {a.hosts} hosts, {un:.1f} s untraced runs, wall time "
                        f"({time.strftime('%Y-%m-%d')})",
                "ratio": round(tr / un, 3), "detail": f"rounds {min(rounds):.3f}-{max(rounds):.3f}"})
            print(f"written into {a.results} (python -m montage_example.results renders the page)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
