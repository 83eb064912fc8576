"""`make demo`: Montage on a real 4-host Gfarm, end to end, in one command.

testbed up (4 hosts; with an sshd each for Pwrake) -> quick envelope sweep -> synthetic sky -> Montage traced by
the mtcio plugin, twice (two runs of one workflow: the second is the first's repeat): under real Pwrake in its
Gfarm mode when PWRAKE_SRC (a Pwrake source checkout) or `pwrake` on PATH is there, else under Rake with the
plugin's placement -> ingest -> `mtcprof model` of each run -> `mtcpredict --validate` of each run with the other
run's model (held out: no run is predicted from its own trace) -> one HTML page (OUT/index.html: the stage table
measured vs predicted with the two runs' spread beside the errors, locality per stage beside the paper's, the
mosaic, links to mtcpredict's and mtcprof's reports) -> testbed down, whatever happened.

    python montage_example/demo.py [--out DIR] [--preset demo|tiny|paper]

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
from montage_example import bench, page, prepare, run as mrun  # noqa: E402
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
# two runs of one workflow: each is predicted from the other's model, and how far apart their measured times are
# is the noise floor a prediction's error is read against
RUNS = ("montage-demo", "montage-demo-2")
STEPS = 10
READS = "T1L,B1L,T1R,B1R,TN,BN"


class StepError(Exception):
    pass


def sh(argv, what, capture=True, **kw):
    r = subprocess.run(argv, capture_output=capture, text=True, **kw)
    if r.returncode != 0:
        err = (r.stderr or r.stdout or "").strip().splitlines() if capture else []
        raise StepError(f"{what} failed (exit {r.returncode})" + (f": {err[-1]}" if err else ""))
    return r


class Demo:
    def __init__(self, out: str, preset: str):
        self.out, self.preset = out, preset
        self.pwrake = mrun.pwrake_command() is not None        # Pwrake needs an sshd on every host
        self.db = os.path.join(out, "mtc.db")
        self.t0 = time.monotonic()
        self.times = {}
        self.walls = []
        self.n = 0

    def step(self, title, fn, *a):
        self.n += 1
        print(f"\n[{self.n}/{STEPS}] {title}  (t = {time.monotonic() - self.t0:.0f} s)", flush=True)
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
        sh([os.path.join(BIN, "mtcenvelope"), "measure", "--db", self.db, "--name", ENVELOPE, *SWEEP],
           "mtcenvelope measure", capture=False)
        sh([os.path.join(BIN, "mtcenvelope"), "measure", "--db", self.db, "--name", SMALL_CALLS, *SWEEP,
            "--block", "8k", "--metrics", "TL,BL," + READS], "mtcenvelope measure --block 8k", capture=False)
        sh([os.path.join(BIN, "mtcenvelope"), "measure", "--db", self.db, "--name", WARM, *SWEEP,
            "--drop-caches", "off", "--metrics", READS], "mtcenvelope measure --drop-caches off", capture=False)
        sh([os.path.join(BIN, "mtcenvelope"), "measure", "--db", self.db, "--name", MANY, "--sizes",
            "4k,12k,16k,64k,128k", *SWEEP[2:-2], "--ops-per-proc", "16", "--metrics", "TL,BL," + READS],
           "mtcenvelope measure --ops-per-proc 16", capture=False)
        sh([os.path.join(BIN, "mtcenvelope"), "measure", "--db", self.db, "--name", LOADED, *SWEEP,
            "--block", "8k", "--metrics", "TL,BL,T1L,B1L", "--hogs-per-host", "1"],
           "mtcenvelope measure --hogs-per-host 1", capture=False)
        sh([os.path.join(BIN, "mtcenvelope"), "measure", "--db", self.db, "--name", APART, *SWEEP,
            "--block", "8k", "--metrics", "TL,BL", "--call-gap-us", "200"],
           "mtcenvelope measure --call-gap-us 200", capture=False)

    def sky(self):
        self.src = os.path.join(self.out, "sky")
        self.pairs = prepare.prepare(self.src, self.preset)
        self.tiles = len(os.listdir(os.path.join(self.src, "raw")))
        size = os.path.getsize(os.path.join(self.src, "raw", sorted(os.listdir(os.path.join(self.src, "raw")))[0]))
        print(f"  {self.tiles} tiles of {size / 1e6:.2f} MB, {len(self.pairs)} overlaps planned")

    def stage(self):
        # each run in a folder of its own, its tiles written on the same hosts
        self.tops = [f"/{run}-{os.getpid()}" for run in RUNS]
        for top in self.tops:
            home = mrun.stage_inputs(self.bed, top, self.src, self.bed.hosts)
        print("  tiles per host: " + ", ".join(f"{h} {list(home.values()).count(h)}" for h in self.bed.hosts)
              + f" (each of {len(RUNS)} runs)")

    def montage(self, i):
        run, top = RUNS[i], self.tops[i]
        logs = mrun.make_logdir(self.bed)
        done = [0]

        def progress(line):
            if line.startswith("mtcprof:"):
                print("  " + line, flush=True)
            elif line.startswith(("m", "python3", "cd ")):
                done[0] += 1
                if done[0] % 5 == 0:
                    print(f"  {done[0]} commands started", flush=True)
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
        self.walls.append(res.wall_s)
        if i == 0:
            m0 = self.bed.mounts[self.bed.hosts[0]] + top
            with open(m0 + "/mosaic.png", "rb") as fh:        # 0600 as every output (mtcio/private.py)
                write_private(os.path.join(self.out, "mosaic.png"), fh.read())
        print(f"  {done[0]} commands, {res.wall_s:.1f} s wall")

    def model(self):
        for run, wf in zip(RUNS, page.MODELS):
            sh([os.path.join(BIN, "mtcprof"), "model", "--db", self.db, "--run", run, "--envelope", ENVELOPE,
                "-o", os.path.join(self.out, wf)], "mtcprof model")
        sh([os.path.join(BIN, "mtcprof"), "report", "--db", self.db, "--run", RUNS[0],
            "-o", os.path.join(self.out, "profile")], "mtcprof report")

    def predict(self):
        envs = [a for name in (ENVELOPE, SMALL_CALLS, WARM, MANY, LOADED, APART)
                for a in ("--envelope", f"{self.db}:{name}")]
        # held out: the model of the first run predicts the second, and the other way round
        for wf, folder, validated in zip(page.MODELS, page.PREDICTIONS, reversed(RUNS)):
            r = sh([os.path.join(BIN, "mtcpredict"), os.path.join(self.out, wf), *envs,
                    "--validate", f"{self.db}:{validated}", "--out", os.path.join(self.out, folder),
                    "--bootstrap", "20"], "mtcpredict")
            if folder == page.PREDICTIONS[0]:
                print(f"  run {validated}, predicted from the model of run {RUNS[0]}:")
                print("  " + r.stdout.rstrip().replace("\n", "\n  "))

    def page(self):
        self.page_path, self.summary = page.write(self.out, self.db, RUNS, {
            "tiles": self.tiles, "overlaps": len(self.pairs), "hosts": len(self.bed.hosts), "slots": SLOTS,
            "preset": self.preset, "walls_s": self.walls,
            "runner": ("Pwrake (Gfarm mode: tasks scheduled by input location) with the mtcio plugin" if self.pwrake
                       else "Rake with the mtcio plugin and placement (each task on the host holding most of its "
                            "input bytes)"), "steps": self.times})


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="make demo", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="/tmp/mtcio-demo", help="output folder (emptied first; default %(default)s)")
    p.add_argument("--preset", default="demo", choices=["tiny", "demo", "paper"])
    p.add_argument("--poll-idle", action=argparse.BooleanOptionalAction, default=False,
                   help="hold /dev/cpu_dma_latency at 0 us while the demo runs: idle CPUs poll instead of halting, "
                        "as the prediction benchmark does. Off by default: on 4 alternating pairs of demos the polled "
                        "ones' refined median was 36-92 %%, the others' 34-46 %% (montage_example/RESULTS.md)")
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
        d.step("envelope sweep (mtcenvelope measure, quick)", d.sweep)
        d.step("synthetic sky", d.sky)
        d.step("tiles into Gfarm, one host each in turn, a folder per run", d.stage)
        for i, run in enumerate(RUNS):
            d.step(f"Montage run {run} under " + ("Pwrake (Gfarm mode) with the mtcio plugin" if d.pwrake else
                                                 "rake with the mtcio plugin and placement"), d.montage, i)
        d.step("mtcprof model of each run, mtcprof report", d.model)
        d.step("mtcpredict --validate: each run from the other run's model", d.predict)
        d.step("the demo page", d.page)
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
            print(f"\n[{STEPS}/{STEPS}] testbed down  (t = {time.monotonic() - d.t0:.0f} s)", flush=True)
            subprocess.run(MTCBED + ["down"], capture_output=True)
    print("\n" + d.summary)
    print(f"\ndemo finished in {time.monotonic() - d.t0:.0f} s; page: {d.page_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
