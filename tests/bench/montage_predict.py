"""Benchmark: mtcpredict's accuracy on real Montage runs — every stage measured vs predicted.

On a 4-host testbed: quick envelope sweeps (one file per process, one per --block: the envelope's bytes per
call, one of warm reads, --drop-caches off, one of 16 files per process, cold and warm (--young: one of young
reads); the --bracket envelopes last, and again after the runs), then for tiles x hosts the Montage workflow
traced under Rake with the plugin and placement (2 slots per host), each configuration --repeat times; `mtcprof
model` of every run, and `mtcpredict --validate` of each run from the model of another run of its configuration,
with every envelope (faithful, refined and, once two runs are validated, calibrated: each stage's errors in the
runs validated before it only). The spread of the configuration's runs is printed beside every error, and at the
end the floor it sets: the error of the one time per configuration and stage nearest all its runs.
Per stage: measured I/O time, predicted, error %; then median and p90 of |error| over every stage of every
run, per variant, for all stages and for the stages whose measured I/O time is >= 50 ms, how many stage-runs
fall inside their 90 % interval (100 envelope resamples) and which stages most often do not, each stage's signed
error (median over the runs, and per host count), and the whole workflow's I/O time (sum over stages) error per run.

    python tests/bench/montage_predict.py [--tiles 16,36,64] [--hosts 2,4] [--size 256x256] [--block 1m,8k]
                                          [--loaded H] [--apart US] [--writes-ab MS] [--keep DIR | --predict-only DIR]
                                          [--main-only] [-- MTCPREDICT OPTIONS]
(--loaded H, default 1: every --block envelope's TL, BL, T1L and B1L also measured beside H computing processes per
host, round by round with it; the refined model blends them in by each stage's traced cpu_load, and every run is
predicted a second time without them. --apart US, default 200: every --block envelope's TL and BL also measured
with US microseconds of computing between calls, round by round with it; the refined model blends them in by each
stage's traced compute_per_call_us, and every run is predicted again without them. --writes-ab MS: every envelope's
TL/BL also measured with writers computing MS ms first, round by round with it, and every run predicted once more
with those writes.)
"""
import argparse
import collections
import json
import math
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from montage_example import bench, prepare, sky  # noqa: E402
from mtcio.envelope.points import parse_size  # noqa: E402

BIN = os.path.dirname(sys.executable)
SIZES = "1k,4k,12k,16k,48k,64k,96k,128k,256k,512k,1m,4m,16m"
# each sweep waits up to 2 minutes for a quiet machine: a copy and sync beside an envelope halved its small ops'
# rates (docs/experiments/montage-passes.md, pass AL)
SWEEP = ["--procs", "1,2", "--precision", "0", "--quiet", "--wait-quiet", "120"]
# --probe: a fixed quick sweep of every host at once, one process each, 64 KiB files in 8 KiB calls: the
# testbed's speed at that minute (~4 s)
PROBE = ["--host-counts", "all", "--procs", "1", "--sizes", "64k", "--metrics", "Tm,T1L,TL", "--block", "8k",
         "--repeat", "5", "--precision", "0", "--quiet", "--look", "0"]


def sh(*argv):
    r = subprocess.run(list(argv), capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"{' '.join(argv[:3])}: exit {r.returncode}: {r.stderr.strip()[-400:]}")
    for line in r.stderr.splitlines():     # a busy or swung machine, and a wait for quiet, said where they happened
        if line.startswith(("warning:", "mtcenvelope: ")) and \
                any(w in line for w in ("swung", "busy", "quiet after")):
            name = argv[argv.index("--name") + 1] if "--name" in argv else ""
            print(f"{os.path.basename(argv[0])} {name}: {line}", flush=True)
    return r.stdout


def p90(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.9 * (len(xs) - 1))))] if xs else float("nan")


