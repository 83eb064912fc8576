"""mtcpredict: predict each workflow stage's I/O time from the MTC envelope (round-based model)."""
from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys

from mtcio.exitcodes import exit_table, printable   # light: names from a trace may hold undecodable bytes
from mtcio.helptext import HelpFormatter, add_version

EXIT_CODES = exit_table({1: "failed: an output (--out, the --validate db) could not be written",
                         2: "bad input: bad options; a workflow model, envelope or --validate run that is "
                            "missing, malformed or does not fit the model; a WfFormat instance that is not JSON, "
                            "not WfFormat, of an unknown schemaVersion, with a cycle in parents/children or a "
                            "negative size"})

EPILOG = """\
variants:
  faithful  equations (1)-(3) of the round-based model as published: C = hosts, ceil(N/C) rounds, T and B as the
            roofline (T at the envelope's smallest size, B at its largest) at concurrency C
  refined   slots = hosts x procs per host, envelope values at the stage's real file size and
            concurrency, real metadata counts (stats at Ts), re-reads, several files per task, tiny shared
            headers metadata-bound, the I/O concurrency seen in the trace, the envelope of the stage's call
            size, its spread of op sizes, warm reads of the run's own outputs, a process's first op dearer
            than its next, every open of a re-opened file an op, stats the attribute cache served free,
            seeks to a file's end at Tf (an fstat after a read) or as stats, (given an envelope measured with
            --hogs-per-host) the CPU load the stage's I/O ran beside, and the run's wait for a CPU against the
            envelope's (--refine picks)
  calibrated  (with --calibrate) the refined model times each stage's past error with this envelope
            (its runs on as many hosts, shrunk toward all its runs' and every stage's), judged by
            leave-one-run-out cross-validation; its 90 % interval is those held-out errors' 5th-95th
            percentile (from two other validated runs)

examples:
  mtcpredict montage_example/montage.yaml
  mtcpredict workflow.yaml --envelope mtc.db:bed4 --validate mtc.db:montage1 --out report/
  mtcpredict workflow.yaml --envelope mtc.db:bed4 --envelope mtc.db:bed4-2880 --envelope mtc.db:bed4-warm
  mtcpredict workflow.yaml --envelope mtc.db:bed4 --envelope mtc.db:bed4-hogs1   # an idle and a loaded one
  mtcpredict workflow.yaml --what-if hosts=2,4,8 alpha=0.6,1.0
  mtcprof model --db mtc.db --run m16,m36 --size m16=16,m36=36 -o scaled.yaml    # a model that scales
  mtcpredict scaled.yaml --at size=100 hosts=8 --tasks-from graph100.txt        # graph: rake -P at that size
  mtcpredict scaled.yaml --what-if size=64,100,400 hosts=4,8,16                   # where the bottleneck moves
  mtcpredict workflow.yaml --variant refined --refine=-io_overlap,-metadata --json
  mtcpredict epigenomics.json --hosts 4 --slots 2                               # a WfFormat instance

"""


MAX_BOOTSTRAP = 10000     # each resample predicts every stage again: 1,000 take ~15 s on a 28-stage model


