"""`make demo`: trace two small Montage skies on a real 4-host Gfarm, predict a larger one before running it, run it.

testbed up (4 hosts; with an sshd each for Pwrake) -> quick envelope sweep -> synthetic skies of 4, 9 and 25
tiles (the demo preset's 256x256 tiles) and the 25-tile workflow's task graph (`rake -P`, nothing runs) -> the
tiles into Gfarm -> Montage traced at 4 and at 9 tiles (under real Pwrake in its Gfarm mode when PWRAKE_SRC or
`pwrake` on PATH is there, else under Rake with the plugin's placement) -> `mtcprof model --size` fitted over
the two -> `mtcpredict --at size=25 --tasks-from` written to OUT/predict-25 before any 25-tile task runs ->
Montage at 25 tiles, twice (two runs: their spread is the noise an error is read against) -> the same
prediction validated against both (OUT/validate-25), and the same-configuration baseline: the first 25-tile
run's own model predicting its twin (OUT/baseline) -> one HTML page (OUT/index.html) -> testbed down, whatever
happened.

    python montage_example/demo.py [--out DIR] [--preset demo|tiny|paper] [--results FILE]

--results FILE: the demo's figures also written into FILE's "demo" section, newest first (e.g.
montage_example/results.json; `python -m montage_example.results` renders RESULTS.md from it).

Any failing step stops the demo with one line naming the step, and the testbed is still torn down.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from montage_example import bench, page, prepare, results, run as mrun  # noqa: E402
from mtcio.private import private_dir, write_private  # noqa: E402

BIN = os.path.dirname(sys.executable)
MTCBED = [sys.executable, "-m", "mtcio.testbed.cli"]
HOSTS = 4
SLOTS = 2
# The quick sweep: the sizes Montage's files have in the demo preset (tables, headers, difference images, tiles,
# projected images) with the testbed's steps in size bracketed (~45 ms per op from 16 KiB to 64 KiB read /
# 128 KiB written), 1 and 2 processes per host (the plugin's 2 slots), on 1 and 4 hosts, one file per process
# (a task opens few); one repeat per point (three made the demo 326 s instead of ~120 and its refined median 40 %,
# where two demos of one repeat gave 39 % and 29 %: one run's own ~44 ms stalls decide its single-op stages).
# Then the same with Montage's 8 KiB calls (cfitsio's 2,880-byte FITS blocks through a stdio buffer of
# gfarm2fs's 8 KiB): small write calls cost more on gfarm2fs, and the refined model looks each stage up at its
# own call size; and reads with no cache dropped: a stage reading what the run wrote reads it warm; and small
# files at 16 per process: a process's first op costs more than its next; and the 8 KiB writes and local reads
# beside one computing process per host: a stage whose neighbours compute while it does I/O waits for a CPU; and
# the 8 KiB writes 200 us apart: a task computing between its calls pays for daemons that idled meanwhile.
SWEEP = ["--sizes", "4k,12k,16k,64k,128k,256k,512k,1m", "--procs", "1,2", "--host-counts", "1,4", "--repeat", "1",
         "--precision", "0", "--time-budget", "0", "--ops-per-proc", "1"]
ENVELOPE, SMALL_CALLS, WARM, MANY, LOADED, APART = ("bed4", "bed4-8k", "bed4-warm", "bed4-many", "bed4-8k-hogs1",
                                                  "bed4-8k-apart200")
ENVELOPES = (ENVELOPE, SMALL_CALLS, WARM, MANY, LOADED, APART)


def sweeps(host_counts: str = "1,4") -> list[tuple[str, list[str]]]:
    """(envelope name, `mtcenvelope measure` options) of each quick sweep above, on these host counts (the scale
    benchmark measures them on every host count of its targets)."""
    base = [x if x != "1,4" else host_counts for x in SWEEP]
    return [(ENVELOPE, base),
            (SMALL_CALLS, [*base, "--block", "8k", "--metrics", "TL,BL," + READS]),
            (WARM, [*base, "--drop-caches", "off", "--metrics", READS]),
            (MANY, ["--sizes", "4k,12k,16k,64k,128k", *base[2:-2], "--ops-per-proc", "16", "--metrics",
                    "TL,BL," + READS]),
            (LOADED, [*base, "--block", "8k", "--metrics", "TL,BL,T1L,B1L", "--hogs-per-host", "1"]),
            (APART, [*base, "--block", "8k", "--metrics", "TL,BL", "--call-gap-us", "200"])]
# per preset (its tile size): the two small skies traced, in tiles, and the larger one predicted before it runs
SKIES = {"tiny": (4, 9, 16), "demo": (4, 9, 25), "paper": (4, 9, 16)}
STEPS = 13
READS = "T1L,B1L,T1R,B1R,TN,BN"


def run_names(preset: str) -> tuple[list[str], list[str]]:
    """(the small runs, the two runs of the large sky): montage-4, montage-9; montage-25, montage-25-2."""
    *small, large = SKIES[preset]
    return [f"montage-{k}" for k in small], [f"montage-{large}", f"montage-{large}-2"]


class StepError(Exception):
    pass


def sh(argv, what, capture=True, **kw):
    r = subprocess.run(argv, capture_output=capture, text=True, **kw)
    if r.returncode != 0:
        err = (r.stderr or r.stdout or "").strip().splitlines() if capture else []
        raise StepError(f"{what} failed (exit {r.returncode})" + (f": {err[-1]}" if err else ""))
    return r


def indented(text: str) -> str:
    return "  " + text.rstrip().replace("\n", "\n  ")


class Demo:
    def __init__(self, out: str, preset: str):
        self.out, self.preset = out, preset
        *self.small, self.large = SKIES[preset]
        self.small_runs, self.large_runs = run_names(preset)
        self.pwrake = mrun.pwrake_command() is not None        # Pwrake needs an sshd on every host
        self.db = os.path.join(out, "mtc.db")
        self.t0, self.t0_wall = time.monotonic(), time.time()
        self.times = {}
        self.walls = {}
        self.marks = {}          # wall-clock times: the prediction's file written, each run launched
        self.n = 0

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def step(self, title, fn, *a):
        self.n += 1
        print(f"\n[{self.n}/{STEPS}] {title}  (t = {self.elapsed():.0f} s)", flush=True)
        t = time.monotonic()
        try:
            res = fn(*a)
        except (StepError, mrun.RunError, prepare.PrepareError, OSError) as e:
            raise StepError(f"step {self.n} ({title}): {e}") from None
        self.times[title] = time.monotonic() - t
        return res

    def up(self):
        r = subprocess.run(MTCBED + ["up", "--nodes", str(HOSTS)] + (["--sshd"] if self.pwrake else []),
                           capture_output=True, text=True)
        if r.returncode == 3:
            raise StepError("a testbed is already up (another demo or test run?); `mtcbed down` first")
        if r.returncode != 0:
            raise StepError("mtcbed up failed: " + (r.stderr.strip().splitlines() or ["?"])[-1])
        self.bed = mrun.Bed.current()
        print(f"  hosts: {', '.join(self.bed.hosts)}")

    def sweep(self):
        # progress goes straight to the terminal
        for name, opts in sweeps():
            sh([os.path.join(BIN, "mtcenvelope"), "measure", "--db", self.db, "--name", name, *opts],
               f"mtcenvelope measure ({name})", capture=False)

    def skies(self):
        self.srcs, self.overlaps = {}, {}
        for k in (*self.small, self.large):
            self.srcs[k] = os.path.join(self.out, f"sky-{k}")
            self.overlaps[k] = len(prepare.prepare(self.srcs[k], self.preset, tiles=k))
            raw = os.path.join(self.srcs[k], "raw")
            size = os.path.getsize(os.path.join(raw, sorted(os.listdir(raw))[0]))
            print(f"  {len(os.listdir(raw))} tiles of {size / 1e6:.2f} MB, {self.overlaps[k]} overlaps planned")

    def stage(self):
        # each run in a folder of its own, its tiles written round-robin on the hosts
        tiles = {**dict(zip(self.small_runs, self.small)), **{run: self.large for run in self.large_runs}}
        self.tops = {run: f"/{run}-{os.getpid()}" for run in tiles}
        for run, k in tiles.items():
            mrun.stage_inputs(self.bed, self.tops[run], self.srcs[k], self.bed.hosts)
        print(f"  {len(self.tops)} folders: " + ", ".join(self.tops))

    def montage(self, run):
        top = self.tops[run]
        logs = mrun.make_logdir(self.bed)
        done = [0]

        def progress(line):
            if line.startswith("mtcprof:") and not line.startswith("mtcprof: report:"):
                print("  " + line, flush=True)
            elif line.startswith(("m", "python3", "cd ")):
                done[0] += 1
                if done[0] % 25 == 0:
                    print(f"  {done[0]} commands started", flush=True)
        self.marks[run] = time.time()       # launched: the prediction's file must be older
        try:
            if self.pwrake:
                res = mrun.run_pwrake(self.bed, top, self.bed.hosts, run=run, db=self.db, logdir=logs,
                                      slots=SLOTS, on_line=progress)
            else:
                res = mrun.run_workflow(self.bed, top, self.bed.hosts, run=run, db=self.db, logdir=logs,
                                        placement="with", slots=SLOTS, on_line=progress)
        finally:
            shutil.rmtree(logs, ignore_errors=True)
        if f"mtcprof: run {run} stored in" not in res.stderr:
            raise StepError(f"the run {run} was not ingested: " + res.stderr.strip()[-300:])
        self.walls[run] = res.wall_s
        if run == self.large_runs[0]:
            m0 = self.bed.mounts[self.bed.hosts[0]] + top
            with open(m0 + "/mosaic.png", "rb") as fh:        # 0600 as every output (mtcio/private.py)
                write_private(os.path.join(self.out, "mosaic.png"), fh.read())
        print(f"  {done[0]} commands, {res.wall_s:.1f} s wall")

    def fit(self):
        sizes = ",".join(f"{r}={k}" for r, k in zip(self.small_runs, self.small))
        r = sh([os.path.join(BIN, "mtcprof"), "model", "--db", self.db, "--run", ",".join(self.small_runs),
                "--size", sizes, "--envelope-run", ENVELOPE, "-o", os.path.join(self.out, page.SCALED)],
               "mtcprof model --size")
        print(indented("\n".join(l for l in r.stderr.splitlines() if "scaling fitted" in l)))

    def mtcpredict(self, model, folder, *extra, at=True):
        envs = [a for name in ENVELOPES for a in ("--envelope", f"{self.db}:{name}")]
        target = (["--at", f"size={self.large}", f"hosts={HOSTS}", f"procs={SLOTS}", "--tasks-from", self.graph]
                  if at else [])
        return sh([os.path.join(BIN, "mtcpredict"), os.path.join(self.out, model), *target, *envs,
                   "--variant", "refined", "--out", os.path.join(self.out, folder), *extra], "mtcpredict")

    def task_graph(self):
        """The target's task graph from a dry run in its local folder (after staging: loading the Rakefile makes
        its output folders): every stage's task count and inputs exactly."""
        self.graph = os.path.join(self.out, f"graph-{self.large}.txt")
        g = sh(["rake", "-P"], f"rake -P at {self.large} tiles", cwd=self.srcs[self.large])
        with open(self.graph, "w") as fh:
            fh.write(g.stdout)
        tasks = sum(1 for line in g.stdout.splitlines() if line[:1] not in " \t")
        print(f"  {self.large}-tile task graph (rake -P, nothing run): {tasks} tasks -> {os.path.basename(self.graph)}")

    def predict(self):
        # before any task of the large sky runs: its prediction on disk, and on the terminal
        self.task_graph()
        r = self.mtcpredict(page.SCALED, page.PREDICTED, "--bootstrap", "20")
        with open(os.path.join(self.out, page.PREDICTED, "table.txt"), "w") as fh:
            fh.write(r.stdout)
        self.marks["predicted"] = os.path.getmtime(os.path.join(self.out, page.PREDICTED, "prediction.json"))
        print(indented(r.stdout))
        print(indented("\n".join(l for l in r.stderr.splitlines() if l.startswith("mtcpredict: note"))))

    def validate(self):
        db_runs = f"{self.db}:{','.join(self.large_runs)}"
        # the same prediction (same model, target, graph, envelopes), now beside both measured runs
        self.mtcpredict(page.SCALED, page.VALIDATED, "--bootstrap", "0", "--validate", db_runs)
        # the same-configuration baseline: the first large run's own model predicts its twin
        first, twin = self.large_runs
        sh([os.path.join(BIN, "mtcprof"), "model", "--db", self.db, "--run", first, "--envelope-run", ENVELOPE,
            "-o", os.path.join(self.out, page.BASELINE_MODEL)], "mtcprof model")
        self.mtcpredict(page.BASELINE_MODEL, page.BASELINE, "--bootstrap", "0", "--validate", f"{self.db}:{twin}",
                        at=False)
        sh([os.path.join(BIN, "mtcprof"), "report", "--db", self.db, "--run", first,
            "-o", os.path.join(self.out, "profile")], "mtcprof report")

    def page(self):
        self.page_path, self.summary = page.write(self.out, self.db, self.large_runs, {
            "small": dict(zip(self.small_runs, self.small)), "large": self.large,
            "overlaps": self.overlaps, "hosts": len(self.bed.hosts), "slots": SLOTS, "preset": self.preset,
            "walls_s": self.walls, "predicted_at_s": self.marks["predicted"] - self.t0_wall,
            "launched_at_s": self.marks[self.large_runs[0]] - self.t0_wall,
            "runner": ("Pwrake (Gfarm mode: tasks scheduled by input location) with the mtcio plugin" if self.pwrake
                       else "Rake with the mtcio plugin and placement (each task on the host holding most of its "
                            "input bytes)"), "steps": self.times})