def measure_and_run(a, work, db, tiles, hostcounts, w, h):
    """One testbed session: the envelopes, then every Montage run (each configuration --repeat times, in turn);
    returns the runs and when they began (Unix seconds)."""
    runs = []
    hosts = ",".join(map(str, sorted(set([1] + hostcounts))))
    blocks = list(enumerate(a.block.split(",")))   # (index, block): the first also measures the metadata
    bracketed = [(i, blk) for i, blk in blocks if blk in a.bracket]

    def envelope(name, label, *args, append=False, writes=False, block=False):
        """One envelope of --sweep-repeat repeats per point: back to back, or (--interleave) as that many appended
        sweeps of one repeat, a point's repeats then minutes apart (gfarm2fs's stalls come and go over minutes).
        Its twins, measured round by round with it (one repeat each, the order turned every round) so that all
        see the same minutes: with --writes-ab, TL/BL by writers computing first (an envelope that has writes);
        and of a --block envelope (block), with --loaded, TL, BL, T1L, B1L beside computing processes, with --apart,
        TL and BL of calls apart; with --kernel-load, the envelope and its twin of calls apart beside computing
        processes per kernel."""
        t = time.monotonic()
        twins = []
        if writes and a.writes_ab is not None:
            twins.append((twin_name(name, a.writes_ab), ["--metrics", "TL,BL", "--write-compute-ms",
                                                         str(a.writes_ab)], f"writers computing {a.writes_ab} ms"))
        if block and a.loaded:
            twins.append((loaded_name(name, a.loaded), ["--metrics", "TL,BL,T1L,B1L", "--hogs-per-host",
                                                        str(a.loaded)], f"{a.loaded} computing per host"))
        if block and a.apart:
            twins.append((apart_name(name, a.apart), ["--metrics", "TL,BL", "--call-gap-us", str(a.apart)],
                          f"calls {a.apart} us apart"))
        if a.kernel_load:     # the envelope and its twin of calls apart again, beside a machine kept busy
            kl = ["--hogs-per-kernel", str(a.kernel_load)]
            twins.append((kernel_name(name, a.kernel_load), kl, f"{a.kernel_load} computing per kernel"))
            if block and a.apart:
                twins.append((kernel_name(apart_name(name, a.apart), a.kernel_load),
                              ["--metrics", "TL,BL", "--call-gap-us", str(a.apart), *kl],
                              f"calls {a.apart} us apart beside {a.kernel_load} computing per kernel"))
        rounds = a.sweep_repeat if a.interleave or twins else 1
        for r in range(rounds):
            sweeps = [(name, [])] + [(nm, extra) for nm, extra, _ in twins]
            for nm, extra in sweeps[r % len(sweeps):] + sweeps[:r % len(sweeps)]:
                sh(os.path.join(BIN, "mtcenvelope"), "measure", "--db", db, "--name", nm, "--host-counts", hosts,
                   *SWEEP, "--repeat", "1" if rounds > 1 else str(a.sweep_repeat), *args, *extra,
                   *(["--append"] if append or r else []))
        also = f" and its twins ({'; '.join(x for _, _, x in twins)})" if twins else ""
        print(f"envelope {name}{label}{also}: {time.monotonic() - t:.0f} s", flush=True)

    def block_sweep(i, blk, append=False):
        envelope(f"env-{blk}", " (again, after the runs)" if append else "", "--block", blk, "--sizes", a.sizes,
                 *(["--ops-per-proc", str(a.ops_per_proc)] if a.ops_per_proc else []),
                 *(["--metrics", "TL,BL,T1L,B1L,T1R,B1R,TN,BN"] if i else []),
                 append=append, writes=True, block=True)

    small = ",".join(x for x in a.sizes.split(",") if parse_size(x) <= 256 << 10)
    many = ",".join(x for x in a.sizes.split(",") if parse_size(x) <= a.many_max)
    kinds = []          # the envelopes of small files' reads, (name, sweep): each bracketed when --bracket names it

    def after(append):
        return " (again, after the runs)" if append else ""
    if a.warm:
        kinds.append(("warm", lambda append=False: envelope(
            "env-warm", " (reads a page cache may serve)" + after(append), "--sizes", a.sizes,
            "--ops-per-proc", str(a.ops_per_proc or 1), "--drop-caches", "off", "--metrics", "T1L,B1L,T1R,B1R,TN,BN",
            append=append)))
    if a.young:
        kinds.append(("young", lambda append=False: envelope(
            "env-young", " (local reads right after their writes)" + after(append), "--sizes", small,
            "--ops-per-proc", str(a.ops_per_proc or 1), "--young", append=append)))
    if a.many_files:
        kinds.append(("many", lambda append=False: envelope(
            "env-many", " (16 files per process)" + after(append), "--sizes", many, "--ops-per-proc", "16",
            "--metrics", "TL,BL,T1L,B1L,T1R,B1R,TN,BN", append=append, writes=True)))
    if a.many_files and a.warm:
        kinds.append(("warm-many", lambda append=False: envelope(
            "env-warm-many", " (16 files per process, reads a page cache may serve)" + after(append), "--sizes",
            many, "--ops-per-proc", "16", "--drop-caches", "off", "--metrics", "T1L,B1L,T1R,B1R,TN,BN",
            append=append)))

    def probe(name):
        if a.probe:
            sh(os.path.join(BIN, "mtcenvelope"), "measure", "--db", db, "--name", f"probe-{name}", *PROBE)
    with bench.testbed_session(4, ["--tcp-nodelay"] if a.tcp_nodelay else []) as bed:
        probe("start")
        for i, blk in blocks:
            if blk not in a.bracket:
                block_sweep(i, blk)
        for kind, sweep in kinds:
            if kind not in a.bracket:
                sweep()
        # the bracketed envelopes just before the runs and again just after them (same points, appended): the
        # testbed's stall rate and the cost of its small ops drift over minutes; the runs see their own minutes'
        for kind, sweep in kinds:
            if kind in a.bracket:
                sweep()
        for i, blk in bracketed:
            block_sweep(i, blk)
        probe("pre")
        t_runs = time.time()
        for k in tiles:
            src = os.path.join(work, f"src{k}")
            pairs = prepare.prepare(src, "demo", tiles=k, width=w, height=h)
            for rep in range(1, a.repeat + 1):
                for c in hostcounts:
                    run = f"m{k}x{c}r{rep}"
                    probe(run)
                    wall = bench.run_once(bed, src, bed.hosts[:c], run=run, db=db,
                                          extra_env={**({"MTCPROF_TRACE": "ops"} if a.trace_ops else {}),
                                                     **({"MTCPROF_CPU_WAIT": "1"} if a.cpu_wait else {})} or None)
                    runs.append({"run": run, "config": f"m{k}x{c}", "tiles": k, "overlaps": len(pairs), "hosts": c,
                                 "wall": wall})
                    print(f"run {run}: wall {wall:.1f} s", flush=True)
        probe("post")
        for i, blk in bracketed:
            block_sweep(i, blk, append=True)
        for kind, sweep in kinds:
            if kind in a.bracket:
                sweep(append=True)
    with open(os.path.join(work, "runs.json"), "w") as f:
        json.dump({"runs": runs, "size": f"{w}x{h}", "envelopes": envelope_names(a, a.loaded, a.apart),
                   "writes_ab": a.writes_ab, "loaded": a.loaded, "apart": a.apart, "kernel_load": a.kernel_load,
                   "poll_idle": a.poll_idle, "many_max": a.many_max, "trace_ops": a.trace_ops,
                   "cpu_wait": a.cpu_wait,
                   "t_runs": t_runs,
                   "bracket": a.bracket}, f)
    return runs, t_runs


