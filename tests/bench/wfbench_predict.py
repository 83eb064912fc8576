"""Benchmark: WfCommons workflows (WfBench runs) on Gfarm, each size predicted from a traced run of the other.

On a 4-host testbed, in one session: the envelopes (the workload's: its own file sizes in one call per file,
WORKLOAD below; or montage_example/demo.py's six quick sweeps, --sweeps demo, pass 1's; on 1, 2 and 4 hosts);
then per recipe (a wfcommons recipe's instance made runnable by WfBench, file sizes scaled by one factor per
recipe so the largest size's files total --footprint-mb) and per host count: the small size run twice, the
model of those two runs (`mtcprof model --size R1=s,R2=s`, one size) predicting the large size
(`mtcpredict --at size=L hosts=H procs=2 --tasks-from graph`, the large folder's `rake -P`) before the large size
runs; the large size run twice; their model predicting the small size (made after the small runs, which it does
not read).  Per target (recipe x size x hosts) and stage: predicted, both runs' measured I/O time (busiest slot,
as --validate measures it), the error against their mean, the runs' spread (max - min) / mean; median and p90
of |error| over the stages, the whole workflow's summed I/O time error.  Beside it the same-configuration
baseline: the target's first run's own model predicting its second.  (a), the prediction from the instance alone
(`mtcpredict instance.json --hosts H --slots 2`, the prepared folder's instance.json: the instance as run, scaled
sizes) is made for every target before any run of its recipe, and scored beside (b), with no threshold.
(--score DIR --instance-alone: a kept folder's (a) predictions made now, from the instances and the session's
envelopes only, then scored.)

    python tests/bench/wfbench_predict.py [--recipes blast,epigenomics,1000genome] [--sizes 50,200]
                                          [--hosts 2,4] [--repeat 2] [--footprint-mb 1000] [--keep DIR]
                                          [--sweeps workload|demo] [--page FILE] [--score DIR]
(--sizes applies to every recipe; a recipe whose smallest instance is larger (1000genome: 54 tasks) starts at
its own minimum.  --score DIR: what a --keep DIR holds scored again, nothing run.)
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from montage_example import bench, demo  # noqa: E402
from wfbench_example import instance, prepare, run as wrun  # noqa: E402
from scale_predict import finish_bench, measured, p90, save_score, sh  # noqa: E402  (the scale benchmark's helpers)
from mtcio.envelope.sizes_from import sizes_from  # noqa: E402

BIN = os.path.dirname(sys.executable)
SLOTS = 2
MIN_TASKS = {"1000genome": 60, "genome": 60}    # the recipes' smallest instances (54 tasks: 60 asked)
# The workload's sweeps (pass 2, docs/experiments/wfbench-predict-rule.md): the pass's own file sizes (every
# instance it runs, 1 byte to the largest file, 8 sizes in log scale) and one call per file (--block whole), as
# wfbench reads and writes each file; the kinds of the demo's quick sweeps the refined model uses with such
# calls: cold reads (main), warm reads, 16 files per process (first_op; the sizes up to 1 MiB), beside one
# computing process per host (cpu_load). One repeat per point, as the demo's.
WORKLOAD = ("wfb", "wfb-warm", "wfb-many", "wfb-hogs1")
MANY_MAX = 1 << 20


def workload_sweeps(instances, host_counts):
    """(envelope name, `mtcenvelope measure` options) of the workload's sweeps, sized by these instance files."""
    quick = ["--procs", "1,2", "--host-counts", host_counts, "--repeat", "1", "--precision", "0", "--time-budget",
             "0", "--ops-per-proc", "1"]
    sizes = sizes_from(instances)
    own = ["--sizes-from", ",".join(instances), "--block", "whole", *quick]
    small = ",".join(str(x) for x in sizes if x <= MANY_MAX)
    many = ["--sizes", small, "--block", str(max(sizes)), *quick[:-2], "--ops-per-proc", "16"]
    return [(WORKLOAD[0], own), (WORKLOAD[1], [*own, "--drop-caches", "off", "--metrics", demo.READS]),
            (WORKLOAD[2], [*many, "--metrics", "TL,BL," + demo.READS]),
            (WORKLOAD[3], [*own, "--metrics", "TL,BL,T1L,B1L", "--hogs-per-host", "1"])]


def sweeps_of(kind, instances, host_counts):
    return workload_sweeps(instances, host_counts) if kind == "workload" else demo.sweeps(host_counts)


