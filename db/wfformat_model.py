"""A WfFormat instance (recorded or generated) as a workflow model: `mtcprof model --from-wfformat INSTANCE.json`
and `mtcpredict INSTANCE.json` (db/README.md, 'WfFormat').

What the instance says:
  * stages: the tasks grouped by category (a task without one: by its name, which WfFormat instances set to the
    program), ordered by the lowest DAG level of their tasks; N = the tasks of the category;
  * a task's inputs read (inputFiles) and outputs written (outputFiles), sizes from workflow.specification.files;
    an input read by one task of the stage is 1-to-1, by two or more N-to-1 (shared), as in a traced run;
  * bytes: the file sizes; where the execution section gives a task's readBytes (writtenBytes), its reads
    (writes) are those bytes, spread over its files in proportion to their sizes (reread_factor, rewrite_factor);
  * warm_fraction: the share of bytes read from files some task of the workflow writes.
What the command line says: C = min(--hosts, N) hosts, min(--slots, ceil(N / C)) tasks at once on a host.
The placement rule for α (PLACEMENT below): Gfarm stores a file on the host that writes it (write.local_fraction
1); each task runs on the host holding its largest 1-to-1 input (its own data); an input written by the same task
as that one (or that one itself) is then local, any other (written by another task, or a workflow input no task
writes, each taken on a host of its own) is local with probability 1 / C; tasks reading only shared inputs are
spread evenly, so a shared file is local to 1 / C of them.  α = expected local bytes / bytes.
What the instance does not say is taken from DEFAULTS and listed in the model (`x-defaults`) and on stderr.
"""
from __future__ import annotations

import math

from mtcio.db.wfformat import Instance

PLACEMENT = ("Gfarm writes locally (write.local_fraction 1); a task runs on the host holding its largest 1-to-1 "
             "input; an input of the same writer as that one is local, any other local with probability 1/C")

# What a WfFormat instance does not say, and the value the model takes for it.
DEFAULTS = {
    "bytes_per_call": (1 << 20, "bytes per read and write call: 1 MiB, the envelope's own call size "
                                "(mtcenvelope measure --block), so call_size changes nothing"),
    "reread_factor": (1.0, "each input byte read once (unless the task's readBytes says otherwise)"),
    "rewrite_factor": (1.0, "each output byte written once (unless the task's writtenBytes says otherwise)"),
    "opens_per_file": (1.0, "one open per file a task reads"),
    "stats_per_task": (0.0, "no metadata beyond each file's open (and create): no stats, unlinks, renames"),
    "failed_per_task": (0.0, "no failed lookups"),
    "seeks_end_per_task": (0.0, "no seeks to a file's end"),
}
# left null (the predictor's own default), said in the same list
UNKNOWN = ("io_concurrency (tasks in I/O at once)", "cpu_load and the CPU clocks", "young_fraction",
           "measured times (the instance's runtimes hold computing too)")


def _dist(values):
    from mtcio.db.workflow_model import Dist
    v = [float(x) for x in values]
    if not v:
        return None
    return Dist(min=_num(min(v)), mean=_num(sum(v) / len(v)), max=_num(max(v)))


def _num(x):
    x = float(x)
    return int(x) if x == int(x) and abs(x) < 2 ** 53 else round(x, 6)


def _quantiles(values):
    """Ten equal-weight points (bin midpoints) of the per-op bytes, each a value that occurred (inverted CDF), as
    `mtcprof model` gives them."""
    v = sorted(float(x) for x in values)
    if not v:
        return None
    return [_num(v[max(0, math.ceil((i + 0.5) / 10 * len(v)) - 1)]) for i in range(10)]


def _mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs) if xs else 0.0


def _stage_order(inst: Instance) -> list:
    level = inst.levels()
    first, low = {}, {}
    for i, t in enumerate(inst.tasks):
        first.setdefault(t.category, i)
        low[t.category] = min(low.get(t.category, level[t.id]), level[t.id])
    return sorted(first, key=lambda c: (low[c], first[c]))


