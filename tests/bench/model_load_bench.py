"""Benchmark: loading a 10,000-stage workflow model (db/workflow_model.load), target < 2 s each.

Two models of 10,000 stages: "compact" (name, N, C, read and write sizes: 25 values a stage, 1.5 MB) and "full"
(every field set, as `mtcprof model` writes them: ~1.6 KB a stage, 16 MB).  Each load runs in a fresh interpreter
BENCH_RUNS (3) times; the median wall time of load() and the process's peak RSS are printed.  Exit 1 when a
median misses the target.

    python tests/bench/model_load_bench.py [--stages N]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
from mtcio.db import workflow_model as wm  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "3"))
TARGET_S = 2.0
# peak RSS from VmHWM: getrusage's ru_maxrss would include the parent's peak (kept across fork and exec)
PROBE = ("import sys, time; from mtcio.db.workflow_model import load; t0 = time.perf_counter(); "
         "wf = load(sys.argv[1]); dt = time.perf_counter() - t0; assert len(wf.stages) == int(sys.argv[2]); "
         "print(dt, [ln.split()[1] for ln in open('/proc/self/status') if ln.startswith('VmHWM:')][0])")

COMPACT = ("  - name: s{i}\n    tasks: 4\n    hosts: 2\n"
           "    read: {{bytes_per_task: {{min: 1, mean: 2, max: 3}}, files_per_task: 1, alpha: 0.5}}\n"
           "    write: {{bytes_per_task: {{min: 1, mean: 2.5, max: 4}}, files_per_task: 1}}\n")


def full_stage(i: int) -> wm.Stage:
    """A stage with every field set, its values varied a little so that the text is not one line repeated."""
    d = lambda a: wm.Dist(min=a, mean=a * 1.5 + i, max=a * 2 + i)     # noqa: E731
    q = [float(4096 * (k + 1) + i) for k in range(10)]
    f = 0.25 + (i % 50) / 100
    return wm.Stage(
        name=f"stage{i}", tasks=64 + i % 7, hosts=4, concurrency=16, procs_per_host=4, io_concurrency=3.5,
        io_concurrency_served=3.1, tasks_max_per_host=17, files_per_process=2.0, cpu_load=0.4,
        compute_per_call_us=54.6 + i, idle_before_ms=1.5, machine_busy=f, cpu_wait=0.01, io_cpu_wait=0.02,
        io_cpu_wait_measured=0.02,
        read=wm.Read(bytes_per_task=d(1 << 20), files_per_task=2, file_size=d(1 << 19), alpha=f, alpha_files=f,
                     reread_factor=1.0, bytes_per_call=65536.0, op_size_quantiles=q, warm_fraction=0.1,
                     young_fraction=0.0, opens_per_file=1.0),
        shared=wm.Shared(files=1, bytes=1 << 22, bytes_read_per_task=float(1 << 22), alpha=f, files_per_task=1.0,
                         bytes_per_call=65536.0, op_size_quantiles=q, warm_fraction=0.0, young_fraction=0.0,
                         opens_per_file=1.0),
        write=wm.Write(bytes_per_task=d(1 << 21), files_per_task=1, file_size=d(1 << 21), local_fraction=1.0,
                       bytes_per_call=65536.0, rewrite_factor=1.0, op_size_quantiles=q, redirected_fraction=0.0,
                       left_open_fraction=0.0),
        metadata=wm.Metadata(ops_per_task=12, creates_per_task=1, opens_per_task=3, stats_per_task=5,
                             stats_cached_fraction=0.5, failed_per_task=0, seeks_end_per_task=0),
        measured=wm.Measured(span_s=12.5 + i, io_s_mean=0.25, io_s_max=0.5, io_s_total=16.0, read_s_total=8.0,
                             write_s_total=6.0, meta_s_total=2.0),
        envelope=wm.StageEnvelope(read_file_size=1 << 19, write_file_size=1 << 21, shared_file_size=1 << 22))


def write_models(d: str, n: int) -> dict:
    compact = os.path.join(d, "compact.yaml")
    with open(compact, "w") as f:
        f.write("mtcio_workflow: 1\nstages:\n" + "".join(COMPACT.format(i=i) for i in range(n)))
    full = os.path.join(d, "full.yaml")
    wm.save(wm.Workflow(stages=[full_stage(i) for i in range(n)], run="bench",
                        source={"db": "bench.db", "created": "2026-01-01T00:00:00+00:00"}), full)
    return {"compact": compact, "full": full}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stages", type=int, default=10_000)
    a = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as d:
        for name, path in write_models(d, a.stages).items():
            times, rss = [], []
            for _ in range(RUNS):
                r = subprocess.run([sys.executable, "-c", PROBE, path, str(a.stages)], capture_output=True,
                                   text=True, check=True)
                t, kb = r.stdout.split()
                times.append(float(t))
                rss.append(int(kb))
            med = statistics.median(times)
            ok &= med < TARGET_S
            print(f"{name:8s} {a.stages:,} stages, {os.path.getsize(path) / 1e6:5.1f} MB: load {med:.2f} s median "
                  f"of {RUNS} ({min(times):.2f}-{max(times):.2f}), peak RSS {max(rss) / 1024:.0f} MB "
                  f"[target < {TARGET_S:g} s: {'ok' if med < TARGET_S else 'MISSED'}]")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
