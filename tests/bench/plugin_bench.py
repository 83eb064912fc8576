"""Per-task cost of the Rake tracing plugin, measured side by side in one run (benchmark, not a test).

A Rakefile of N_TASKS tasks, each one `sh` of a trivial command (`true`), run by Debian's rake one task at a time:
  plain     rake without the plugin
  traced    rake -r mtcio/rake: the command rewritten, run as `LD_PRELOAD=... exec /bin/sh -c '...'` under the
            shim, one log per process (the end-of-run ingest is off: it is once per workflow, not per task)
  added ms per task = (traced - plain) / N_TASKS, and the ratio traced / plain of the whole run; runs alternate
  plain/traced, medians of BENCH_REPS repetitions.  Also the rewriting alone (MtcIO::Trace.wrap in Ruby), us per call.
With PWRAKE_SRC (a masa16/pwrake checkout) the same Rakefile also under Pwrake on this host (-j 1), plain and traced.
Target (issue 12): <= 5 ms added per task.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from mtcio import pwrake_plugin  # noqa: E402
from mtcio.preload.testing import LIB  # noqa: E402

REPS = int(os.environ.get("BENCH_REPS", "7"))
N_TASKS = int(os.environ.get("BENCH_TASKS", "200"))
RAKEFILE = f"""
T = (0...{N_TASKS}).map {{ |i| "t#{{i}}" }}
T.each {{ |t| task(t) {{ sh "true", verbose: false }} }}
task :default => T
"""
WRAP = """
require "mtcio/trace"
n = 100_000
t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
n.times { |i| MtcIO::Trace.wrap("mProjectPP in#{i}.fits 'out file.fits' > log 2>&1", "task#{i}", "mProjectPP") }
puts (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0) / n * 1e6
"""


PWRAKE_SRC = os.environ.get("PWRAKE_SRC")


def run(folder: str, env: dict, plugin: bool, pwrake: bool = False) -> float:
    if pwrake:
        cmd = ["ruby", "-I", os.path.join(PWRAKE_SRC, "lib"), os.path.join(PWRAKE_SRC, "bin", "pwrake"), "-j", "1",
               "-r", pwrake_plugin.path("compat")] + (["-r", pwrake_plugin.path("pwrake")] if plugin else [])
    else:
        cmd = ["rake"] + (["-I", pwrake_plugin.path(), "-r", "mtcio/rake"] if plugin else [])
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=folder, env=env, check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="plugin-bench.") as d:
        with open(os.path.join(d, "Rakefile"), "w") as fh:
            fh.write(RAKEFILE)
        base = {k: v for k, v in os.environ.items() if not k.startswith("MTCPROF_") and k != "LD_PRELOAD"}
        traced_env = dict(base, MTCPROF_LIB=LIB, MTCPROF_DIR=os.path.join(d, "logs"), MTCPROF_RUN="bench",
                          MTCPROF_INGEST="off")
        rows = {}
        for engine in ["rake"] + (["pwrake"] if PWRAKE_SRC else []):
            pw = engine == "pwrake"
            run(d, base, False, pw)                      # warm caches
            plain, traced = [], []
            for _ in range(REPS):
                plain.append(run(d, base, False, pw))
                traced.append(run(d, traced_env, True, pw))
            rows[engine] = (statistics.median(plain), statistics.median(traced))
        logs = len(os.listdir(os.path.join(d, "logs")))
        wrap_us = float(subprocess.run(["ruby", "-I", pwrake_plugin.path(), "-e", WRAP], env=base, check=True,
                                       capture_output=True, text=True).stdout)
    print(f"{N_TASKS} tasks x {REPS} runs (medians); {logs} logs written")
    print(f"{'':16}{'plain s':>9}{'traced s':>9}{'plain ms/task':>15}{'traced ms/task':>16}{'added ms/task':>15}{'ratio':>7}")
    added_ms = 0.0
    for engine, (p, t) in rows.items():
        added = (t - p) / N_TASKS * 1e3
        added_ms = max(added_ms, added)
        print(f"{engine:16}{p:9.3f}{t:9.3f}{p / N_TASKS * 1e3:15.2f}{t / N_TASKS * 1e3:16.2f}{added:15.2f}{t / p:7.2f}")
    print("target: <= 5 ms added per task")
    print(f"rewriting alone (MtcIO::Trace.wrap): {wrap_us:.1f} us per command")
    return 0 if added_ms <= 5 else 1


if __name__ == "__main__":
    sys.exit(main())