def models(db, work, runs):
    for r in runs:        # the workflow model of every run, by today's `mtcprof model`
        sh(os.path.join(BIN, "mtcprof"), "model", "--db", db, "--run", r["run"], "-o",
           os.path.join(work, f"{r['run']}.yaml"))


def twin_name(name, ms):
    return f"{name}-c{ms}"


def loaded_name(name, hogs):
    return f"{name}-h{hogs}"


def apart_name(name, us):
    return f"{name}-a{us}"


def kernel_name(name, hogs):
    return f"{name}-k{hogs}"


def kernel_loaded(envs, hogs):
    """The envelopes measured beside `hogs` computing processes per kernel in place of the idle ones (the loaded
    twins per host left out: they were not measured so)."""
    return [kernel_name(e, hogs) for e in idle_only(envs)]


def idle_only(envs):
    return [e for e in envs if not re.search(r"-h\d+$", e)]


def back_to_back(envs):
    return [e for e in envs if not re.search(r"-a\d+$", e)]


def swapped_writes(db, work, envs, ms):
    """A copy of the db whose envelopes have their twins' TL/BL points (writers computing ms ms first)."""
    out = os.path.join(work, f"bench-c{ms}.db")
    with sqlite3.connect(db) as src, sqlite3.connect(out) as dst:
        src.backup(dst)
        ids = dict(dst.execute("SELECT name, id FROM runs"))
        for e in envs:
            if twin_name(e, ms) in ids:
                dst.execute("DELETE FROM envelope_points WHERE run_id = ? AND metric IN ('TL', 'BL')", (ids[e],))
                dst.execute("UPDATE envelope_points SET run_id = ? WHERE run_id = ?", (ids[e], ids[twin_name(e, ms)]))
    return out


def envelope_names(a, loaded=None, apart=None):
    """The envelopes to predict with; with `loaded` (computing processes per host) also the --block envelopes'
    loaded twins, with `apart` (us between calls) their twins of calls apart."""
    blocks = [f"env-{b}" for b in a.block.split(",")]
    return blocks + (["env-warm"] if a.warm else []) + (["env-many"] if a.many_files else []) + \
        (["env-warm-many"] if a.warm and a.many_files else []) + \
        (["env-young"] if a.young else []) + \
        [loaded_name(e, loaded) for e in blocks if loaded] + [apart_name(e, apart) for e in blocks if apart]


