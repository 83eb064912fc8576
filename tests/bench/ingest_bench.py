"""Ingest speed (benchmark, not a test): logs written by the REAL shim on a generator program, then ingested.

  A: BENCH_TASKS (100,000) tasks, one process image each (tests/bench/taskgen.c fork+execs itself per task with
     MTCPROF_TASK set), 3 files per task; ingest time, tasks/s, peak RSS of the ingesting process.
  B: op-trace variant: BENCH_OP_TASKS (1,000) tasks x BENCH_OPS_PER_TASK (1,000) extra preads with
     MTCPROF_TRACE=ops (>= 1M ops); ops/s.
Targets (issue 4): >= 1,000,000 ops/s; the 100k-task run in < 30 s; peak memory < 1 GiB.
Logs are generated once into BENCH_DIR (default /tmp/mtcio-ingest-bench) and reused by later runs.
Each ingest runs in a fresh child process so ru_maxrss is the ingest's own peak.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
from mtcio.preload.testing import LIB, ensure_built  # noqa: E402

N_TASKS = int(os.environ.get("BENCH_TASKS", "100000"))
N_OP_TASKS = int(os.environ.get("BENCH_OP_TASKS", "1000"))
OPS_PER_TASK = int(os.environ.get("BENCH_OPS_PER_TASK", "1000"))
BASE = os.environ.get("BENCH_DIR", "/tmp/mtcio-ingest-bench")

CHILD = r"""
import json, resource, sys, time
from mtcio.db.ingest import ingest
t0 = time.perf_counter()
res = ingest(sys.argv[1], sys.argv[2], gfwhere_cmd=None, progress=False, warn=lambda m: print(m, file=sys.stderr))
dt = time.perf_counter() - t0
print(json.dumps({"seconds": dt, "runs": res.runs, "bad": res.bad_logs,
                  "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def build_gen(out: str) -> str:
    exe = os.path.join(out, "taskgen")
    src = os.path.join(HERE, "taskgen.c")
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
        subprocess.run(["gcc", "-O2", "-Wall", "-o", exe, src], check=True)
    return exe


def generate(name: str, n: int, ops: int, trace: str) -> str:
    d = os.path.join(BASE, name)
    logs = os.path.join(d, "logs")
    stamp = os.path.join(d, "done.json")
    if os.path.exists(stamp) and json.load(open(stamp)) == {"n": n, "ops": ops, "trace": trace}:
        return logs
    shutil.rmtree(d, ignore_errors=True)
    for sub in ("logs", "data/in", "data/out"):
        os.makedirs(os.path.join(d, sub))
    for i in range(1000):
        with open(os.path.join(d, "data/in", str(i)), "wb") as f:
            f.write(os.urandom(4096 + i))
    with open(os.path.join(d, "data/shared"), "wb") as f:
        f.write(os.urandom(2880))
    gen = build_gen(BASE)
    t0 = time.perf_counter()
    print(f"generating {n} tasks ({name}) with the shim ...", file=sys.stderr, flush=True)
    subprocess.run([gen, "run", str(n), str(os.cpu_count() or 2), os.path.join(d, "data"), str(ops), LIB, logs,
                    trace], check=True)
    print(f"  generated in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    json.dump({"n": n, "ops": ops, "trace": trace}, open(stamp, "w"))
    return logs


def ingest(logs: str, db: str) -> dict:
    for suf in ("", "-wal", "-shm"):
        if os.path.exists(db + suf):
            os.unlink(db + suf)
    r = subprocess.run([sys.executable, "-c", CHILD, db, logs], capture_output=True, text=True,
                       cwd=os.path.join(HERE, "..", ".."))
    if r.returncode:
        sys.exit(f"ingest failed: {r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> int:
    ensure_built()
    os.makedirs(BASE, exist_ok=True)
    ok = True
    logs = generate("tasks", N_TASKS, 0, "off")
    n_logs = len(os.listdir(logs))
    res = ingest(logs, os.path.join(BASE, "tasks.db"))
    run = res["runs"]["bench"]
    rss = res["maxrss_kib"] / 1024
    print(f"A: {run['tasks']} tasks ({n_logs} logs, {run['file_access']} file records) ingested in "
          f"{res['seconds']:.2f} s = {run['tasks'] / res['seconds']:,.0f} tasks/s; peak RSS {rss:,.0f} MiB "
          f"(targets: < 30 s, < 1024 MiB)")
    ok &= res["seconds"] < 30 and rss < 1024 and run["tasks"] == N_TASKS
    logs = generate("ops", N_OP_TASKS, OPS_PER_TASK, "ops")
    res = ingest(logs, os.path.join(BASE, "ops.db"))
    run = res["runs"]["bench"]
    rss = res["maxrss_kib"] / 1024
    print(f"B: {run['ops']:,} ops in {run['tasks']} tasks ingested in {res['seconds']:.2f} s = "
          f"{run['ops'] / res['seconds']:,.0f} ops/s; peak RSS {rss:,.0f} MiB (target: >= 1,000,000 ops/s)")
    ok &= run["ops"] / res["seconds"] >= 1e6 and rss < 1024
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