def build_parser() -> argparse.ArgumentParser:
    from .model import OPT_IN, REFINEMENTS
    from .surface import CELL_RATES
    p = argparse.ArgumentParser(
        prog="mtcpredict", formatter_class=HelpFormatter, epilog=EPILOG + "\n" + EXIT_CODES,
        description="Predict each stage's I/O time (read, write, metadata) of a workflow model from a measured MTC "
                    "envelope, attribute it to its bottleneck, and optionally validate it against a traced run.")
    p.add_argument("workflow", metavar="WORKFLOW.yaml", nargs="?",
                   help="workflow model (`mtcprof model` writes one), or a WfFormat instance (WfCommons' JSON, 1.5 or "
                        "1.6: a file ending in .json or starting with '{'), modelled as `mtcprof model "
                        "--from-wfformat` does, on --hosts and --slots")
    p.add_argument("--envelope", metavar="DB[:NAME]|FILE.yaml|FILE.csv", action="append",
                   help="envelope to predict from: a db (its latest envelope run, or NAME), or an `mtcenvelope "
                        "export` file (default: the envelope run the workflow model names, `mtcprof model "
                        "--envelope-run`, in the db it was modelled from; else the envelope shipped with mtcio, "
                        "measured on a 4-host testbed; a CSV export carries no measurement conditions, so it "
                        "can only be given alone). "
                        "Give it again for envelopes of the same file system measured with other bytes per call "
                        "(`mtcenvelope measure --block`), warm reads (--drop-caches off) or beside computing "
                        "processes (--hogs-per-host): the refined model looks each stage's reads and writes up in "
                        "the one nearest their traced call size (call_size), reads of files the run wrote in the "
                        "warm one (warm_reads), and moves them toward the loaded one by the stage's CPU load "
                        "(cpu_load); the first is the main one (faithful model, maps). One of young reads "
                        "(--young) or of calls apart (--call-gap-us) is ignored, said on stderr: no refinement "
                        "uses them since the ablation (docs/experiments/ablation.md)")
    p.add_argument("--cell-rate", choices=CELL_RATES, default="swung",
                   help="how an envelope point's repeats make its value: swung (default: the rate of their mean time "
                        "per op, the slowest of 5 or more counted as the next slowest, but at a point whose repeats' "
                        "quartiles are more than 2x apart, the upper quartile: a point measured while the machine "
                        "swung between quick and slow minutes read at its quick ones), mean (that mean everywhere) "
                        "or quartile (the upper quartile of every point of 5 or more repeats)")
    p.add_argument("--variant", choices=("faithful", "refined", "all"), default="all",
                   help="model variant(s) to report (default all)")
    p.add_argument("--refine", metavar="LIST", default="default",
                   help=f"refinements of the refined variant: default "
                        f"({'all but ' + ', '.join(OPT_IN) if OPT_IN else 'all'}), all, none, a "
                        f"list ({', '.join(REFINEMENTS)}) or the default less or plus some (-io_overlap,+wait_ratio)")
    p.add_argument("--validate", metavar="DB[:RUN[,RUN..]]",
                   help="compare with traced run(s) in DB (several runs: repeats, their spread is the noise floor; "
                        "DB alone: the model's own run if DB has it, else DB's latest trace run); each run must have "
                        "the model's task count in every stage; stores predictions and validations in DB")
    p.add_argument("--calibrate", action="store_true",
                   help="add the 'calibrated' variant: the refined model corrected by each stage's errors in the other "
                        "runs validated in the --validate db with this envelope (needs >= 1), with a 90%% "
                        "interval of its held-out errors on them (needs >= 2)")
    p.add_argument("--at", nargs="+", metavar="KEY=V",
                   help="predict a model that scales (`mtcprof model --size`) at size=S [hosts=C] [procs=P]: its "
                        "stages' task counts, files and bytes from the fits over the traced runs (or --tasks-from), "
                        "α, the busiest host's tasks and the I/O concurrency at C hosts by rule (db/README.md, "
                        "'Scaling'); hosts and procs default to the reference run's")
    p.add_argument("--tasks-from", metavar="FILE",
                   help="with --at: the target's task graph, `rake -P` (or `pwrake -P`) run in the workflow's folder "
                        "prepared at that size: every stage's task count and the workflow's inputs exactly")
    p.add_argument("--force", action="store_true",
                   help="with --at or --what-if size=: predict a size more than 8x outside the traced ones")
    p.add_argument("--what-if", nargs="+", metavar="KEY=V,..",
                   help="re-predict with size=S|xF,.. (a model that scales) hosts=N,.. procs=P,.. alpha=A,.. "
                        "filesize=xF|BYTES,.. tasks=xF|N,.. (every combination)")
    p.add_argument("--out", metavar="DIR", help="write prediction.json, PNG maps and report.html into DIR (with --at, "
                                                "also model-at.yaml: the model instantiated there)")
    from mtcio.db.wfformat_model import HOSTS_WORDS, add_host_arguments
    add_host_arguments(p, HOSTS_WORDS)
    p.add_argument("--json", action="store_true", help="print everything as JSON on stdout instead of the table")
    p.add_argument("--bootstrap", type=int, default=100, metavar="N",
                   help=f"envelope resamples for the 90%% intervals (default 100, at most {MAX_BOOTSTRAP:,}; 0: no "
                        "intervals): of one run's stage time "
                        "(refined: a stage doing fewer ops at an envelope point than it has repeats draws that many "
                        "of them), of the mean's (faithful)")
    p.add_argument("--files", choices=("auto", "gfarm", "all"),
                   help="with --validate: which traced files count (as `mtcprof model --files`; default auto)")
    add_version(p, "mtcpredict")
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    for opt in (args.what_if, args.at):
        if args.workflow is None and opt and "=" not in opt[-1]:
            args.workflow = opt.pop()     # `--what-if K=V WORKFLOW.yaml`: the list took the file
    if args.workflow is None:
        parser.error("the following arguments are required: WORKFLOW.yaml")
    from mtcio.exitcodes import guard
    return guard("mtcpredict", _run, args)


