"""How a workflow's stages scale with its size: fitted from traced runs, instantiated at a size never traced.

    shapes = [shape_of(store, run) for run in runs]          # per run: counts, and each stage's parts by source
    sc = fit(shapes, sizes)                                  # -> dict, the model's `scaling:` section
    stages, notes = instantiate(workflow, size=64, graph=None)   # the stages' shape fields at that size

A stage's reads are split by where each file came from (its *source*): the stage whose task wrote it, or, for
the workflow's inputs, their name shape (`raw/t#.fits`: the path in the workflow's folder, digits masked). A part
is *gathered* when its tasks read more than half the files of a source of two or more, counting the source's files
of the name shapes read (a one-task stage reading every tile, a stage reading every image of a fan-out but not
the area files beside them): it then grows with that source's count (tasks of the stage, input files of the
shape); every other part grows with the size. Counts (tasks per stage, input files per
shape) are fitted on the size, or read exactly from the target's task graph (db/taskgraph.py). Each fit:

    constant      the runs agree within 1 %
    proportional  one size traced: y = a x (a gathered part, a fan-out's task count, a one-task stage's bytes)
    linear        two sizes: y = a x + b through them (counts, gathered parts, files a one-task stage writes:
                  sums over the workflow's items); three or more: least squares, unless the power law fits
                  them better (relative residual)
    power         two sizes: y = a x^p through them (files of a fan-out's task or inputs: one item's each, and
                  their mean over a changing mix changes by a factor, never below zero)

Per-task behaviour (bytes per call, re-reads, op and metadata counts per file, CPU fields) stays as the
reference run (the largest) traced it. db/README.md lists every field's rule.
"""
from __future__ import annotations

import collections
import math
import os
import re
from dataclasses import dataclass, field

CONSTANT_TOL = 0.01     # runs agreeing within 1 % are one constant (a count or a byte total that did not grow)
GATHER_SHARE = 0.5      # a part reading more than half of its source's files reads "all of them": it grows with them
INPUT = "input:"        # source prefix of the workflow's own input files (read, written by no task of the run)

# per-task parts of a stage's reads, and the stage totals of its shared files: name -> model field it sums into
READ_PARTS = ("read.files", "read.bytes", "shared.files_per_task", "shared.bytes_per_task")
TOTAL_PARTS = ("shared.files", "shared.bytes")
WRITE_PARTS = ("write.files", "write.bytes")


class ScalingError(ValueError):
    """Runs or sizes a scaling model cannot be fitted from, or a target it cannot be instantiated at."""


def name_shape(name: str) -> str:
    """A task or file name with every run of digits masked: the tasks of one stage share one shape."""
    return re.sub(r"\d+", "#", name)


@dataclass
class RunShape:
    """What one traced run says about the workflow's shape."""
    run: str
    counts: dict = field(default_factory=dict)     # "tasks:STAGE" / "input:SHAPE" -> count
    names: dict = field(default_factory=dict)      # stage -> sorted task-name shapes
    parts: dict = field(default_factory=dict)      # stage -> part -> source -> value
    gathered: dict = field(default_factory=dict)   # stage -> part -> source -> bool


def _root(tf) -> str:
    """The workflow's folder in the traced file names: most tasks are named after a file they write (Rake's file
    tasks), so a written path ending in '/' + task name gives it; else the common folder of every file."""
    roots = collections.Counter(k[:-len(t)] for t, k in zip(tf["task"], tf["key"])
                                if isinstance(t, str) and t and isinstance(k, str) and k.endswith("/" + t))
    if roots:
        return roots.most_common(1)[0][0]
    keys = [k for k in tf["key"] if isinstance(k, str)]
    return os.path.commonpath(keys).rstrip("/") + "/" if keys else ""