RESULTS_KEPT = 4    # demo entries the results file keeps: a few runs show how much one demo varies


def write_results(path: str, d: Demo, argv) -> None:
    """This demo as one entry of the results file's "demo" section (newest first)."""
    fig = page.figures(page.rows_of(d.out, d.db, d.large_runs))
    w = fig["workflow"]
    load1 = os.getloadavg()[0]
    entry = {"when": time.strftime("%Y-%m-%d %H:%M", time.localtime(d.t0_wall)), "preset": d.preset,
             "small": d.small, "large": d.large, "hosts": HOSTS, "slots": SLOTS,
             "launcher": "Pwrake (Gfarm mode)" if d.pwrake else "rake with placement",
             "seconds": round(d.elapsed()), "walls_s": [round(d.walls[r], 1) for r in d.large_runs],
             "stages": fig["stages"], "load": round(load1, 1)}
    figs = {"median": fig["median"], "p90": fig["p90"], "spread_median": fig["spread_median"],
            "spread_max": fig["spread_max"], "whole_pct": w.get("error_pct"), "whole_spread_pct": w.get("spread_pct"),
            "baseline_median": fig["baseline_median"], "baseline_p90": fig["baseline_p90"],
            "baseline_whole_pct": w.get("baseline_error_pct")}
    entry.update({k: None if v is None else round(v, 1) for k, v in figs.items()})

    def add(section):
        section["command"] = results.command_line("montage_example/demo.py", argv, drop=("--results", "--out"))
        section["runs"] = ([entry] + section.get("runs", []))[:RESULTS_KEPT]
    results.update(path, "demo", add)
    print(f"the demo's figures written into {path} (python -m montage_example.results renders the page)")