def _fail(msg, code=2):
    print(f"mtcpredict: {msg}", file=sys.stderr)
    return code


def _run(a) -> int:
    drawing = []       # the report's figures a child draws beside the prediction (report.Drawing): stopped on any exit
    try:
        return _predict(a, drawing)
    finally:
        for d in drawing:
            if d is not None:
                d.cancel()


def _predict(a, drawing: list) -> int:
    from mtcio.db.workflow_model import ModelError, load

    from . import envelope_source, predict, whatif
    from .surface import EnvelopeError, EnvelopeSurface
    if not 0 <= a.bootstrap <= MAX_BOOTSTRAP:
        return _fail(f"--bootstrap: {a.bootstrap} resamples; give 0 to {MAX_BOOTSTRAP:,} (each one predicts every "
                     "stage again)")
    try:
        refine = predict.parse_refine(a.refine)
        axes = whatif.parse(a.what_if) if a.what_if else None
    except ValueError as e:
        return _fail(str(e))
    if a.files and not a.validate:
        return _fail("--files says which traced files --validate counts: give it with --validate DB:RUN")
    a.files = a.files or "auto"
    if a.calibrate and not a.validate:
        return _fail("--calibrate needs --validate DB:RUN (the db holding the past validations)")
    if a.out and os.path.exists(a.out) and not os.path.isdir(a.out):
        return _fail(f"--out {a.out}: exists and is not a folder (--out takes the folder to write the report into)")
    if a.calibrate and a.variant == "faithful":
        return _fail("--calibrate corrects the refined variant: give --variant refined or all")
    if a.tasks_from and not a.at:
        return _fail("--tasks-from is the target's task graph: give it with --at size=S")
    if _is_wfformat(a.workflow):
        from mtcio.db import wfformat, wfformat_model
        try:
            inst = wfformat.read_instance(a.workflow)
            hosts, slots = wfformat_model.hosts_and_slots(inst, a.hosts, a.slots)
            wf, notes = wfformat_model.build(inst, hosts, slots)
        except (wfformat.WfFormatError, ValueError) as e:
            return _fail(str(e))
        except OSError as e:
            return _fail(f"{printable(a.workflow)}: {e.strerror or e}")
        print(f"mtcpredict: {printable(a.workflow)}: WfFormat {inst.version} instance, {len(inst.tasks)} tasks in "
              f"{len(wf.stages)} stages, on {hosts} hosts x {slots} slots; α by the placement rule: "
              f"{wfformat_model.PLACEMENT}", file=sys.stderr)
        for n in notes:
            print(f"mtcpredict: default: {n}", file=sys.stderr)
    elif a.hosts is not None or a.slots is not None:
        return _fail("--hosts and --slots are for a WfFormat instance; a workflow model's hosts: --what-if hosts=N")
    else:
        try:
            wf = load(a.workflow)
        except ModelError as e:
            return _fail(str(e))
    scaled = None
    if wf.scaling is not None:     # (model, the size, hosts and slots it is at): the reference run's
        ri = wf.scaling["runs"].index(wf.scaling["reference"])
        scaled = (wf, wf.scaling["sizes"][ri], wf.scaling["hosts"][ri], wf.scaling["procs"][ri])
    at_notes = []
    if a.at:
        try:
            wf, scaled, at_notes = _instantiate(wf, scaled, a.at, a.tasks_from, a.force)
        except ValueError as e:
            return _fail(str(e))
    if axes and scaled is not None:
        try:
            _check_what_if_sizes(axes, scaled, a.force)
        except ValueError as e:
            return _fail(str(e))
    try:
        envs = [envelope_source.load(x) for x in (a.envelope or [envelope_source.of_model(wf)])]
    except envelope_source.EnvelopeSourceError as e:
        return _fail(str(e))
    twice = [e.origin for i, e in enumerate(envs) if any(e.origin == f.origin for f in envs[:i])]
    if twice:
        return _fail(f"envelope {twice[0]} given twice")
    csvs = [e.origin for e in envs if e.from_csv]
    if csvs and len(envs) > 1:
        return _fail(f"envelope {csvs[0]}: a CSV export carries no measurement conditions (call size, cache state, "
                     "files per process...), which envelopes used together differ by: give the YAML export or the db")
    surfaces = []
    for e in envs:
        if e.idle_ms:
            return _fail(f"envelope {e.origin} was measured after {e.idle_ms} ms idle before each read "
                         "(mtcenvelope --idle-ms): the predictor does not take such envelopes")
        sf = EnvelopeSurface(a.cell_rate).fit(e.points)
        sf.block, sf.cold, sf.ops_per_proc, sf.hogs, sf.gap_us = e.block, e.cold, e.ops_per_proc, e.hogs, e.call_gap_us
        sf.young = e.young
        if not sf.grids:
            return _fail(f"envelope {e.origin}: no usable point ({envelope_source.unusable(e.points)})")
        same = [x for x, s in zip(envs, surfaces)
                if (s.block, s.cold, s.ops_per_proc, s.hogs, s.gap_us, s.young) ==
                (sf.block, sf.cold, sf.ops_per_proc, sf.hogs, sf.gap_us, sf.young)]
        if same:
            reads = "young" if sf.young else "cold" if sf.cold else "warm"
            files = f"{sf.ops_per_proc or 'the default'} file{'' if sf.ops_per_proc == 1 else 's'}"
            return _fail(f"envelopes {same[0].origin} and {e.origin} were both measured with {sf.block:,}-byte calls, "
                         f"{reads} reads, {files} per process, {sf.hogs} computing "
                         f"processes per host and calls {sf.gap_us} us apart: give one envelope per call size, cache "
                         "state, files per process, CPU load and gap between calls (mtcenvelope measure --block, "
                         "--drop-caches off, --young, --ops-per-proc, --hogs-per-host, --call-gap-us)")
        surfaces.append(sf)
    idle = [i for i, s in enumerate(surfaces) if not s.hogs and not s.gap_us and not s.young]
    if not idle:
        return _fail("every envelope given was measured beside computing processes (--hogs-per-host), with "
                     "computing between calls (--call-gap-us) or of young reads (--young): give one of idle hosts, "
                     "calls back to back and reads a while after their writes too; the others only say how much a "
                     "stage's CPU load, computing between calls or fresh files change its I/O")
    if idle[0]:           # the main envelope is an idle one: the first given
        envs.insert(0, envs.pop(idle[0]))
        surfaces.insert(0, surfaces.pop(idle[0]))
    for i in reversed(range(len(envs))):      # the ablation removed the refinements these served
        unused = _unused(surfaces[i])
        if unused:
            print(f"mtcpredict: envelope {envs[i].origin} was measured {unused}: no refinement uses such an "
                  "envelope since the ablation (docs/experiments/ablation.md); ignored", file=sys.stderr)
            del envs[i], surfaces[i]
    surface = surfaces[0]
    surface.others = surfaces[1:]
    env = envelope_source.combined(envs)
    if env.from_csv:
        print(f"mtcpredict: envelope {env.origin}: a CSV export carries no measurement conditions: taken as "
              "measured with 1 MiB calls, cold reads, idle hosts (the YAML export or the db says)", file=sys.stderr)
    if env.origin == "shipped":
        prov = env.meta.get("provenance", {})
        print(f"mtcpredict: no --envelope given: using the envelope shipped with mtcio ({prov.get('testbed', '?')}, "
              f"measured {prov.get('started', '?')[:10]}); measure your own with `mtcenvelope measure`",
              file=sys.stderr)

    measured, runs = {}, []
    if a.validate:
        from . import measured as ms
        try:
            measured, runs = _measure_all(ms, a.validate, a.files, wf)
        except ms.ValidationError as e:
            return _fail(str(e))
    variants = ("faithful", "refined") if a.variant == "all" else (a.variant,)
    try:   # the I/O concurrency is the model's (from the trace it was built from), never the validated run's
        preds = predict.predict_workflow(wf, surface, variants, refine, bootstrap=0)
        if a.out:     # the figures of the point predictions drawn by a child from now on, beside the intervals
            from .report import BOOTSTRAP, Drawing
            late = (["parity"] if measured else []) + (["whatif"] if axes else [])
            drawing.append(Drawing.start(wf, surface, preds, late, BOOTSTRAP * a.bootstrap * len(preds)))
        predict.add_intervals(preds, wf, surface, refine, bootstrap=a.bootstrap)
    except EnvelopeError as e:
        return _fail(f"envelope {env.origin}: {e}")
    calib = None
    if a.calibrate:
        from . import calibrate
        from . import measured as ms
        calib = calibrate.run(ms.parse_spec(a.validate)[0], runs, env.origin, preds)
    result = _result(wf, env, preds, measured, runs, calib, a.cell_rate)
    wi_preds = []
    if axes:
        try:
            result["what_if"] = whatif.run(wf, surface, axes, refine, keep=wi_preds, scaled=scaled)
        except whatif.WhatIfError as e:
            return _fail(str(e))
    if a.at:
        result["at"] = {"size": scaled[1], "hosts": scaled[2], "procs": scaled[3], "notes": at_notes,
                        "graph": a.tasks_from}
    warnings = _warnings(preds, surface) + _unsteady(envs, surfaces, a.cell_rate) + _busy_before(envs)
    said = set(warnings)     # a what-if beyond the envelope is said apart, once per line the main one has not
    warnings += [f"--what-if: {w}" for w in _warnings(wi_preds, surface) if w not in said]
    result["warnings"] = warnings
    if a.validate:
        missing = [st.name for st in wf.stages if st.name not in measured]
        if missing:
            warnings.append(f"--validate: no stage {', '.join(missing)} in run(s) {', '.join(runs)}: not compared")
        from mtcio.db.store import StoreError
        try:
            _store(a.validate, result, measured, runs, env)
        except (StoreError, OSError, sqlite3.Error) as e:
            return _fail(f"--validate: cannot store the predictions: {e}", 1)
    if a.out:
        try:
            _write_out(a.out, result, wf, surface, preds, measured, envs[0], drawing[0])
        except OSError as e:
            return _fail(f"--out {a.out}: {e.strerror or e}", 1)
    if a.json:
        json.dump(result, sys.stdout, indent=1, default=_jsonable)
        print()
    else:
        from .table import render
        print(render(result))
        for w in warnings:      # a name from the trace may hold undecodable bytes: \xNN, as other messages
            print(f"warning: {printable(w, 100000)}", file=sys.stderr)
    if a.at and not a.json:
        print(f"mtcpredict: {printable(wf.source['at'], 100000)}", file=sys.stderr)
        for n in at_notes:
            print(f"mtcpredict: note: {printable(n, 100000)}", file=sys.stderr)
    if a.out:
        print(f"mtcpredict: report in {os.path.join(a.out, 'report.html')}", file=sys.stderr)
    return 0