def shape_of(s, run, scope: str = "auto") -> RunShape:
    """The counts and per-stage parts of one run in a Store (db/api.py)."""
    tasks = s.tasks(run)
    tf = s.task_files(run, scope)
    tasks = tasks[tasks["stage"].notna()]
    tf = tf[tf["stage"].notna()]
    out = RunShape(run=str(run))
    root = _root(tf)
    rel = {k: (k[len(root):] if k.startswith(root) else k) for k in tf["key"].unique()}
    written = tf[tf["written"]]
    producer = dict(zip(written["key"], written["stage"]))   # the stage whose task wrote it (the last one)
    src = tf["key"].map(lambda k: producer.get(k) or INPUT + name_shape(rel[k]))
    tf = tf.assign(source=src, shape=tf["key"].map(lambda k: name_shape(rel[k])))
    made = tf[tf["written"]].drop_duplicates("key").groupby(["source", "shape"]).size().to_dict()
    for st, t in tasks.groupby("stage"):
        out.counts["tasks:" + st] = len(t)
        out.names[st] = sorted({name_shape(n) for n in t["name"]})
    inputs = tf[~tf["key"].isin(producer)].drop_duplicates("key")
    for shape, g in inputs.groupby("source"):
        out.counts[shape] = len(g)
    rd = tf[tf["read"] & ~tf["written"]]
    for st, t in tasks.groupby("stage"):
        n = len(t)
        mine = rd[rd["stage"] == st]
        parts, gathered = {}, {}
        for part, cls in (("read", "1-1"), ("shared", "N-1")):
            sel = mine[mine["read_class"] == cls]
            fk, bk = ("read.files", "read.bytes") if part == "read" else ("shared.files_per_task",
                                                                           "shared.bytes_per_task")
            for source, g in sel.groupby("source"):
                files = g.groupby("task_id")["key"].nunique().sum() / n
                parts.setdefault(fk, {})[source] = files
                parts.setdefault(bk, {})[source] = float(g["bytes_read"].sum()) / n
                # the source's files of the shapes read (a stage's images, not its area files beside them)
                whole = sum(made.get((source, sh), 0) for sh in g["shape"].unique()) \
                    if not source.startswith(INPUT) else out.counts.get(source, 0)
                per_task = whole >= 2 and files > GATHER_SHARE * whole
                gathered.setdefault(fk, {})[source] = gathered.setdefault(bk, {})[source] = per_task
                if part == "shared":
                    uniq = g.drop_duplicates("key")
                    parts.setdefault("shared.files", {})[source] = float(len(uniq))
                    parts.setdefault("shared.bytes", {})[source] = float(uniq["size"].fillna(0).sum())
                    coll = whole >= 2 and len(uniq) > GATHER_SHARE * whole
                    gathered.setdefault("shared.files", {})[source] = coll
                    gathered.setdefault("shared.bytes", {})[source] = coll
        w = tf[(tf["stage"] == st) & tf["written"]]
        parts["write.files"] = {"": w.groupby("task_id")["key"].nunique().sum() / n}
        parts["write.bytes"] = {"": float(w["bytes_written"].sum()) / n}
        out.parts[st], out.gathered[st] = parts, gathered
    return out


# ---- fits ----------------------------------------------------------------------------------------------------------

def fit_values(xs, ys, one_size: str = "constant", two_sizes: str = "linear") -> dict:
    """The form through the points (x = a size or a count, y = a value), its coefficients and its residual (RMS of
    the relative errors at the points). `one_size`: the form when every point has the same x; `two_sizes`: the
    form through two (linear, or power for a per-task mean that is no count of anything: it changes by a factor
    and never crosses zero, as a mean over a changing mix of sizes)."""
    pts = [[_num(x), _num(y)] for x, y in zip(xs, ys)]
    ys_ = [float(y) for y in ys]
    big = max(abs(y) for y in ys_) if ys_ else 0.0
    if len(set(xs)) == 1:             # repeats of one size: their mean, proportional or constant
        x = float(xs[0])
        mean = sum(ys_) / len(ys_)
        f = {"form": "proportional", "a": _num(mean / x)} if one_size == "proportional" and x > 0 and big else \
            {"form": "constant", "a": _num(mean)}
    elif big == 0 or max(ys_) - min(ys_) <= CONSTANT_TOL * big:
        f = {"form": "constant", "a": _num(sum(ys_) / len(ys_))}
    elif len(set(xs)) == 2 and two_sizes == "power" and min(xs) > 0 and min(ys_) > 0:
        f = _power(xs, ys_)
    else:
        f = _least_squares(xs, ys_)
        if len(set(xs)) >= 3 and min(xs) > 0 and min(ys_) > 0:
            p = _power(xs, ys_)
            if _residual(p, xs, ys_) < _residual(f, xs, ys_):
                f = p
    f["residual"] = _num(round(_residual(f, xs, ys_), 4))
    f["points"] = pts
    return f