def run_steps(d: Demo) -> None:
    """Every step after `testbed up`, in order: the prediction is written before the large sky's first run."""
    d.step("envelope sweep (mtcenvelope measure, quick)", d.sweep)
    d.step(f"synthetic skies of {', '.join(map(str, d.small))} and {d.large} tiles", d.skies)
    d.step("tiles into Gfarm, one host each in turn, a folder per run", d.stage)
    runner = "Pwrake (Gfarm mode) with the mtcio plugin" if d.pwrake else "rake with the mtcio plugin and placement"
    for k, run in zip(d.small, d.small_runs):
        d.step(f"Montage at {k} tiles, run {run}, under {runner}", d.montage, run)
    d.step(f"mtcprof model --size: fitted over {' and '.join(map(str, d.small))} tiles", d.fit)
    d.step(f"rake -P at {d.large} tiles, mtcpredict --at size={d.large}: predicted before it runs", d.predict)
    for run in d.large_runs:
        d.step(f"Montage at {d.large} tiles, run {run}, under {runner}", d.montage, run)
    d.step(f"validated against both {d.large}-tile runs; the same-configuration baseline; mtcprof report",
           d.validate)
    d.step("the demo page", d.page)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="make demo", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="/tmp/mtcio-demo", help="output folder (emptied first; default %(default)s)")
    p.add_argument("--preset", default="demo", choices=sorted(SKIES),
                   help="the tile size and the skies: " + "; ".join(
                       f"{k}: {', '.join(map(str, v[:-1]))} traced, {v[-1]} predicted" for k, v in SKIES.items()))
    p.add_argument("--poll-idle", action=argparse.BooleanOptionalAction, default=False,
                   help="hold /dev/cpu_dma_latency at 0 us while the demo runs: idle CPUs poll instead of halting, "
                        "as the prediction benchmark does. Off by default: on 4 alternating pairs of demos the polled "
                        "ones' refined median was 36-92 %%, the others' 34-46 %% (docs/experiments/montage-passes.md)")
    p.add_argument("--results", metavar="FILE",
                   help="also write the demo's figures into FILE's demo section (e.g. montage_example/results.json)")
    a = p.parse_args(argv)
    if os.geteuid() != 0:
        print("make demo: needs root (the testbed creates network namespaces)", file=sys.stderr)
        return 2
    if a.poll_idle:
        bench.poll_idle()       # its descriptor stays open until the demo exits
    shutil.rmtree(a.out, ignore_errors=True)
    private_dir(a.out)
    d = Demo(a.out, a.preset)
    up = False
    try:
        d.step("testbed up (4 hosts)", d.up)
        up = True
        run_steps(d)
    except StepError as e:
        print(f"\nmake demo: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nmake demo: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 -- one line for the user; MTCIO_DEBUG=1 shows the traceback
        if os.environ.get("MTCIO_DEBUG"):
            raise
        print(f"\nmake demo: step {d.n} failed unexpectedly: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    finally:
        if up:
            print(f"\n[{STEPS}/{STEPS}] testbed down  (t = {d.elapsed():.0f} s)", flush=True)
            subprocess.run(MTCBED + ["down"], capture_output=True)
    print("\n" + d.summary)
    print(f"\ndemo finished in {d.elapsed():.0f} s; page: {d.page_path}")
    if a.results:
        write_results(a.results, d, sys.argv[1:] if argv is None else argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