def predict_all(a, work, db, runs, w, h, measured_envs=None):
    """Each run predicted from the workflow model of ANOTHER run of its configuration (leave-one-run-out:
    sizes, α, I/O concurrency and balance never come from the trace scored), validated against its own trace;
    the spread of the configuration's runs, (max - min) / mean of the measured stage time, printed beside."""
    errs = {}          # variant -> [(|err|, measured_s)]
    inside = {}        # variant -> [(stage, measured within the prediction's 90 % interval)]
    noise = []
    floor = []         # the least |error| one predicted time per configuration can have on its worst run
    whole = []
    by_stage = {}      # stage -> signed refined errors over the runs: which way each stage leans
    by_hosts = {}      # (stage, hosts) -> the same per host count: a lean that changes with the hosts
    validated = []
    envs = a.envelope.split(",") if a.envelope else (measured_envs or envelope_names(a))
    with sqlite3.connect(db) as conn:   # calibration learns only from the runs validated before, in this pass
        conn.execute("DELETE FROM validations")
        conn.execute("DELETE FROM predictions")
    by_config = {}
    for r in runs:
        by_config.setdefault(r.get("config", r["run"]), []).append(r)
    spreads = {c: stage_spread(db, work, [r["run"] for r in g]) if len(g) > 1 else {} for c, g in by_config.items()}
    state = envelope_state(db)
    if state:
        print("envelope state, 1 host x 1 process, ops/s (one file per process; 16): " + ", ".join(state) +
              " (a lone process's one op: 2.2-2.7x slower on some passes than others while the runs moved ~13 %: "
              "docs/experiments/montage-passes.md, pass Z)", flush=True)
    slower = probe_factors(db, runs)
    if slower:
        print("testbed slower before each run than at the envelopes (--probe): " + ", ".join(
            f"{run} {f:.2f}" for run, f in slower.items()), flush=True)
    for r0 in runs:
        run = r0["run"]
        group = by_config[r0.get("config", run)]
        src = next((r for r in group if r["run"] != run), r0)     # the other run's model (itself if alone)
        res = predict(db, work, src["run"], run, envs, a.predict_args, calibrate=len(validated) >= 2)
        validated.append(run)
        spread = spreads[r0.get("config", run)]
        print(f"\n== {r0['tiles']} tiles ({w}x{h}), {r0['overlaps']} overlaps, {r0['hosts']} hosts x 2 slots: run "
              f"{run}, wall {r0['wall']:.1f} s; model of {src['run']}; envelopes {', '.join(envs)}", flush=True)
        print(f"{'stage':<12}{'N':>5}{'measured s':>11}{'spread %':>9}" + "".join(
            f"{v + ' s':>14}{'err %':>8}" for v in ("faithful", "refined", "calibrated")))
        rows = {}
        for r in res["predictions"]:
            rows.setdefault(r["stage"], {})[r["variant"]] = r
        tot = {}
        for stage, vs in rows.items():
            meas = res["measured"].get(stage, {}).get("measured_s")
            n = res["measured"].get(stage, {}).get("tasks", "")
            sp, fl = spread.get(stage, (None, None))
            if sp is not None:
                noise.append(sp)
                floor.append(fl)
            line = (f"{stage:<12}{n!s:>5}{meas if meas is not None else float('nan'):>11.3f}"
                    f"{(f'{sp:.0f}' if sp is not None else '-'):>9}")
            for v in ("faithful", "refined", "calibrated"):
                r = vs.get(v)
                if r is None:
                    line += f"{'':>14}{'':>8}"
                    continue
                e = r.get("error_pct")
                line += f"{r['total_s']:>14.3f}{(f'{e:+.0f}' if e is not None else '-'):>8}"
                if e is not None and meas:
                    errs.setdefault(v, []).append((abs(e), meas))
                    if v == "refined":
                        by_stage.setdefault(stage, []).append(e)
                        by_hosts.setdefault((stage, r0["hosts"]), []).append(e)
                    iv = r.get("interval")
                    if iv:
                        inside.setdefault(v, []).append((stage, iv[0] <= meas <= iv[1],
                                                         iv[1] / iv[0] if iv[0] > 0 else math.inf))
                    tot.setdefault(v, [0.0, 0.0])
                    tot[v][0] += r["total_s"]
                    tot[v][1] += meas
            print(line)
        for v, (pr, me) in tot.items():
            whole.append((run, v, 100 * (pr - me) / me, me))
            print(f"whole workflow I/O, {v}: predicted {pr:.3f} s, measured {me:.3f} s, "
                  f"error {100 * (pr - me) / me:+.0f} %")
    print(f"\nsummary over {len(validated)} runs ({', '.join(validated)}), |error| per stage:")
    for v, xs in errs.items():
        all_e = [e for e, _ in xs]
        big = [e for e, m in xs if m >= 0.05]
        print(f"Median |error| {v:<10}: {statistics.median(all_e):6.1f} % (p90 {p90(all_e):6.1f} %, "
              f"{len(all_e)} stages); stages >= 50 ms: median {statistics.median(big) if big else float('nan'):.1f} %"
              f" p90 {p90(big):.1f} % ({len(big)})")
    if by_stage:
        print("refined error per stage over the runs, median [min, max] %: " + "; ".join(
            f"{st} {statistics.median(es):+.0f} [{min(es):+.0f}, {max(es):+.0f}]" for st, es in by_stage.items()))
        hs = sorted({h for _, h in by_hosts})
        if len(hs) > 1:
            print(f"refined error per stage on {' / '.join(map(str, hs))} hosts, median %: " + "; ".join(
                f"{st} " + " / ".join(f"{statistics.median(by_hosts[st, h]):+.0f}" if (st, h) in by_hosts else "-"
                                      for h in hs) for st in by_stage))
    for v, xs in inside.items():
        n_in = sum(ok for _, ok, _ in xs)
        worst = collections.Counter(stage for stage, ok, _ in xs if not ok).most_common(5)
        print(f"measured inside the {v} 90 % interval: {n_in} of {len(xs)} stage-runs ({100 * n_in / len(xs):.0f} %); "
              f"its high / low: median {statistics.median(w for _, _, w in xs):.2f}; "
              f"most often outside: {', '.join(f'{st} {n}' for st, n in worst) or 'none'}")
    if noise:
        print(f"spread of a stage's measured I/O time over the runs of its configuration, (max-min)/mean: "
              f"median {statistics.median(noise):.1f} %, p90 {p90(noise):.1f} % ({len(noise)} stage-runs)")
        print(f"floor set by that spread: one predicted time per configuration and stage, the one nearest all its "
              f"runs (2ab/(a+b) for two), is off by (max-min)/(max+min) on its runs: median "
              f"{statistics.median(floor):.1f} %, p90 {p90(floor):.1f} %")
    for v in ("faithful", "refined", "calibrated"):
        ws = [abs(e) for run, vv, e, _ in whole if vv == v]
        if ws:
            print(f"whole-workflow I/O time |error| {v:<10}: median {statistics.median(ws):.1f} %, "
                  f"max {max(ws):.1f} % ({len(ws)} runs)")