def sweep(db, sweeps):
    for name, opts in sweeps:
        t = time.monotonic()
        sh(os.path.join(BIN, "mtcenvelope"), "measure", "--db", db, "--name", name, *opts, "--quiet")
        print(f"envelope {name}: {time.monotonic() - t:.0f} s", flush=True)


ENVELOPES = [name for name, _ in demo.sweeps()]     # the envelopes predictions use (main sets it per pass)


def envelope_args(db):
    return [x for name in ENVELOPES for x in ("--envelope", f"{db}:{name}")]


def folders(work, recipe, sizes, footprint_mb, seed):
    """{size: prepared folder} of one recipe, every size scaled by the factor that fits the largest."""
    insts = {n: instance.generate(recipe, n, seed) for n in sizes}
    factor = prepare.factor_for(insts[max(sizes)], footprint_mb)
    out = {}
    for n, inst in insts.items():
        src = os.path.join(work, f"{recipe}{n}")
        if not os.path.isdir(src):
            prepare.prepare(src, inst.scaled(factor))
        out[n] = src
    return out, factor


def graph(work, src):
    """`rake -P` of a prepared folder (nothing runs)."""
    path = src + ".graph.txt"
    with open(path, "w") as f:
        f.write(sh("rake", "-P", cwd=src).stdout)
    return path


def predict(work, db, model, size, hosts, graph_path, name):
    out = os.path.join(work, name)
    sh(os.path.join(BIN, "mtcpredict"), model, "--at", f"size={size}", f"hosts={hosts}", f"procs={SLOTS}",
       *envelope_args(db), "--variant", "refined", "--bootstrap", "0", "--tasks-from", graph_path, "--out", out)
    return name


def predict_instance(work, db, src, hosts, name):
    """(a): the instance alone, modelled by mtcpredict itself (its stated defaults), on these hosts x SLOTS."""
    sh(os.path.join(BIN, "mtcpredict"), os.path.join(src, "instance.json"), "--hosts", str(hosts), "--slots",
       str(SLOTS), *envelope_args(db), "--variant", "refined", "--bootstrap", "0", "--out", os.path.join(work, name))
    return name


def model_of(work, db, runs, size, name):
    path = os.path.join(work, name + ".yaml")
    sh(os.path.join(BIN, "mtcprof"), "model", "--db", db, "--run", ",".join(runs), "--size",
       ",".join(f"{r}={size}" for r in runs), "-o", path)
    return path


def preds(work, name):
    p = json.load(open(os.path.join(work, name, "prediction.json")))
    return {x["stage"]: x["total_s"] for x in p["predictions"] if x["variant"] == "refined"}