def _is_wfformat(path: str) -> bool:
    """A WfFormat instance rather than a workflow model: named *.json, or JSON (its first byte '{'); a model
    (`mtcprof model`'s YAML) never starts so."""
    if str(path).lower().endswith(".json"):
        return True
    try:
        with open(path, "rb") as f:
            return f.read(4096).lstrip()[:1] == b"{"
    except OSError:
        return False           # load() says why, in its words


def _unused(sf) -> str | None:
    """How an envelope no refinement uses was measured (None: it may be used)."""
    if sf.young:
        return "of young reads (mtcenvelope --young)"
    if sf.gap_us:
        return f"with calls {sf.gap_us} us apart (mtcenvelope --call-gap-us)"
    return None


def _instantiate(wf, scaled, at_items, tasks_from, force):
    """The model that scales instantiated at --at size=S hosts=C procs=P (ValueError naming what is wrong)."""
    from mtcio.db import scaling, taskgraph
    from mtcio.db.workflow_model import Workflow
    if scaled is None:
        raise ValueError(f"--at: {wf.run or 'this model'} does not scale: fit one from traced runs of two sizes "
                         "with `mtcprof model --run R1,R2 --size R1=S1,R2=S2` (or one run and its --size)")
    at = {}
    for item in at_items:
        k, sep, v = item.partition("=")
        if not sep or k not in ("size", "hosts", "procs") or k in at:
            raise ValueError(f"--at {item!r}: expected size=S, hosts=C, procs=P, each once")
        try:
            at[k] = float(v) if k == "size" else int(v)
        except ValueError:
            at[k] = -1
        if not at[k] > 0 or (k == "size" and at[k] == float("inf")):
            raise ValueError(f"--at {item!r}: {k} takes " + ("a number > 0" if k == "size" else "a whole number >= 1"))
    if "size" not in at:
        raise ValueError("--at: size=S is required (the workflow's size, in the unit of `mtcprof model --size`)")
    base, _, hosts, procs = scaled
    size, hosts, procs = at["size"], at.get("hosts", hosts), at.get("procs", procs)
    scaling.check_range(base.scaling, size, force)
    graph, reads, notes = None, None, []
    if tasks_from:
        listing = taskgraph.read(tasks_from)
        graph, notes = taskgraph.counts_of(listing, base.scaling)
        reads = taskgraph.reads_of(listing, base.scaling)
    stages, more = scaling.instantiate(base, size, hosts, procs, graph, reads)
    name = f"{base.run or 'model'} at size={size:g} hosts={hosts} procs={procs}"
    out = Workflow(stages=stages, run=None, source={"scaled_from": base.run, "at": name},
                   envelope=base.envelope)
    out.counts_exact = graph is not None
    return out, (base, size, hosts, procs), notes + more