def envelope_state(db):
    """['T1L 64 KiB 584; 1170', ..]: the points of the first one-file envelope measured (env-1m or env-8k) and of the
    many-file one, 1 host x 1 process, mean over repeats: a pass's envelope state, comparable across passes."""
    out = []
    with sqlite3.connect(db) as conn:
        one = conn.execute("SELECT name FROM runs WHERE kind = 'envelope' AND name IN ('env-8k', 'env-1m') "
                           "ORDER BY id LIMIT 1").fetchone()
        one = one and one[0]
        for metric, size in (("T1L", 64 * 1024), ("TL", 64 * 1024), ("TL", 512 * 1024)):
            vals = []
            for name in (one, "env-many"):
                v = conn.execute("SELECT avg(p.value) FROM envelope_points p JOIN runs r ON r.id = p.run_id WHERE "
                                 "r.name = ? AND p.ok AND p.metric = ? AND p.file_size = ? AND p.hosts = 1 AND "
                                 "p.procs_per_host = 1", (name, metric, size)).fetchone()[0] if name else None
                vals.append(f"{v:.0f}" if v else "-")
            if vals[0] != "-":
                out.append(f"{metric} {size // 1024} KiB {'; '.join(vals)}")
    return out


def probe_factors(db, runs):
    """run -> how much slower the testbed was just before it than while the envelopes were measured: the geometric
    mean over the --probe's points (ops/s, median of its repeats) of the probe at the envelopes' start and end
    (geometric mean) over the one just before the run. {} when the runs were not probed."""
    med = {}
    with sqlite3.connect(db) as conn:
        for name, metric, v in conn.execute(
                "SELECT r.name, p.metric, p.value FROM envelope_points p JOIN runs r ON r.id = p.run_id "
                "WHERE r.name LIKE 'probe-%' AND p.ok AND p.unit = 'ops/s'"):
            med.setdefault(name[len("probe-"):], {}).setdefault(metric, []).append(v)
    med = {n: {m: statistics.median(vs) for m, vs in ms.items()} for n, ms in med.items()}
    refs = [med[n] for n in ("start", "pre") if n in med]
    out = {}
    for r in runs:
        at = med.get(r["run"])
        ms = [m for m in (at or {}) if refs and all(m in ref for ref in refs)]
        if ms:
            out[r["run"]] = math.exp(statistics.mean(
                math.log(statistics.geometric_mean([ref[m] for ref in refs]) / at[m]) for m in ms))
    return out


