"""Benchmark: mtcpredict's accuracy on synthetic stages traced on the testbed, and its speed.

Accuracy: write-only, 1-to-1 read (local and remote replicas) and N-to-1 read stages at 3 file sizes x 2 host
counts x 2 processes per host, N = 4 rounds of slots, each run twice (two trace runs: their spread is the noise
floor), traced by the real shim on a 4-host testbed; the envelope is measured separately in the same testbed
session with one file per process, as the stages' tasks do (on this testbed a process's first small-file
op costs more than its later ones). Per stage: measured I/O time (both runs), predicted (faithful, refined,
calibrated: each stage's error in the other run only), error %; median and p90 of |error| per variant.
Targets: refined <= 10 % median, <= 20 % p90.
Speed: mtcpredict for 10 stages with the report (64x64 maps) and the table alone, against `python -c pass`.

    python tests/bench/predict_bench.py [--quick] [--keep DIR] [--speed-only] [--keep DIR --predict-only]
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
import synthstage  # noqa: E402
from montage_example.bench import testbed_session  # noqa: E402

MTCBED = [sys.executable, "-m", "mtcio.testbed.cli"]
KINDS = ("write", "read-local", "read-remote", "read-shared")
SIZES = (64 << 10, 1 << 20, 8 << 20)
HOSTS = (2, 4)
PPN = (1, 2)
ROUNDS = 4


def cli(name, *args, check=True):
    r = subprocess.run([sys.executable, "-c", f"import sys; from mtcio.cli import {name}; sys.exit({name}())",
                        *map(str, args)], capture_output=True, text=True)
    if check and r.returncode:
        raise SystemExit(f"{name} {' '.join(map(str, args))}: exit {r.returncode}\n{r.stderr}")
    return r


def bed():
    from conftest import Testbed
    return Testbed(json.loads(subprocess.run(MTCBED + ["status", "--json"], capture_output=True, text=True,
                                             check=True).stdout))


def accuracy(work, quick):
    sizes = SIZES[1:2] if quick else SIZES
    hosts = HOSTS[-1:] if quick else HOSTS
    db = os.path.join(work, "bench.db")
    t0 = time.monotonic()
    cli("mtcenvelope", "measure", "--db", db, "--name", "env", "--host-counts", ",".join(map(str, HOSTS)),
        "--sizes", ",".join(str(s) for s in sorted(set((4 << 10,) + SIZES))), "--procs", ",".join(map(str, PPN)),
        "--ops-per-proc", "1", "--quiet")     # one file per process, as each task here does
    env_s = time.monotonic() - t0
    b = bed()
    share = tempfile.mkdtemp(prefix="mtcpredict-bench.")
    os.chmod(share, 0o755)
    lib = synthstage.prepare_share(share)
    runs = ("r1", "r2")
    t0 = time.monotonic()
    try:
        for run in runs:
            logdir = synthstage.make_logdir(b, os.path.join(share, f"logs-{run}"))
            for kind in KINDS:
                for size in sizes:
                    for C in hosts:
                        for p in PPN:
                            name = f"{kind}-{size >> 10}k-{C}x{p}"
                            synthstage.run_stage(b, lib, logdir, kind=kind, N=ROUNDS * C * p, C=C, ppn=p, size=size,
                                                 run=run, stage=name)
                            print(f"  {run} {name}", file=sys.stderr)
            synthstage.ingest(b, logdir, db, run)
            cli("mtcprof", "model", "--db", db, "--run", run, "-o", os.path.join(work, f"{run}.yaml"))
    finally:
        b.exec(b.hosts[0], ["sh", "-c", f"rm -rf {b.mount(b.hosts[0])}/synth-*"], check=False)
        shutil.rmtree(share, ignore_errors=True)
    stages_s = time.monotonic() - t0
    return db, env_s, stages_s, predict(work, db, runs)


def predict(work, db, runs=("r1", "r2")):
    """Each run predicted from the workflow model of the other run (its sizes, α, I/O concurrency) and validated
    against its own trace, so nothing measured in a run enters its prediction; calibration learns from the other."""
    res = {}
    other = {run: runs[(i + 1) % len(runs)] for i, run in enumerate(runs)}
    for step in ("validate", "calibrate"):   # validate both runs first: each one's calibration learns from the other
        for run in runs:
            r = cli("mtcpredict", os.path.join(work, f"{other[run]}.yaml"), "--envelope", f"{db}:env", "--validate",
                    f"{db}:{run}", "--json", "--bootstrap", "0", *(["--calibrate"] if step == "calibrate" else []))
            res[run] = json.loads(r.stdout)
    return res


def table(res):
    by = {}
    for run, r in res.items():
        for d in r["predictions"]:
            by.setdefault(d["stage"], {}).setdefault(run, {})[d["variant"]] = d
    rows, errs = [], {"faithful": [], "refined": [], "calibrated": []}
    for stage, per in by.items():
        meas = [per[run]["refined"]["measured_s"] for run in per]
        noise = 100 * (max(meas) - min(meas)) / statistics.mean(meas)
        row = {"stage": stage, "measured_s": [round(m, 4) for m in meas], "noise_pct": round(noise, 1)}
        for v in errs:
            e = [per[run][v]["error_pct"] for run in per if v in per[run]]
            if e:
                row[v] = [round(x, 1) for x in e]
                errs[v] += [abs(x) for x in e]
        row["k"] = round(per[next(iter(per))]["refined"]["k"], 2)
        rows.append(row)
    summary = {}
    for v, e in errs.items():
        if e:
            e = sorted(e)
            summary[v] = {"median_abs_err_pct": round(statistics.median(e), 1),
                          "p90_abs_err_pct": round(e[min(len(e) - 1, int(0.9 * len(e)))], 1), "n": len(e)}
    return rows, summary


def speed(work):
    """10 stages and the report, against python -c pass (medians of 5)."""
    import yaml
    doc = yaml.safe_load(open(os.path.join(os.path.dirname(os.path.dirname(HERE)), "montage_example",
                                           "montage.yaml")))
    base = doc["stages"]
    doc["stages"] = [dict(base[i % 3], name=f"stage{i}") for i in range(10)]
    wf = os.path.join(work, "ten.yaml")
    with open(wf, "w") as fh:
        yaml.safe_dump(doc, fh)
    py = [sys.executable, "-c", "import sys; from mtcio.cli import mtcpredict; sys.exit(mtcpredict())"]

    def t(argv):
        v = []
        for _ in range(5):
            t0 = time.monotonic()
            subprocess.run(argv, capture_output=True, check=True)
            v.append(time.monotonic() - t0)
        return statistics.median(v)
    base_s = t([sys.executable, "-c", "pass"])
    table_s = t(py + [wf])
    report_s = t(py + [wf, "--out", os.path.join(work, "rep")])
    return {"python_pass_s": round(base_s, 3), "table_s": round(table_s, 3), "report_s": round(report_s, 3),
            "table_target_s": 0.5, "report_target_s": 2.0}


def main(argv):
    if "--predict-only" in argv:     # predict again from a kept run (--keep DIR of an earlier one)
        work = argv[argv.index("--keep") + 1]
        res = predict(work, os.path.join(work, "bench.db"))
        rows, summary = table(res)
        print(json.dumps({"stages": rows, "summary": summary,
                          "calibration": {run: r.get("calibration") for run, r in res.items()}}, indent=1))
        return 0
    quick = "--quick" in argv
    keep = argv[argv.index("--keep") + 1] if "--keep" in argv else None
    work = keep or tempfile.mkdtemp(prefix="predict-bench.")
    os.makedirs(work, exist_ok=True)
    out = {"bench": "mtcpredict accuracy and speed", "speed": speed(work)}
    if "--speed-only" not in argv:
        if os.geteuid() != 0:
            print("predict_bench: the accuracy part needs root (the testbed)", file=sys.stderr)
            return 2
        with testbed_session(4):
            db, env_s, stages_s, res = accuracy(work, quick)
        rows, summary = table(res)
        out.update(envelope_s=round(env_s, 1), stages_s=round(stages_s, 1), stages=rows, summary=summary,
                   calibration={run: r.get("calibration") for run, r in res.items()},
                   targets={"refined_median_abs_err_pct": 10, "refined_p90_abs_err_pct": 20})
    print(json.dumps(out, indent=1))
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