def _check_what_if_sizes(axes, scaled, force):
    from mtcio.db import scaling
    for k, vals in axes:
        if k == "size":
            for op, v in vals:
                scaling.check_range(scaled[0].scaling, scaled[1] * v if op == "x" else v, force)


def _warnings(preds, surface):
    """One line per metric looked up outside its measured range, and one per host-count substitution."""
    from .surface import SIZELESS, fmt_size
    out, hosts = {}, {}
    for p in preds:
        for lk in p.lookups.values():
            if "not " in lk["note"] and "hosts" in lk["note"]:
                h, _ = surface.grid_for(lk["metric"], lk["hosts"], lk["k"])
                hosts.setdefault(lk["hosts"], set()).add(h)
            if lk["source"] == "extrapolated":
                out.setdefault(lk["metric"], set()).add((lk["size"], lk["k"]))
    lines = []
    for m, pts in sorted(out.items()):
        grids = [surface.grids[(m, h)] for h in surface.host_counts(m)]
        at = ", ".join(f"{fmt_size(s) + ' ' if m not in SIZELESS else ''}k={k:g}" for s, k in sorted(pts)[:6])
        more = f" and {len(pts) - 6} more" if len(pts) > 6 else ""
        sizes = (f"sizes {fmt_size(min(g.sizes[0] for g in grids))}-{fmt_size(max(g.sizes[-1] for g in grids))}, "
                 if m not in SIZELESS else "")
        lines.append(f"{m} extrapolated at {at}{more} (measured: {sizes}concurrency "
                     f"{min(g.ks[0] for g in grids)}-{max(g.ks[-1] for g in grids)})")
    small = sorted({p.stage for p in preds if any("-byte calls" in n for n in p.notes)})
    if small:
        lines.append(f"{', '.join(small)}: write calls far smaller than the envelope's {surface.block:,}-byte calls; "
                     "such writes can cost several times more (measure the envelope with --block)")
    for want, got in sorted(hosts.items()):
        lines.append(f"stages on {want} host{'s' if want != 1 else ''} looked up in the envelope's "
                     f"{', '.join(map(str, sorted(got)))}-host points at the same concurrency")
    return lines