def predict(db, work, model_run, run, envs, extra, calibrate):
    args = [os.path.join(BIN, "mtcpredict"), os.path.join(work, f"{model_run}.yaml"),
            *[x for e in envs for x in ("--envelope", f"{db}:{e}")], "--validate", f"{db}:{run}", "--json",
            "--bootstrap", "100", *extra]
    return json.loads(sh(*args, *(["--calibrate"] if calibrate else [])))


def stage_spread(db, work, runs):
    """stage -> ((max - min) / mean, (max - min) / (max + min)) of its measured I/O time over these runs, in %
    (as `mtcpredict --validate DB:R1,R2` measures it, with each run's own slots per host). The second is the
    floor of any one prediction's error on the worst of these runs (reached by the prediction 2 max min / (max +
    min))."""
    from mtcio.db.workflow_model import load
    from mtcio.predictor import measured
    vals = {}
    for r in runs:
        slots = {st.name: (st.procs_per_host or 1) for st in load(os.path.join(work, f"{r}.yaml")).stages}
        for st, m in measured.measure(db, r, "auto", slots).items():
            if st != "_run":
                vals.setdefault(st, []).append(m["measured_s"])
    return {st: (100 * (max(v) - min(v)) / (sum(v) / len(v)), 100 * (max(v) - min(v)) / (max(v) + min(v)))
            for st, v in vals.items() if len(v) == len(runs) and sum(v) > 0}


def ab(a, work, db, runs, w, h, envs, ms):
    print(f"\n==== the same runs predicted with the TL/BL of writers computing {ms} ms first (measured round by "
          f"round with the envelopes above)", flush=True)
    predict_all(a, work, swapped_writes(db, work, envs, ms), runs, w, h, envs)


def without_load(a, work, db, runs, w, h, envs):
    print("\n==== the same runs predicted without the loaded envelopes (refinement cpu_load idle)", flush=True)
    predict_all(a, work, db, runs, w, h, idle_only(envs))


def before_only(db, work, t_runs):
    """A copy of the db without the envelope points measured after the runs began (the bracketed envelopes' second
    halves)."""
    out = os.path.join(work, "bench-before.db")
    with sqlite3.connect(db) as src, sqlite3.connect(out) as dst:
        src.backup(dst)
        dst.execute("DELETE FROM envelope_points WHERE measured_at > ?", (t_runs,))
    return out