def score(work, state):
    db = state["db"]
    lines, rows = [], []
    for tgt in state["targets"]:
        model_at = os.path.join(work, tgt["from_other"], "model-at.yaml")
        meas = [measured(db, r, model_at) for r in tgt["runs"]]
        other, base = preds(work, tgt["from_other"]), preds(work, tgt["baseline"])
        alone = preds(work, tgt["instance_alone"]) if tgt.get("instance_alone") else {}
        lines.append(f"\n== {tgt['recipe']} {tgt['size']} tasks x {tgt['hosts']} hosts (runs "
                     f"{', '.join(tgt['runs'])}; predicted from {', '.join(tgt['traced'])})")
        lines.append(f"{'stage':14s} {'tasks':>5s} {'pred s':>8s} {'run 1 s':>8s} {'run 2 s':>8s} {'error':>7s} "
                     f"{'spread':>7s} {'baseline':>9s} {'(a) s':>7s} {'(a) err':>8s}")
        errs, berrs, spreads, aerrs = [], [], [], []
        tot = {"pred": 0.0, "mean": 0.0, "base": 0.0, "twin": 0.0}
        counts = tgt.get("stage_counts", {})
        for st in sorted(other):
            m = [x.get(st) for x in meas]
            if None in m or st not in base:
                continue
            mean = sum(m) / len(m)
            spread = 100 * (max(m) - min(m)) / mean if mean else 0.0
            e = 100 * (other[st] - mean) / mean if mean else 0.0
            eb = 100 * (base[st] - m[1]) / m[1] if m[1] else 0.0
            ea = 100 * (alone[st] - mean) / mean if st in alone and mean else None
            if ea is not None:
                aerrs.append(abs(ea))
                tot["alone"] = tot.get("alone", 0.0) + alone[st]
                tot["mean_a"] = tot.get("mean_a", 0.0) + mean        # over the stages (a) predicts
            errs.append(abs(e))
            berrs.append(abs(eb))
            spreads.append(spread)
            tot["pred"] += other[st]
            tot["mean"] += mean
            tot["base"] += base[st]
            tot["twin"] += m[1]
            rows.append({"target": f"{tgt['recipe']}-{tgt['size']}x{tgt['hosts']}", "stage": st,
                         "tasks": counts.get(st), "pred": other[st], "runs": m, "err": e, "spread": spread,
                         "baseline": eb, "alone": alone.get(st), "alone_err": ea})
            lines.append(f"{st:14s} {counts.get(st, 0):5d} {other[st]:8.3f} {m[0]:8.3f} {m[1]:8.3f} {e:+6.0f}% "
                         f"{spread:6.0f}% {eb:+8.0f}%" + (f" {alone[st]:7.3f} {ea:+7.0f}%" if ea is not None else ""))
        if not errs:
            lines.append("no stage both predicted and measured")
            continue
        whole = 100 * (tot["pred"] - tot["mean"]) / tot["mean"] if tot["mean"] else 0.0
        wbase = 100 * (tot["base"] - tot["twin"]) / tot["twin"] if tot["twin"] else 0.0
        tgt["summary"] = {"median": statistics.median(errs), "p90": p90(errs), "whole_pct": whole,
                          "baseline_median": statistics.median(berrs), "baseline_p90": p90(berrs),
                          "baseline_whole_pct": wbase, "spread_median": statistics.median(spreads),
                          "spread_p90": p90(spreads), "measured_s": tot["mean"],
                          "pass": statistics.median(errs) <= 20 and p90(errs) <= 50}
        if aerrs:
            tgt["summary"].update(alone_median=statistics.median(aerrs), alone_p90=p90(aerrs),
                                  alone_whole_pct=100 * (tot["alone"] - tot["mean_a"]) / tot["mean_a"])
        s = tgt["summary"]
        lines.append(f"median |error| (p90): {s['median']:.0f} % ({s['p90']:.0f} %) "
                     f"[{'pass' if s['pass'] else 'miss'}: <= 20 % (50 %)]; same-configuration baseline "
                     f"{s['baseline_median']:.0f} % ({s['baseline_p90']:.0f} %); the runs' spread "
                     f"{s['spread_median']:.0f} % ({s['spread_p90']:.0f} %)")
        lines.append(f"whole workflow I/O time: measured {tot['mean']:.2f} s (mean of the two runs), predicted "
                     f"{whole:+.1f} %, baseline {wbase:+.1f} %")
        if aerrs:
            lines.append(f"(a) from the instance alone: median |error| {s['alone_median']:.0f} % (p90 "
                         f"{s['alone_p90']:.0f} %), whole workflow {s['alone_whole_pct']:+.1f} %")
    done = [t for t in state["targets"] if "summary" in t]
    lines.append(f"\n(b) targets passing (median <= 20 %, p90 <= 50 %): "
                 f"{sum(t['summary']['pass'] for t in done)} of {len(done)}")
    if state.get("instance_alone"):
        lines.append("(a) from the instance alone: " + state["instance_alone"])
    save_score(work, state, lines)
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--recipes", default="blast,epigenomics,1000genome")
    p.add_argument("--sizes", default="50,200", help="two task counts asked of every recipe (default 50,200)")
    p.add_argument("--hosts", default="2,4", help="host counts (default 2,4)")
    p.add_argument("--repeat", type=int, default=2, help="runs of each configuration (default 2)")
    p.add_argument("--footprint-mb", type=float, default=1000, help="the largest size's files, MB (default 1000; "
                   "pass 1: 100)")
    p.add_argument("--sweeps", choices=["workload", "demo"], default="workload",
                   help="the envelopes: workload = the pass's own file sizes in one call per file (default); "
                   "demo = montage_example/demo.py's quick sweeps (pass 1)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--keep", help="keep the db, predictions and runs here")
    p.add_argument("--page", help="write the result page here (HTML)")
    p.add_argument("--score", metavar="DIR", help="score a kept folder again, nothing run")
    p.add_argument("--instance-alone", action="store_true",
                   help="with --score: make the (a) predictions of a kept folder now (no testbed needed)")
    a = p.parse_args()
    global ENVELOPES
    if a.score:
        state = json.load(open(os.path.join(a.score, "state.json")))
        ENVELOPES = state.get("envelopes", ENVELOPES)
        if a.instance_alone:
            for tgt in state["targets"]:
                src = os.path.join(a.score, f"{tgt['recipe']}{tgt['size']}")
                tgt["instance_alone"] = predict_instance(a.score, state["db"], src, tgt["hosts"],
                                                         f"{tgt['recipe']}{tgt['size']}x{tgt['hosts']}-instance")
            state["instance_alone"] = ("made after the runs, from the instances and the session's envelopes "
                                       "only (--instance-alone)")
        rows = score(a.score, state)
        if a.page:
            from wfbench_example import page
            page.write(a.page, state, rows)
        return 0
    if a.repeat < 2:
        p.error("--repeat must be >= 2 (the baseline is a first run predicting its second)")
    work = a.keep or tempfile.mkdtemp(prefix="wfbench-predict.")
    os.makedirs(work, exist_ok=True)
    db = os.path.join(work, "mtc.db")
    hosts_list = [int(x) for x in a.hosts.split(",")]
    state = {"db": db, "targets": [], "started": time.strftime("%Y-%m-%d %H:%M:%S"), "argv": sys.argv[1:],
             "factors": {}, "load": [os.getloadavg()[0]]}
    t0 = time.monotonic()
    plan = {}       # every recipe's folders first: the workload's sweeps are sized by all of them
    for recipe in a.recipes.split(","):
        lo = MIN_TASKS.get(recipe, 0)
        sizes = sorted({max(lo, int(x)) for x in a.sizes.split(",")})
        if len(sizes) != 2:
            raise SystemExit(f"--sizes must give two sizes, got {sizes} for {recipe}")
        src, state["factors"][recipe] = folders(work, recipe, sizes, a.footprint_mb, a.seed)
        plan[recipe] = (sizes, src)
    insts = [os.path.join(d, "instance.json") for _, src in plan.values() for d in src.values()]
    sweeps = sweeps_of(a.sweeps, insts, ",".join(str(h) for h in sorted({1, *hosts_list})))
    ENVELOPES = state["envelopes"] = [name for name, _ in sweeps]
    state["sweeps"] = sweeps
    with bench.testbed_session(4, ["--tcp-nodelay"]) as bed:
        sweep(db, sweeps)
        for recipe, (sizes, src) in plan.items():
            graphs = {n: graph(work, src[n]) for n in sizes}
            counts = {n: instance.load(os.path.join(src[n], "instance.json")).stage_counts() for n in sizes}
            alone = {(n, h): predict_instance(work, db, src[n], h, f"{recipe}{n}x{h}-instance")
                     for n in sizes for h in hosts_list}       # (a), before any run of the recipe
            for h in hosts_list:
                runs = {}
                small, large = sizes
                for n in (small, large):
                    runs[n] = []
                    for r in range(1, a.repeat + 1):
                        run = f"{recipe}{n}x{h}r{r}"
                        wall = wrun.run_once(bed, src[n], bed.hosts[:h], run=run, db=db, slots=SLOTS)
                        runs[n].append(run)
                        state.setdefault("run_load", {})[run] = round(os.getloadavg()[0], 2)
                        print(f"ran {run}: wall {wall:.1f} s, load {state['run_load'][run]:.1f}", flush=True)
                    if n == small:      # the large size predicted from the small before it runs
                        mod = model_of(work, db, runs[small], small, f"{recipe}{small}x{h}")
                        ahead = predict(work, db, mod, large, h, graphs[large], f"{recipe}{large}x{h}-from{small}")
                        print(f"predicted {recipe} {large} x {h} from {small} ({time.monotonic() - t0:.0f} s)",
                              flush=True)
                mod = model_of(work, db, runs[large], large, f"{recipe}{large}x{h}")
                back = predict(work, db, mod, small, h, graphs[small], f"{recipe}{small}x{h}-from{large}")
                for n, other, name in ((large, small, ahead), (small, large, back)):
                    own = model_of(work, db, runs[n][:1], n, runs[n][0] + "-own")
                    base = runs[n][0] + "-baseline"
                    sh(os.path.join(BIN, "mtcpredict"), own, *envelope_args(db), "--variant", "refined",
                       "--bootstrap", "0", "--out", os.path.join(work, base))
                    state["targets"].append({"recipe": recipe, "size": n, "hosts": h, "runs": runs[n][:2],
                                             "traced": runs[other], "from_other": name, "baseline": base,
                                             "stage_counts": counts[n], "instance_alone": alone[(n, h)]})
                with open(os.path.join(work, "state.json"), "w") as f:
                    json.dump(state, f, indent=1)
    state.update(ended=time.strftime("%Y-%m-%d %H:%M:%S"), seconds=round(time.monotonic() - t0),
                 load=state["load"] + [os.getloadavg()[0]])
    rows = score(work, state)
    if a.page:
        from wfbench_example import page
        page.write(a.page, state, rows)
    return finish_bench(work, a.keep, t0)


if __name__ == "__main__":
    sys.exit(main())