def _unsteady(envs, surfaces, cell_rate):
    """One line per envelope where a tenth or more of the points swung > 2x between their repeats' quartiles."""
    from mtcio.envelope.stats import SWUNG_SHARE

    from .surface import SIZELESS, fmt_size
    lines = []
    for e, s in zip(envs, surfaces):
        bad, n, w = s.unsteady()
        if n and bad >= SWUNG_SHARE * n:
            m, size, k, h, lo, hi = w
            at = (f"{m}{' of ' + fmt_size(size) if m not in SIZELESS else ''} on {h} host{'s' if h > 1 else ''} x "
                  f"{k // h} process{'es' if k // h > 1 else ''}")
            lines.append(f"envelope {e.origin}: {bad} of {n} points swung more than 2x between their repeats' "
                         f"quartiles (widest {at}: {lo:.0f}-{hi:.0f} ops/s): the machine was not steady while it was "
                         "measured, and the look-ups carry its slow minutes; re-measure"
                         + (", or --cell-rate swung" if cell_rate == "mean" else ""))
    return lines


def _busy_before(envs):
    """One line per envelope whose sweep began on a busy machine (`mtcenvelope measure` looked and recorded it)."""
    lines = []
    for e in envs:
        m = e.machine_before
        if m.get("busy"):
            # waited_s counts the first look too: more than one look's time means it looked again
            again = m.get("waited_s", 0) > 1.5 * m.get("seconds", 0)
            waited = f", still after waiting {m['waited_s']:.0f} s" if again else ""
            lines.append(f"envelope {e.origin}: the machine was busy when its sweep began (CPUs {m.get('cpu', 0):.0%} "
                         f"busy, disks {m.get('disk', 0):.0%} busy, {m.get('written_Bps', 0) / 2**20:.1f} MiB/s "
                         f"written{waited}): its rates may carry that other work; re-measure on a quiet machine "
                         "(mtcenvelope measure --wait-quiet)")
    return lines