def again(a, work, db, runs, w, h, envs, loaded, writes_ab, apart=None, t_runs=None, kernel_load=None):
    """The same runs predicted again: from the envelopes measured beside computing processes per kernel in place of
    the idle ones, with the envelopes measured before the runs only (when some were bracketed), without the envelope
    of young reads, without the twins of calls apart, without the loaded twins, and with the writers computing
    first."""
    if a.main_only:
        return
    if kernel_load:
        print(f"\n==== the same runs predicted from the envelopes measured beside {kernel_load} computing process(es) "
              f"per kernel (round by round with those above)", flush=True)
        predict_all(a, work, db, runs, w, h, kernel_loaded(envs, kernel_load))
    if t_runs:
        print("\n==== the same runs predicted with the envelopes measured before the runs only", flush=True)
        predict_all(a, work, before_only(db, work, t_runs), runs, w, h, envs)
    if "env-young" in envs:
        print("\n==== the same runs predicted without the envelope of young reads (refinement young_reads idle)",
              flush=True)
        predict_all(a, work, db, runs, w, h, [e for e in envs if e != "env-young"])
    if apart:
        print("\n==== the same runs predicted without the envelopes of calls apart (refinement call_gap idle)",
              flush=True)
        predict_all(a, work, db, runs, w, h, back_to_back(envs))
    if loaded:
        without_load(a, work, db, runs, w, h, envs)
    if writes_ab is not None:
        ab(a, work, db, runs, w, h, idle_only(envs), writes_ab)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiles", default="16,36,64")
    ap.add_argument("--hosts", default="2,4")
    ap.add_argument("--size", default="256x256", help="tile WIDTHxHEIGHT (512x1024: the paper-like 2 MiB tiles)")
    ap.add_argument("--sizes", default=SIZES, help=f"the envelope's file sizes (default {SIZES})")
    ap.add_argument("--block", default="1m,8k",
                    help="bytes per call of the envelope's ops, one envelope each (default 1m,8k: mtcenvelope's "
                         "default and Montage's system calls: cfitsio's 2,880-byte FITS blocks go through a stdio "
                         "buffer of 8 KiB); every one is given to mtcpredict, the first as the main one, and its "
                         "call_size refinement picks per stage")
    ap.add_argument("--bracket", default="8k", type=lambda v: [b for b in v.split(",") if b],
                    help="envelopes (by --block, or warm, young, many, warm-many: those of small files' reads) "
                         "measured last before the runs and again after them, both halves kept as one envelope "
                         "(default 8k: the one of Montage's calls; '' = none), and the runs predicted once more from "
                         "the halves before them only. gfarm2fs's ~44 ms stalls come and go over minutes (TL at 512 "
                         "KiB: 128-210 ops/s in 8 of 10 repeats, 21-64 in 6 of 6 95 s later): bracketing samples the "
                         "minutes the runs saw. Bracketing the small files' envelopes too was worse on a held-out "
                         "pass (refined median 17.1 %% against 15.0 %% from their halves before the runs: "
                         "docs/experiments/montage-passes.md)")
    ap.add_argument("--interleave", action="store_true",
                    help="measure an envelope's --sweep-repeat repeats as that many appended sweeps of one repeat "
                         "(a point's repeats minutes apart) instead of back to back (seconds apart); ~10 %% slower, "
                         "and on one pass (2026-11-24) no better: refined median 12.9 %% against 9.7-11.8 %%")
    ap.add_argument("--repeat", type=int, default=2,
                    help="runs of each configuration (default 2): each is predicted from another's workflow model "
                         "and the spread between them is printed beside every error")
    ap.add_argument("--tcp-nodelay", action="store_true",
                    help="a testbed with `sockopt tcp_nodelay` (mtcbed up --tcp-nodelay): no ~44 ms Nagle stalls")
    ap.add_argument("--sweep-repeat", type=int, default=5,
                    help="repeats of every envelope point (default 5: gfarm2fs stalls ~45 ms at random, a point's "
                         "repeats vary by up to 15x)")
    ap.add_argument("--ops-per-proc", type=int, default=1,
                    help="files per process of the envelope's ops (default 1: an MTC task opens few files)")
    ap.add_argument("--no-warm", dest="warm", action="store_false",
                    help="no envelopes of warm reads (--drop-caches off; the refined model's warm_reads uses them for "
                         "the bytes a stage reads of files the run wrote; unless --no-many-files, also one of 16 files "
                         "per process, which no refinement uses since later_share was deleted)")
    ap.add_argument("--young", action="store_true",
                    help="also an envelope of young reads (mtcenvelope --young, sizes <= 256 KiB: local reads right "
                         "after their write run; the refined model's young_reads uses it for the bytes a stage reads "
                         "of files its host wrote < 1 s before). Off by default: a read's cost follows how long the "
                         "host's I/O path idled before it, not the file's age (docs/experiments/montage-passes.md)")
    ap.add_argument("--no-many-files", dest="many_files", action="store_false",
                    help="no envelopes of 16 files per process (sizes up to --many-max, cold, and warm unless "
                         "--no-warm; the refined model's first_op uses the cold one for stages whose processes "
                         "open several files in turn)")
    ap.add_argument("--many-max", type=parse_size, default=256 << 10, metavar="SIZE",
                    help="the largest of --sizes the envelopes of 16 files per process measure (default 256k; "
                         "Montage's projected images are ~520 KiB, written as a process's later ops, but 1m held "
                         "out on pass W gave 10.6 %% against 11.3 %% with mDiff and mBackground 24-27 points "
                         "farther, and on pass AA 23.0 %% against 20.4 %%: docs/experiments/montage-passes.md)")
    ap.add_argument("--writes-ab", type=int, metavar="MS",
                    help="also measure every envelope's TL/BL with writers computing MS ms first (mtcenvelope "
                         "--write-compute-ms), round by round with it, and predict every run a second time with "
                         "those writes: the two regimes compared on the same runs and minutes")
    ap.add_argument("--loaded", type=int, default=1, metavar="H",
                    help="also measure every --block envelope's TL, BL, T1L and B1L beside H processes per host that "
                         "only compute (mtcenvelope --hogs-per-host), round by round with it; the refined model "
                         "blends them in by each stage's cpu_load, and every run is also predicted without them "
                         "(default 1; 0: none)")
    ap.add_argument("--apart", type=int, default=200, metavar="US",
                    help="also measure every --block envelope's TL and BL with US microseconds of computing between "
                         "calls (mtcenvelope --call-gap-us), round by round with it; the refined model blends them in "
                         "by each stage's compute_per_call_us, and every run is also predicted without them "
                         "(default 200; 0: none)")
    ap.add_argument("--kernel-load", type=int, default=0, metavar="K",
                    help="also measure every envelope (and its twin of calls apart) beside K processes per kernel "
                         "that only compute (mtcenvelope --hogs-per-kernel; the testbed's hosts share one kernel), "
                         "round by round with it, and predict every run again from those in place of the idle "
                         "ones (default 0: none). On one held-out pass they predicted every stage 27-55 %% too "
                         "fast (refined median 38.5 %% against 14.5 %%): Montage keeps the CPUs ~53 %% busy, "
                         "but with its own processes, idle while they wait on I/O (docs/experiments/montage-passes.md)")
    ap.add_argument("--poll-idle", action=argparse.BooleanOptionalAction, default=True,
                    help="keep the machine's idle CPUs polling through the whole benchmark, envelopes and runs alike "
                         "(PM QoS latency 0 held on /dev/cpu_dma_latency; default on, --no-poll-idle: off): a VM's "
                         "halted vCPU wakes late, on every hop of a small op (application, FUSE, gfarm2fs, gfsd). "
                         "Two passes back to back on the tcp_nodelay testbed (2026-11-27) with and without it: "
                         "refined median 17.8 %% against 20.8 %%, whole-workflow I/O 2.7 %% against 21.3 %%; the "
                         "runs' traced I/O 1.29-1.64x faster with it (median 1.41), the 8 KiB envelope's points of one "
                         "process 1.42x, of eight 1.03x (docs/experiments/montage-passes.md)")
    ap.add_argument("--probe", action=argparse.BooleanOptionalAction, default=True,
                    help="a quick fixed sweep (probe-NAME: Tm, T1L and TL of 64 KiB files, one process on every "
                         "host, 5 repeats) before the envelopes, after them, before every run and after the runs: "
                         "how much slower the testbed was before each run than at the envelopes is printed "
                         "(default on). A record only: the refined times scaled by it scored worse on pass X, 18.3 "
                         "%% against 16.0 %% (docs/experiments/montage-passes.md)")
    ap.add_argument("--trace-ops", action="store_true",
                    help="trace every I/O call of the runs (MTCPROF_TRACE=ops): each stage's I/O concurrency can then "
                         "be read from the calls themselves")
    ap.add_argument("--cpu-wait", action="store_true",
                    help="time each traced call's wait for a CPU in the runs (MTCPROF_CPU_WAIT=1): the models then "
                         "have io_cpu_wait_measured beside the estimate (a diagnostic: refinement measured_wait "
                         "is deleted)")
    ap.add_argument("--envelope", help="envelope runs to predict with, comma-separated (env-BLOCK,..)")
    ap.add_argument("--keep", metavar="DIR", help="keep the db and workflow models in DIR")
    ap.add_argument("--predict-only", metavar="DIR",
                    help="rebuild the workflow models of the runs kept in DIR and predict them again (no testbed)")
    ap.add_argument("--main-only", action="store_true",
                    help="predict once, with the envelopes as measured, and skip the comparisons that predict every "
                         "run again without some of them; with --predict-only DIR -- --bootstrap 0 a kept pass is "
                         "scored in about a minute (a model change tried in sample)")
    ap.add_argument("predict_args", nargs="*", help="more mtcpredict options, after --")
    a = ap.parse_args()
    unknown = [b for b in a.bracket if b not in a.block.split(",") + ["warm", "young", "many", "warm-many"]]
    if unknown:
        ap.error(f"--bracket {','.join(unknown)}: neither among --block {a.block} nor warm, young, many, warm-many")
    t_start = time.monotonic()
    if a.predict_only:
        work = a.predict_only
        with open(os.path.join(work, "runs.json")) as f:
            kept = json.load(f)
        w, h = sky.parse_tile_size(kept["size"])
        db = os.path.join(work, "bench.db")
        models(db, work, kept["runs"])
        envs = kept.get("envelopes")
        predict_all(a, work, db, kept["runs"], w, h, envs)
        again(a, work, db, kept["runs"], w, h, envs, kept.get("loaded"), kept.get("writes_ab"), kept.get("apart"),
              kept.get("t_runs"), kept.get("kernel_load"))
        print(f"benchmark time {time.monotonic() - t_start:.0f} s")
        return
    tiles = [int(x) for x in a.tiles.split(",")]
    hostcounts = [int(x) for x in a.hosts.split(",")]
    w, h = sky.parse_tile_size(a.size)
    work = a.keep or tempfile.mkdtemp(prefix="mtcmontage-predict.")
    os.makedirs(work, exist_ok=True)
    os.chmod(work, 0o755)
    db = os.path.join(work, "bench.db")
    hold = bench.poll_idle() if a.poll_idle else None
    a.poll_idle = hold is not None
    try:
        runs, t_runs = measure_and_run(a, work, db, tiles, hostcounts, w, h)
        models(db, work, runs)
        envs = envelope_names(a, a.loaded, a.apart)
        predict_all(a, work, db, runs, w, h, envs)
        again(a, work, db, runs, w, h, envs, a.loaded, a.writes_ab, a.apart, t_runs if a.bracket else None,
              a.kernel_load)
        print(f"benchmark time {time.monotonic() - t_start:.0f} s")
    finally:
        if hold is not None:
            os.close(hold)
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)

if __name__ == "__main__":
    main()