def build(inst: Instance, hosts: int, slots: int):
    """(Workflow, notes): the model of `inst` on `hosts` hosts with `slots` task slots each; notes name what was
    taken by default."""
    from mtcio.db.workflow_model import (Metadata, Read, Shared, Stage, StageEnvelope, Workflow, Write)
    bpc = DEFAULTS["bytes_per_call"][0]
    writer = {}
    for t in inst.tasks:
        for f in t.outputs:
            writer.setdefault(f, t.id)
    size = lambda f: float(inst.sizes.get(f, 0))  # noqa: E731
    stages = []
    for cat in _stage_order(inst):
        ts = [t for t in inst.tasks if t.category == cat]
        n = len(ts)
        c = max(1, min(hosts, n))
        p = max(1, min(slots, -(-n // c)))
        readers: dict = {}
        for t in ts:
            for f in set(t.inputs) - set(t.outputs):
                readers[f] = readers.get(f, 0) + 1
        one = {"bytes": [], "files": [], "pairs": [], "local_b": 0.0, "local_f": 0.0, "size": 0.0, "warm": 0.0}
        sh = {"bytes": [], "files": [], "pairs": [], "local_b": 0.0, "local_f": 0.0, "size": 0.0, "warm": 0.0}
        wr = {"bytes": [], "files": [], "pairs": [], "size": 0.0}
        for t in ts:
            ins = [f for f in dict.fromkeys(t.inputs) if f not in t.outputs]
            outs = list(dict.fromkeys(t.outputs))
            in_size = sum(size(f) for f in ins)
            rf = t.read_bytes / in_size if t.read_bytes is not None and in_size > 0 else 1.0
            out_size = sum(size(f) for f in outs)
            wf_ = t.written_bytes / out_size if t.written_bytes is not None and out_size > 0 else 1.0
            # placement: with its largest 1-to-1 input (its own data; tasks reading only shared files are spread
            # evenly, so a shared file is on the host of 1/C of them); same writer as that input's: local
            own = [f for f in ins if readers[f] == 1]
            home = max(own, key=size) if own else None
            home_origin = writer.get(home, ("input", home)) if home is not None else ()
            for cls in (one, sh):          # this task's bytes and files of each class, summed below
                cls["bytes"].append(0.0)
                cls["files"].append(0)
            for f in ins:
                cls = one if readers[f] == 1 else sh
                b = size(f) * rf
                local = 1.0 if writer.get(f, ("input", f)) == home_origin else 1.0 / c
                cls["local_b"] += local * b
                cls["local_f"] += local
                cls["size"] += size(f)
                cls["pairs"].append(min(b, size(f)) if size(f) else b)
                if f in writer:
                    cls["warm"] += b
                cls["bytes"][-1] += b
                cls["files"][-1] += 1
            wr["bytes"].append(sum(size(f) * wf_ for f in outs))
            wr["files"].append(len(outs))
            wr["size"] += out_size
            wr["pairs"] += [min(size(f) * wf_, size(f)) if size(f) else size(f) * wf_ for f in outs]
        one_files = sorted({f for t in ts for f in t.inputs if readers.get(f) == 1 and f not in t.outputs})
        sh_files = sorted(f for f, k in readers.items() if k >= 2)
        out_files = sorted({f for t in ts for f in t.outputs})

        def alpha(cls, files):
            tot = sum(cls["bytes"])
            if not files:
                return None, None
            return (round(cls["local_b"] / tot, 4) if tot > 0 else round(cls["local_f"] / len(cls["pairs"]), 4),
                    round(cls["local_f"] / len(cls["pairs"]), 4))

        a1, a1f = alpha(one, one_files)
        as_, _ = alpha(sh, sh_files)
        read = Read(bytes_per_task=_dist(one["bytes"]), files_per_task=_num(_mean(one["files"])),
                    file_size=_dist(size(f) for f in one_files), alpha=a1, alpha_files=a1f,
                    reread_factor=round(sum(one["bytes"]) / one["size"], 4) if one["size"] > 0 else None,
                    bytes_per_call=bpc if one_files else None, op_size_quantiles=_quantiles(one["pairs"]),
                    warm_fraction=round(one["warm"] / sum(one["bytes"]), 4) if sum(one["bytes"]) > 0 else None,
                    opens_per_file=DEFAULTS["opens_per_file"][0] if one_files else None)
        shared = Shared(files=len(sh_files), bytes=int(sum(size(f) for f in sh_files)),
                        bytes_read_per_task=_num(_mean(sh["bytes"])), alpha=as_,
                        files_per_task=_num(_mean(sh["files"])) if sh_files else None,
                        bytes_per_call=bpc if sh_files else None, op_size_quantiles=_quantiles(sh["pairs"]),
                        warm_fraction=round(sh["warm"] / sum(sh["bytes"]), 4) if sum(sh["bytes"]) > 0 else None,
                        opens_per_file=DEFAULTS["opens_per_file"][0] if sh_files else None)
        write = Write(bytes_per_task=_dist(wr["bytes"]), files_per_task=_num(_mean(wr["files"])),
                      file_size=_dist(size(f) for f in out_files), local_fraction=1.0 if out_files else None,
                      bytes_per_call=bpc if out_files else None,
                      rewrite_factor=round(sum(wr["bytes"]) / wr["size"], 4) if wr["size"] > 0 else None,
                      op_size_quantiles=_quantiles(wr["pairs"]))
        opens = _mean(one["files"]) + _mean(sh["files"]) + _mean(wr["files"])
        md = Metadata(ops_per_task=_num(opens + DEFAULTS["stats_per_task"][0]),
                      creates_per_task=_num(_mean(wr["files"])), opens_per_task=_num(opens),
                      stats_per_task=DEFAULTS["stats_per_task"][0],
                      failed_per_task=DEFAULTS["failed_per_task"][0],
                      seeks_end_per_task=DEFAULTS["seeks_end_per_task"][0])
        env = StageEnvelope(read_file_size=int(read.file_size.mean) if read.file_size else None,
                            write_file_size=int(write.file_size.mean) if write.file_size else None,
                            shared_file_size=int(shared.bytes / shared.files) if shared.files else None)
        stages.append(Stage(name=cat, tasks=n, hosts=c, read=read, shared=shared, write=write, metadata=md,
                            concurrency=min(n, c * p), procs_per_host=p, tasks_max_per_host=-(-n // c),
                            envelope=env))
        from mtcio.db.workflow_model import Dist
        if read.bytes_per_task is None:
            read.bytes_per_task = Dist()
        if write.bytes_per_task is None:
            write.bytes_per_task = Dist()
    notes = [f"{k} = {_num(v)}: {why}" for k, (v, why) in DEFAULTS.items()] + \
        [f"{u}: not in the instance, left null (the predictor's default)" for u in UNKNOWN]
    wf = Workflow(stages=stages, run=None,
                  source={"wfformat": inst.path, "instance": inst.name, "schemaVersion": inst.version,
                          "hosts": hosts, "slots": slots, "placement": PLACEMENT})
    return wf, notes


def text(wf, notes: list) -> str:
    """The model's YAML with the defaults listed (`x-defaults`), checked by the loader before it is written."""
    import yaml
    from mtcio.db.model import HEADER
    from mtcio.db.workflow_model import from_dict, to_dict
    d = to_dict(wf)
    d["x-defaults"] = notes
    from_dict(d)
    return HEADER + yaml.safe_dump(d, sort_keys=False, default_flow_style=None, width=120)


def add_host_arguments(p, hosts_default_words: str) -> None:
    p.add_argument("--hosts", type=int, metavar="C",
                   help=f"with a WfFormat instance: hosts to run it on ({hosts_default_words})")
    p.add_argument("--slots", type=int, metavar="P",
                   help="with a WfFormat instance: tasks at once on one host (default 1: one task per host, the "
                        "round-based model's)")


def hosts_and_slots(inst: Instance, hosts, slots) -> tuple[int, int]:
    """--hosts (default: the machines the instance's execution lists, else DEFAULT_HOSTS) and --slots (default
    1); ValueError naming a bad one."""
    for name, v in (("--hosts", hosts), ("--slots", slots)):
        if v is not None and v < 1:
            raise ValueError(f"{name} {v}: give a count >= 1")
    return (hosts or len(set(inst.machines)) or DEFAULT_HOSTS), (slots or 1)


DEFAULT_HOSTS = 4      # the testbed's hosts
HOSTS_WORDS = f"default: the machines its execution section lists, else {DEFAULT_HOSTS}"