def _measure_all(ms, spec, files, wf):
    db, runs = ms.parse_spec(spec)
    names = [r.strip() for r in runs.split(",")] if runs else [ms.own_run(db, wf.run)]
    if "" in names:
        raise ms.ValidationError(f"--validate {spec}: an empty run name")
    twice = [r for i, r in enumerate(names) if r is not None and r in names[:i]]
    if twice:
        raise ms.ValidationError(f"--validate {spec}: run {twice[0]} named twice (repeats are different runs)")
    slots = {s.name: (s.procs_per_host or 1) for s in wf.stages}
    per_run = [ms.measure(db, r, files, slots) for r in names]
    names = [m.pop("_run") for m in per_run]
    # another workflow's run (other tile count, other stages' fan-out) would score the model against what it never
    # described, and feed that error to --calibrate
    other = [(r, st.name, m[st.name]["tasks"], st.tasks) for r, m in zip(names, per_run) for st in wf.stages
             if st.name in m and m[st.name].get("tasks") not in (None, st.tasks)]
    if other and getattr(wf, "counts_exact", True) is False:
        notes = [f"{r}: {got} {name} tasks, predicted from the fits {want}" for r, name, got, want in other]
        print("mtcpredict: --validate: task counts extrapolated from the fits differ from the run's: compared "
              "anyway (" + "; ".join(notes[:3]) + (" ..." if len(notes) > 3 else "") + ")", file=sys.stderr)
    elif other:
        r, name, got, want = other[0]
        more = f" (and {len(other) - 1} more stage-run(s))" if len(other) > 1 else ""
        raise ms.ValidationError(f"--validate {spec}: run {r} ran {got} {name} task(s), the model {want}{more}: "
                                 "validate against a run of the workflow the model describes (model that run "
                                 "with `mtcprof model` to predict it)")
    out = {}
    for st in wf.stages:
        vals = [m[st.name] for m in per_run if st.name in m]
        if not vals:
            continue
        ms_vals = [v["measured_s"] for v in vals]
        mean = sum(ms_vals) / len(ms_vals)
        first = dict(vals[0])
        first["measured_s"] = mean
        first["repeats"] = ms_vals
        first["noise"] = (max(ms_vals) - min(ms_vals)) / mean if len(ms_vals) > 1 and mean else None
        ks = [v["io_concurrency"] for v in vals if v.get("io_concurrency")]
        first["io_concurrency"] = sum(ks) / len(ks) if ks else None
        out[st.name] = first
    return out, names