def _least_squares(xs, ys) -> dict:
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    a = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return {"form": "linear", "a": _num(a), "b": _num(my - a * mx)}


def _power(xs, ys) -> dict:
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    f = _least_squares(lx, ly)
    return {"form": "power", "a": _num(math.exp(f["b"])), "p": _num(f["a"])}


def evaluate(f: dict, x: float) -> float:
    """The fitted value at x (never below 0: a count or a byte total)."""
    form = f["form"]
    if form == "constant":
        v = f["a"]
    elif form == "proportional":
        v = f["a"] * x
    elif form == "linear":
        v = f["a"] * x + f["b"]
    else:
        v = f["a"] * x ** f["p"]
    return max(0.0, float(v))


def _residual(f, xs, ys) -> float:
    errs = [(evaluate(f, x) - y) / y for x, y in zip(xs, ys) if y]
    return math.sqrt(sum(e * e for e in errs) / len(errs)) if errs else 0.0


def _num(x):
    x = float(x)
    return int(x) if x == int(x) and abs(x) < 2 ** 53 else round(x, 6)


def fit(shapes: list[RunShape], sizes: list[float], hosts: list[int], procs: list[int]) -> dict:
    """The `scaling:` section of a workflow model from the shapes of traced runs and their sizes (same order).
    The last run of the largest size is the reference: the model's stages are its own."""
    if len(shapes) != len(sizes) or not shapes:
        raise ScalingError("one size per run")
    names = [set(x.names) for x in shapes]
    if any(n != names[0] for n in names):
        diff = sorted(set.union(*names) - set.intersection(*names))
        raise ScalingError(f"the runs do not have the same stages (only in some: {', '.join(diff)})")
    ref = max(range(len(shapes)), key=lambda i: (sizes[i], i))
    one = len(set(sizes)) == 1
    counts = {}
    for key in sorted(set().union(*[x.counts for x in shapes])):
        ys = [x.counts.get(key, 0) for x in shapes]
        fan_out = max(ys) > 1 or key.startswith(INPUT)
        counts[key] = fit_values(sizes, ys, "proportional" if fan_out else "constant")
    stages = {}
    for st in shapes[ref].names:
        single = all(x.counts.get("tasks:" + st, 0) == 1 for x in shapes)
        fields_ = {}
        for part in READ_PARTS + TOTAL_PARTS + WRITE_PARTS:
            sources = sorted(set().union(*[x.parts[st].get(part, {}) for x in shapes]))
            terms = []
            for source in sources:
                ys = [x.parts[st].get(part, {}).get(source, 0.0) for x in shapes]
                g = shapes[ref].gathered[st].get(part, {}).get(source, False)
                driver = (source if source.startswith(INPUT) else "tasks:" + source) if g else "size"
                xs = [x.counts.get(driver, 0) for x in shapes] if g else sizes
                # one size traced: a gathered part grows with its source; a one-task stage's bytes with the size
                grow = g or (single and part.endswith("bytes"))
                # through two sizes: a file of a one-task stage sums over the workflow's items (a table, a
                # mosaic: a fixed part plus a part per item), so do gathered parts; a file of a fan-out task or an
                # input is one item's, and a mean over a changing mix of them changes by a factor
                src = st if part in WRITE_PARTS else source
                aggregate = g or (not src.startswith(INPUT) and
                                  all(x.counts.get("tasks:" + src, 0) == 1 for x in shapes))
                term = fit_values(xs, ys, "proportional" if grow else "constant",
                                  "linear" if aggregate else "power")
                terms.append({"source": source, "driver": driver, **term})
            if terms:
                fields_[part] = terms
        stages[st] = {"task_names": shapes[ref].names[st], "fields": fields_}
    return {"runs": [x.run for x in shapes], "sizes": [_num(v) for v in sizes], "hosts": hosts, "procs": procs,
            "reference": shapes[ref].run, "one_size": one, "counts": counts, "stages": stages}


def size_range(sc: dict) -> tuple[float, float]:
    return min(sc["sizes"]), max(sc["sizes"])


# ---- instantiation -------------------------------------------------------------------------------------------------

MAX_EXTRAPOLATION = 8.0    # a size beyond 8x the traced range is refused without --force (the bound)


