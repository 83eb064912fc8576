"""Benchmark: trace small, predict large. Montage's I/O at sizes and host counts never traced, predicted before
they run, against two runs of each.

On a 4-host testbed, in one session: the envelopes (the demo's sweeps, on 1-4 hosts); Montage traced at 16 and 36
tiles on 2 hosts (two runs each) and one model that scales fitted over the four (`mtcprof model --size`); then,
before any of them runs, each target predicted from it (`mtcpredict --at`) twice: with the target's `rake -P`
graph (--tasks-from) and from the fits alone; then each target run twice. Per stage: predicted, measured (both
runs: the I/O time of the busiest slot, as --validate measures it), the error against their mean, the runs'
spread; median and p90 of |error| over the stages, and the whole workflow's summed I/O time error. Beside it the
same-configuration baseline: the model of a target's first run predicting its second.

    python tests/bench/scale_predict.py [--small 16,36] [--small-hosts 2] [--targets 64x4,100x3,36x4]
                                        [--keep DIR] [--score DIR] [--results FILE [--pass LABEL]]
(--score DIR: the predictions and runs a --keep DIR holds scored again, nothing run. --results FILE: the pass's
figures also written into FILE's "scale" section, newest first, e.g. montage_example/results.json; then
`python -m montage_example.results` renders RESULTS.md from it.)
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from montage_example import bench, demo, prepare, results  # noqa: E402

BIN = os.path.dirname(sys.executable)
SLOTS = 2
HOST_COUNTS = "1,2,3,4"     # the demo's quick sweeps (montage_example/demo.py), on every host count of the targets


def sh(*argv, **kw):
    r = subprocess.run(list(argv), capture_output=True, text=True, **kw)
    if r.returncode:
        raise SystemExit(f"{' '.join(argv[:3])}: exit {r.returncode}: {r.stderr.strip()[-600:]}")
    return r


def p90(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.9 * (len(xs) - 1))))] if xs else float("nan")


def envelope_args(db):
    return [x for name, _ in demo.sweeps() for x in ("--envelope", f"{db}:{name}")]


def sweep(db, host_counts=HOST_COUNTS):
    for name, opts in demo.sweeps(host_counts):
        t = time.monotonic()
        sh(os.path.join(BIN, "mtcenvelope"), "measure", "--db", db, "--name", name, *opts, "--quiet")
        print(f"envelope {name}: {time.monotonic() - t:.0f} s", flush=True)


def source(work, tiles):
    src = os.path.join(work, f"src{tiles}")
    if not os.path.isdir(src):
        prepare.prepare(src, "demo", tiles=tiles)
    return src


def graph(work, tiles):
    """`rake -P` of the target's folder, in a copy of it: loading the Rakefile makes its output folders."""
    path = os.path.join(work, f"graph{tiles}.txt")
    dry = os.path.join(work, f"dry{tiles}")
    shutil.rmtree(dry, ignore_errors=True)
    shutil.copytree(source(work, tiles), dry)
    with open(path, "w") as f:
        f.write(sh("rake", "-P", cwd=dry).stdout)
    shutil.rmtree(dry)
    return path


def predict(work, db, model, tiles, hosts, with_graph):
    """Predict a target before it runs: mtcpredict --at, the JSON saved."""
    name = f"m{tiles}x{hosts}-{'graph' if with_graph else 'fits'}"
    out = os.path.join(work, name)
    argv = [os.path.join(BIN, "mtcpredict"), model, "--at", f"size={tiles}", f"hosts={hosts}", f"procs={SLOTS}",
            *envelope_args(db), "--variant", "refined", "--bootstrap", "0", "--out", out]
    if with_graph:
        argv += ["--tasks-from", graph(work, tiles)]
    sh(*argv)
    return name


def measured(db, run, model_path):
    """Per stage, the I/O time of the busiest slot (as mtcpredict --validate measures it)."""
    from mtcio.db.workflow_model import load
    from mtcio.predictor import measured as ms
    wf = load(model_path)
    m = ms.measure(db, run, "auto", {s.name: (s.procs_per_host or 1) for s in wf.stages})
    m.pop("_run")
    return {st: v["measured_s"] for st, v in m.items()}


def git_commit() -> str:
    cp = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return cp.stdout.strip() if cp.returncode == 0 else "?"