def _result(wf, env, preds, measured, runs, calib, cell_rate):
    rows = []
    for d in [p.to_dict() for p in preds] + (calib or {}).get("rows", []):
        m = measured.get(d["stage"])
        if m:
            d["measured_s"] = m["measured_s"]
            d["error_pct"] = 100 * (d["total_s"] - m["measured_s"]) / m["measured_s"] if m["measured_s"] else None
            d["noise_pct"] = 100 * m["noise"] if m.get("noise") is not None else None
        rows.append(d)
    return {"workflow": wf.run or None, "envelope": {"name": env.name, "origin": env.origin,
                                                      "provenance": env.meta.get("provenance"), "cell_rate": cell_rate},
            "validated_runs": runs, "predictions": rows, "measured": measured,
            "calibration": {k: v for k, v in (calib or {}).items() if k != "rows"} or None}


def _store(spec, result, measured, runs, env):
    """predictions + validations rows in the --validate db, one set per variant and stage."""
    from mtcio.db import store

    from . import measured as ms
    db, _ = ms.parse_spec(spec)
    conn = store.connect(db)
    try:
        env_run = env.run if (env.db and os.path.samefile(env.db, db)) else None
        for d in result["predictions"]:
            m = measured.get(d["stage"])
            # names go to the db as the store keeps them (db_text: a non-UTF-8 name is a BLOB of its bytes); the
            # envelope is compared as inputs holds it, a JSON string, decoded by SQLite on both sides
            with conn:   # a prediction made again replaces the earlier one (same run, stage, variant, envelope)
                store.drop_prediction(conn, runs[0], d["stage"], d["variant"], env.origin)
            pid = store.add_prediction(
                conn, stage=d["stage"], variant=d["variant"], predicted_s=d["total_s"], run=runs[0],
                envelope_run=env_run, N=d["N"], C=d["C"], D=d["D"], D_N=d["D_N"], alpha=d["alpha"],
                inputs={"envelope": env.origin, "slots": d["slots"], "k": d["k"], "rounds": d["rounds"],
                        "lookups": d.get("lookups"), "refine": d.get("refine"), "interval": d.get("interval"),
                        "runs": runs},
                terms=d["terms"], bottleneck=d["dominant"])
            if m:
                store.add_validation(conn, pid, m["measured_s"], source=store.db_text(
                    f"max over hosts of per-slot traced I/O time; runs {','.join(runs)}"
                    + (f"; noise {m['noise']:.3f}" if m.get("noise") is not None else "")))
    finally:
        conn.close()


def _write_out(out, result, wf, surface, preds, measured, envelope=None, drawing=None):
    from mtcio.db.store import private_dir, write_private

    from .report import write_report
    private_dir(out)
    write_report(out, result, wf, surface, preds, measured, envelope, drawing)
    write_private(os.path.join(out, "prediction.json"), json.dumps(result, indent=1, default=_jsonable))
    if result.get("at"):       # the model instantiated at --at: what was predicted, field by field
        from mtcio.db.workflow_model import dump
        write_private(os.path.join(out, "model-at.yaml"), "# mtcio workflow model: "
                      + printable(wf.source["at"], 100000) + "\n" + dump(wf))   # a comment line: \xNN, no newline


def _jsonable(o):
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, (set, tuple)):
        return list(o)
    return str(o)


if __name__ == "__main__":
    sys.exit(main())