def check_range(sc: dict, size: float, force: bool = False) -> None:
    lo, hi = size_range(sc)
    if not force and not lo / MAX_EXTRAPOLATION <= size <= hi * MAX_EXTRAPOLATION:
        raise ScalingError(f"size {size:g} is more than {MAX_EXTRAPOLATION:g}x outside the traced sizes "
                           f"({_range_text(sc)}); --force to predict it anyway")


def _range_text(sc) -> str:
    lo, hi = size_range(sc)
    return f"{lo:g}" if lo == hi else f"{lo:g} to {hi:g}"


def _sum(terms, at: dict, size: float, share: dict | None = None) -> float:
    """The terms' sum at this size; a gathered term whose source is in `share` ({source: (listed, fitted)} files
    per task) times listed / fitted."""
    total = 0.0
    for t in terms:
        v = evaluate(t, size if t["driver"] == "size" else at.get(t["driver"], 0.0))
        if share and t["driver"] != "size" and t["source"] in share:
            listed, fitted = share[t["source"]]
            v *= listed / fitted
        total += v
    return total


def _listed_share(fields: dict, listed: dict, at: dict, size: float) -> dict:
    """{source: (files per task the graph lists, files per task the gathered fits give)} for the sources of a
    stage's gathered read parts the graph lists."""
    out = {}
    for source, n in listed.items():
        terms = [t for k in ("read.files", "shared.files_per_task") for t in fields.get(k, ())
                 if t["source"] == source and t["driver"] != "size"]
        fitted = _sum(terms, at, size)
        if terms and fitted > 0:
            out[source] = (n, fitted)
    return out


def _at_reference(terms, i: int) -> float:
    return sum(t["points"][i][1] for t in terms)


def _scale(d, ratio):
    if d is None:
        return None
    from mtcio.db.workflow_model import Dist
    return Dist(min=_num(d.min * ratio), mean=_num(d.mean * ratio), max=_num(d.max * ratio))


def _ratio(new: float, old: float) -> float:
    return new / old if old > 0 else 1.0


def balls_in_bins_max(n: int, c: int) -> float:
    """Tasks on the busiest of c hosts when n tasks land on hosts at random: the expected largest of c bins,
    n/c + sqrt(2 (n/c)(1 - 1/c) ln c) (Raab and Steger 1998, heavily loaded case)."""
    if c <= 1:
        return float(n)
    m = n / c
    return m + math.sqrt(2 * m * (1 - 1 / c) * math.log(c))


def busiest_host(n: int, c: int, n0: int, c0: int, max0: int | None) -> int:
    """Tasks on the busiest of c hosts: an even share plus the traced excess over an even share, in units of what
    random placement adds (balls in bins): placement by the data is as uneven as it was (traced: max0 of n0 on
    c0; Montage's mDiff on 2 hosts ran 11 of 20 where random gives 12.6: 0.38 of the way)."""
    even = math.ceil(n / c)
    if c <= 1 or max0 is None or c0 <= 1:
        return min(n, even)
    even0 = math.ceil(n0 / c0)
    room0 = balls_in_bins_max(n0, c0) - even0
    share = min(1.0, max(0.0, (max0 - even0) / room0)) if room0 > 0 else 0.0
    return min(n, math.ceil(even + share * max(0.0, balls_in_bins_max(n, c) - even) - 1e-9))


def local_share(alpha0: float | None, c0: int, c: int) -> float | None:
    """α at c hosts from α0 at c0: placement follows the data, so a task's local share is its inputs' share on
    its busiest host; the part above an even spread (1/c) is the chance its inputs share a host, which falls as
    (1 - 1/c): 1/c + (α0 - 1/c0)(1 - 1/c)/(1 - 1/c0). Exact for one input (1) or two on random hosts
    ((1 + 1/c)/2), and for a gather of inputs spread evenly (1/c)."""
    if alpha0 is None or c0 <= 1:
        return alpha0
    if c <= 1:
        return 1.0
    a = 1 / c + (alpha0 - 1 / c0) * (1 - 1 / c) / (1 - 1 / c0)
    return round(min(1.0, max(0.0, a)), 4)