def pass_entry(state, label):
    """The pass as the results file's "scale" section holds it (montage_example/results.py renders it)."""
    day, start = state["started"].split(" ")
    when = f"{day} {start[:5]}-{state['ended'][11:16]}" if state.get("ended") else state["started"]
    load = state.get("load")
    targets = []
    for tgt in state["targets"]:
        sm = tgt["summary"]
        mp = {k: [round(x, 1) for x in sm["median_p90"][k]] for k in ("graph", "fits", "baseline")}
        targets.append({"target": f"{tgt['tiles']} tiles x {tgt['hosts']} hosts",
                        **{k: mp[k] + [round(sm["whole_pct"][k], 2)] for k in mp},
                        "spread": [round(x, 1) for x in sm["spread_median_p90"]]})
    return {"pass": label, "commit": state.get("commit", "?"), "when": when, "seconds": state.get("seconds"),
            "conditions": f"load {load[0]:.1f}-{load[1]:.1f}" if load else "load not recorded", "targets": targets}


def write_results(path, state, label):
    def add(section):
        passes = [p for p in section.setdefault("passes", []) if p["pass"] != label]
        section["passes"] = [pass_entry(state, label)] + passes
        section["command"] = results.command_line("tests/bench/scale_predict.py", sys.argv[1:])
    results.update(path, "scale", add)
    print(f"pass {label} written into {path} (python -m montage_example.results renders the page)")


def score(work, state):
    db = state["db"]
    lines = []
    for tgt in state["targets"]:
        tiles, hosts, runs = tgt["tiles"], tgt["hosts"], tgt["runs"]
        model_at = os.path.join(work, tgt["graph"], "model-at.yaml")
        meas = [measured(db, r, model_at) for r in runs]
        base = json.load(open(os.path.join(work, tgt["baseline"], "prediction.json")))
        base_pred = {p["stage"]: p["total_s"] for p in base["predictions"] if p["variant"] == "refined"}
        lines.append(f"\n== {tiles} tiles x {hosts} hosts (runs {', '.join(runs)}; traced: "
                     f"{', '.join(state['small'])})")
        cols = {}
        for kind in ("graph", "fits"):
            pred = json.load(open(os.path.join(work, tgt[kind], "prediction.json")))
            cols[kind] = {p["stage"]: p["total_s"] for p in pred["predictions"] if p["variant"] == "refined"}
        lines.append(f"{'stage':14s} {'graph s':>8s} {'fits s':>8s} {'run 1 s':>8s} {'run 2 s':>8s} "
                     f"{'err graph':>9s} {'err fits':>9s} {'spread':>7s} {'baseline':>9s}")
        errs = {"graph": [], "fits": [], "baseline": []}
        spreads = []
        tot = {"graph": 0.0, "fits": 0.0, "mean": 0.0, "baseline": 0.0, "twin": 0.0}
        for st in cols["graph"]:
            m = [x.get(st) for x in meas]
            if None in m:
                continue
            mean = sum(m) / len(m)
            spread = (max(m) - min(m)) / mean if mean else 0.0
            e = {k: 100 * (cols[k][st] - mean) / mean if mean else 0.0 for k in ("graph", "fits")}
            eb = 100 * (base_pred[st] - m[1]) / m[1] if m[1] else 0.0
            for k in ("graph", "fits"):
                errs[k].append(abs(e[k]))
                tot[k] += cols[k][st]
            errs["baseline"].append(abs(eb))
            tot["mean"] += mean
            tot["baseline"] += base_pred[st]
            tot["twin"] += m[1]
            spreads.append(100 * spread)
            lines.append(f"{st:14s} {cols['graph'][st]:8.3f} {cols['fits'][st]:8.3f} {m[0]:8.3f} {m[1]:8.3f} "
                         f"{e['graph']:+8.0f}% {e['fits']:+8.0f}% {100 * spread:6.0f}% {eb:+8.0f}%")
        summary = {k: (statistics.median(v), p90(v)) for k, v in errs.items()}
        whole = {k: 100 * (tot[k] - tot["mean"]) / tot["mean"] for k in ("graph", "fits")}
        whole["baseline"] = 100 * (tot["baseline"] - tot["twin"]) / tot["twin"]
        lines.append(f"median |error| (p90): graph {summary['graph'][0]:.0f} % ({summary['graph'][1]:.0f} %), fits "
                     f"{summary['fits'][0]:.0f} % ({summary['fits'][1]:.0f} %), same-configuration baseline "
                     f"{summary['baseline'][0]:.0f} % ({summary['baseline'][1]:.0f} %); the runs' spread "
                     f"{statistics.median(spreads):.0f} % ({p90(spreads):.0f} %)")
        lines.append(f"whole workflow I/O time: measured {tot['mean']:.2f} s (mean of the two runs), graph "
                     f"{whole['graph']:+.1f} %, fits {whole['fits']:+.1f} %, baseline {whole['baseline']:+.1f} %")
        tgt["summary"] = {"median_p90": summary, "whole_pct": whole, "spread_median_p90":
                          (statistics.median(spreads), p90(spreads))}
    save_score(work, state, lines)


