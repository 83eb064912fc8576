"""CPU shares that depend on what else the machine runs (benchmark, not a test): the tests assert how these figures
are computed and what the processes do; how large they come out is measured here, side by side, on a quiet machine.

  cpu_wait: stage CROWD, three traced processes pinned to CPU 0 at once, each computing 0.3 s of CPU between reads
    of 1 MiB from the page cache (never asleep); stage ALONE, one pinned to CPU 1. The model's cpu_wait,
    io_cpu_wait and io_cpu_wait_measured (MTCPROF_CPU_WAIT=1) of each stage. Target: CROWD 0.4-0.8 (each waits for
    the two others about 2/3 of its life), ALONE < 0.2.
  hogs: mtcengine writing 4 KiB after --compute-ms 300, with --hogs 2 and without: the engine's children's user
    CPU seconds and their ratio. Target: >= 1.5 (the hogs compute beside the worker on however many cores).
Each repeat runs both sides back to back; the medians of BENCH_REPS (5) repeats are reported with the load average,
and the exit status says whether they met the targets.
    python tests/bench/cpu_bench.py
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from mtcio.db import ingest as ing  # noqa: E402
from mtcio.db import model  # noqa: E402
from mtcio.db import workflow_model as wm  # noqa: E402
from mtcio.envelope import engine as eng  # noqa: E402
from mtcio.preload.testing import run  # noqa: E402

REPS = int(os.environ.get("BENCH_REPS", "5"))
FIGURES = ("cpu_wait", "io_cpu_wait", "io_cpu_wait_measured")


def traced(logs, argv, task, stage):
    return run(argv, logs, env_extra={"MTCPROF_TASK": task, "MTCPROF_STAGE": stage, "MTCPROF_RUN": "W",
                                      "MTCPROF_INCLUDE": os.path.join(os.path.dirname(logs), "data"),
                                      "MTCPROF_CPU_WAIT": "1"}, capture_output=True, text=True)


def cpu_wait_once(tmp) -> dict:
    logs, data = os.path.join(tmp, "logs"), os.path.join(tmp, "data")
    os.mkdir(logs)
    with open(data, "wb") as f:
        f.write(b"d" * (1 << 20))
    spin = (f"import os, time; fd = os.open('{data}', os.O_RDONLY); t = time.process_time() + 0.3\n"
            "while time.process_time() < t:\n    os.pread(fd, 1 << 20, 0)\n    u = time.process_time() + 0.001\n"
            "    while time.process_time() < u: pass")
    res = []
    ts = [threading.Thread(target=lambda i=i: res.append(traced(
        logs, ["taskset", "-c", "0", sys.executable, "-c", spin], f"c{i}", "CROWD"))) for i in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    res.append(traced(logs, ["taskset", "-c", "1", sys.executable, "-c", spin], "a", "ALONE"))
    if any(r.returncode for r in res):
        raise RuntimeError("a traced process failed: " + " ".join(r.stderr for r in res))
    db, out = os.path.join(tmp, "x.db"), os.path.join(tmp, "wf.yaml")
    ing.ingest(db, logs, gfwhere_cmd=None, progress=False, warn=lambda m: None)
    p = argparse.ArgumentParser()
    model.add_arguments(p)
    if model.main(p.parse_args(["--db", db, "--run", "W", "-o", out])):
        raise RuntimeError("mtcprof model failed")
    w = wm.load(out)
    return {st: {k: getattr(w.stage(st), k) for k in FIGURES} for st in ("CROWD", "ALONE")}


def children_cpu(argv) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    subprocess.run(argv, check=True, capture_output=True)
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before


def hogs_once(exe, tmp) -> dict:
    args = [exe, "--op", "write", "--size", "4k", "--path", os.path.join(tmp, "h{i}"), "--compute-ms", "300"]
    without = children_cpu(args)
    with_hogs = children_cpu(args + ["--hogs", "2"])
    return {"cpu_s_without": without, "cpu_s_with_2_hogs": with_hogs, "ratio": with_hogs / without}


def main() -> int:
    if (os.cpu_count() or 1) < 2 or not shutil.which("taskset"):
        print("cpu_bench: needs 2 CPUs and taskset", file=sys.stderr)
        return 2
    exe = str(eng.build())
    waits, hogs = [], []
    for _ in range(REPS):
        with tempfile.TemporaryDirectory() as tmp:
            waits.append(cpu_wait_once(tmp))
            hogs.append(hogs_once(exe, tmp))
    med = {st: {k: round(statistics.median(x[st][k] for x in waits), 4) for k in FIGURES} for st in waits[0]}
    hog = {k: round(statistics.median(x[k] for x in hogs), 3) for k in hogs[0]}
    ok_wait = all(0.4 <= med["CROWD"][k] <= 0.8 and med["ALONE"][k] < 0.2 for k in ("cpu_wait", "io_cpu_wait"))
    ok_hogs = hog["ratio"] >= 1.5
    print(json.dumps({"bench": "CPU shares", "reps": REPS, "loadavg_1m": round(os.getloadavg()[0], 2),
                      "cpu_wait": med, "cpu_wait_within_target": ok_wait,
                      "hogs": hog, "hogs_within_target": ok_hogs}))
    return 0 if ok_wait and ok_hogs else 1


if __name__ == "__main__":
    sys.exit(main())