def _density(i0: float, q0: int) -> float:
    """The share d of a task's time in I/O that gives i0 tasks in I/O while any is, with q0 running: i0 =
    q0 d / (1 - (1 - d)^q0), solved by bisection (increasing in d, from 1 at d -> 0 to q0 at d = 1)."""
    lo, hi = 1e-9, 1.0
    for _ in range(60):
        d = (lo + hi) / 2
        if _busy(d, q0) < i0:
            lo = d
        else:
            hi = d
    return (lo + hi) / 2


def _busy(d: float, q: int) -> float:
    return q * d / (1 - (1 - d) ** q) if q > 1 else 1.0


def io_concurrency(i0: float | None, q0: int | None, q: int) -> float | None:
    """Mean tasks in I/O while any is, at q tasks running, from i0 at q0: each task in I/O a share d of its time
    (the traced I/O density, solved from i0), independently: q d / (1 - (1 - d)^q).
    On the testbed, whose hosts share 2 vCPUs, it runs high: mDiff's 2.55 at 4 running gave 5.0 at 8 and 3.8 at 6,
    where 3.0-3.5 and 2.2 were traced; bounding it by the CPUs (i0 there) ran as far low in time predicted
    (docs/experiments/scale-predict-dev.md)."""
    if i0 is None or not q0:
        return i0
    if q0 <= 1:
        return round(min(float(q), i0 * q), 4)
    return round(max(1.0, _busy(_density(min(i0, q0), q0), q)), 4)


def instantiate(wf, size: float, hosts: int | None = None, procs: int | None = None,
                graph: dict | None = None, reads: dict | None = None) -> tuple[list, list[str]]:
    """The stages of `wf` (a model with a scaling section) at `size` on `hosts` hosts with `procs` tasks at once
    per host, and the notes to show: what was assumed, extrapolated, or taken from the graph. `graph`: exact
    counts ("tasks:STAGE", "input:SHAPE") from the target's task graph; `reads`: the files its tasks list per
    stage and source (db/taskgraph.reads_of), which set a gathered part's files per task where the stage's task
    count is not the traced one (a gather done by one task traced, by several in the target: each reads its
    share, not the whole)."""
    import copy

    from mtcio.db.workflow_model import Measured, StageEnvelope
    sc = wf.scaling
    ri = sc["runs"].index(sc["reference"])
    c0 = sc["hosts"][ri]
    p0 = sc["procs"][ri]
    hosts = hosts or c0
    procs = procs or p0
    notes = []
    fitted = {k: evaluate(f, size) for k, f in sc["counts"].items()}
    at = dict(fitted)
    if graph:
        at.update({k: v for k, v in graph.items() if k in at})
        off = sorted(((abs(fitted[k] - v) / v, k) for k, v in graph.items() if k in fitted and v), reverse=True)
        if off:
            notes.append("the fits alone are off the graph's counts by " +
                         ", ".join(f"{k.split(':', 1)[1]} {fitted[k]:.0f} for {graph[k]:g} ({e:+.0%})"
                                   .replace("+", "") for e, k in off[:3] if e >= 0.005) if off[0][0] >= 0.005 else
                         "the fits alone give the graph's counts")
        missing = [k for k in sc["counts"] if k.startswith("tasks:") and k not in graph]
        if missing:
            notes.append(f"the graph has no task of {', '.join(k[6:] for k in missing)}: counted from the fits")
    else:
        notes.append(f"counts (tasks per stage, input files) extrapolated from the fits at size {size:g} "
                     f"(traced: {_range_text(sc)}); --tasks-from gives them exactly")
    if sc["one_size"]:
        notes.append("one size traced: fan-out stages' task counts and gathered inputs taken proportional to the "
                     "size, one-task stages' bytes too, every other per-task part constant")
    out = []
    for ref in wf.stages:
        spec = sc["stages"].get(ref.name)
        s = copy.deepcopy(ref)
        if spec is None:
            out.append(s)
            continue
        fl = spec["fields"]
        n = max(1, int(round(at.get("tasks:" + ref.name, ref.tasks))))
        share = _listed_share(fl, (reads or {}).get(ref.name, {}), at, size) if n != ref.tasks else {}
        for source, (listed, fitted) in sorted(share.items()):
            notes.append(f"{ref.name}: a task reads {listed:.3g} files of {source} as the graph lists them (the fit "
                         f"of the traced gather: {fitted:.3g}), its {n} tasks sharing them")
        val = {k: _sum(v, at, size, share if k in READ_PARTS else None) for k, v in fl.items()}
        was = {k: _at_reference(v, ri) for k, v in fl.items()}
        g = lambda k: val.get(k, 0.0)        # noqa: E731
        w = lambda k: was.get(k, 0.0)        # noqa: E731
        s.tasks = n
        # 1-to-1 reads
        rb, rf = _ratio(g("read.bytes"), w("read.bytes")), g("read.files")
        per_file = _ratio(g("read.bytes") / rf if rf else 0, w("read.bytes") / w("read.files") if w("read.files")
                          else 0)
        s.read.bytes_per_task = _scale(ref.read.bytes_per_task, rb)
        s.read.files_per_task = _num(rf)
        s.read.file_size = _scale(ref.read.file_size, per_file)
        s.read.op_size_quantiles = _scaled_list(ref.read.op_size_quantiles, per_file)
        # shared (N-to-1) reads
        sf = g("shared.files_per_task")
        s.shared.files = int(round(g("shared.files")))
        s.shared.bytes = int(round(g("shared.bytes")))
        s.shared.bytes_read_per_task = _num(g("shared.bytes_per_task"))
        s.shared.files_per_task = _num(sf) if ref.shared.files_per_task is not None or sf else None
        sh_file = _ratio(s.shared.bytes / s.shared.files if s.shared.files else 0,
                         w("shared.bytes") / w("shared.files") if w("shared.files") else 0)
        s.shared.op_size_quantiles = _scaled_list(ref.shared.op_size_quantiles, sh_file)
        # writes
        wb, wf_ = _ratio(g("write.bytes"), w("write.bytes")), g("write.files")
        w_file = _ratio(g("write.bytes") / wf_ if wf_ else 0,
                        w("write.bytes") / w("write.files") if w("write.files") else 0)
        s.write.bytes_per_task = _scale(ref.write.bytes_per_task, wb)
        s.write.files_per_task = _num(wf_)
        s.write.file_size = _scale(ref.write.file_size, w_file)
        s.write.op_size_quantiles = _scaled_list(ref.write.op_size_quantiles, w_file)
        # metadata per file as traced: a task opening 4x the files makes 4x the calls
        files = _ratio(rf + sf + wf_, w("read.files") + w("shared.files_per_task") + w("write.files"))
        m = s.metadata
        for k in ("ops_per_task", "creates_per_task", "opens_per_task", "stats_per_task", "failed_per_task",
                  "seeks_end_per_task"):
            if getattr(m, k) is not None:
                setattr(m, k, _num(getattr(m, k) * files))
        s.envelope = StageEnvelope(
            read_file_size=int(s.read.file_size.mean) if s.read.file_size else None,
            write_file_size=int(s.write.file_size.mean) if s.write.file_size else None,
            shared_file_size=int(s.shared.bytes / s.shared.files) if s.shared.files else None)
        _place(s, ref, hosts, procs, c0)
        s.measured = Measured()
        out.append(s)
    return out, notes