def next_label(path) -> str:
    """One more than the highest numbered pass of the file's "scale" section (1 for none)."""
    passes = (results.load(path).get("scale", {}).get("passes", []) if os.path.exists(path) else [])
    return str(1 + max((int(p["pass"]) for p in passes if str(p["pass"]).isdigit()), default=0))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--small", default="16,36", help="tile counts traced (default 16,36)")
    p.add_argument("--small-hosts", type=int, default=2)
    p.add_argument("--repeat", type=int, default=2, help="runs of each traced size and of each target")
    p.add_argument("--targets", default="64x4,100x3,36x4", help="TILESxHOSTS,.. predicted before they run")
    p.add_argument("--keep", help="keep the db, predictions and runs here")
    p.add_argument("--score", metavar="DIR", help="score a kept folder again, nothing run")
    p.add_argument("--results", metavar="FILE", help="write the pass's figures into this results file too")
    p.add_argument("--pass", dest="label", metavar="LABEL", help="the pass's name in --results (default: one more "
                   "than the file's highest numbered pass)")
    a = p.parse_args()
    if a.label and not a.results:
        p.error("--pass names a pass of --results FILE: give --results")
    label = a.label or (next_label(a.results) if a.results else None)
    if a.score:
        state = json.load(open(os.path.join(a.score, "state.json")))
        score(a.score, state)
        if a.results:
            write_results(a.results, state, label)
        return 0
    work = a.keep or tempfile.mkdtemp(prefix="scale-predict.")
    os.makedirs(work, exist_ok=True)
    db = os.path.join(work, "mtc.db")
    small = [int(x) for x in a.small.split(",")]
    targets = [tuple(int(v) for v in t.split("x")) for t in a.targets.split(",")]
    state = {"db": db, "small": [], "targets": [], "started": time.strftime("%Y-%m-%d %H:%M:%S"),
             "commit": git_commit(), "load": [os.getloadavg()[0]]}
    t0 = time.monotonic()
    with bench.testbed_session(4, ["--tcp-nodelay"]) as bed:
        sweep(db)
        for k in small:
            for r in range(1, a.repeat + 1):
                run = f"m{k}x{a.small_hosts}r{r}"
                wall = bench.run_once(bed, source(work, k), bed.hosts[:a.small_hosts], run=run, db=db)
                state["small"].append(run)
                print(f"traced {run}: wall {wall:.1f} s", flush=True)
        model = os.path.join(work, "scaled.yaml")
        sizes = ",".join(f"{r}={r[1:].split('x')[0]}" for r in state["small"])
        sh(os.path.join(BIN, "mtcprof"), "model", "--db", db, "--run", ",".join(state["small"]), "--size", sizes,
           "-o", model)
        for tiles, hosts in targets:    # every prediction made and saved before any target runs
            state["targets"].append({"tiles": tiles, "hosts": hosts,
                                     "graph": predict(work, db, model, tiles, hosts, True),
                                     "fits": predict(work, db, model, tiles, hosts, False), "runs": []})
        print(f"predicted {len(targets)} targets before running them ({time.monotonic() - t0:.0f} s)", flush=True)
        for tgt in state["targets"]:
            for r in range(1, a.repeat + 1):
                run = f"m{tgt['tiles']}x{tgt['hosts']}r{r}"
                wall = bench.run_once(bed, source(work, tgt["tiles"]), bed.hosts[:tgt["hosts"]], run=run, db=db)
                tgt["runs"].append(run)
                print(f"ran {run}: wall {wall:.1f} s", flush=True)
    for tgt in state["targets"]:       # the baseline: the first run's own model predicting its twin
        own = os.path.join(work, f"{tgt['runs'][0]}.yaml")
        sh(os.path.join(BIN, "mtcprof"), "model", "--db", db, "--run", tgt["runs"][0], "-o", own)
        tgt["baseline"] = f"{tgt['runs'][0]}-baseline"
        sh(os.path.join(BIN, "mtcpredict"), own, *envelope_args(db), "--variant", "refined", "--bootstrap", "0",
           "--out", os.path.join(work, tgt["baseline"]))
    state.update(ended=time.strftime("%Y-%m-%d %H:%M:%S"), seconds=round(time.monotonic() - t0),
                 load=state["load"] + [os.getloadavg()[0]])
    score(work, state)
    if a.results:
        write_results(a.results, state, label)
    return finish_bench(work, a.keep, t0)


def save_score(work, state, lines) -> None:
    """The score printed, and kept in the working folder beside the state it was computed from."""
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(work, "score.txt"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(work, "state.json"), "w") as f:
        json.dump(state, f, indent=1)


def finish_bench(work, keep, t0) -> int:
    """The bench's last line: its time, and the working folder kept or removed."""
    print(f"\n{time.monotonic() - t0:.0f} s in all; kept in {work}" if keep else f"\n{time.monotonic() - t0:.0f} s in all")
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