def _scaled_list(q, ratio):
    return None if q is None else [_num(x * ratio) for x in q]


def _place(s, ref, hosts: int, procs: int, c0: int) -> None:
    """The host-dependent fields at `hosts` hosts and `procs` tasks at once per host, by rule (never copied from
    the traced host count): slots, the busiest host's tasks, α under placement, the I/O concurrency."""
    n = s.tasks
    c = min(hosts, n)
    s.hosts = c
    s.procs_per_host = min(procs, math.ceil(n / c))
    s.concurrency = min(n, c * procs)
    s.tasks_max_per_host = busiest_host(n, c, ref.tasks, ref.hosts, ref.tasks_max_per_host)
    # the inputs are spread over the workflow's hosts, not the stage's: a one-task stage ran on one host of c0
    s.read.alpha = local_share(ref.read.alpha, c0, hosts)
    s.read.alpha_files = local_share(ref.read.alpha_files, c0, hosts)
    s.shared.alpha = local_share(ref.shared.alpha, c0, hosts)
    i = io_concurrency(ref.io_concurrency, ref.concurrency, s.concurrency)
    if ref.io_concurrency_served is not None and ref.io_concurrency:
        s.io_concurrency_served = round(max(1.0, ref.io_concurrency_served * i / ref.io_concurrency), 4)
    s.io_concurrency = i
