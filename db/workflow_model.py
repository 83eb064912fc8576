"""The workflow model: per-stage parameters of the prediction formulas, as YAML.

ONE schema, ONE loader: `mtcprof model` writes it (db/model.py), `mtcpredict` reads it with `load()`.

    wf = load("workflow.yaml")          # -> Workflow; ModelError naming the field on any problem
    wf.stages[0].tasks, .hosts, .read.bytes_per_task.mean (D), .read.alpha, .shared.bytes (D_N) ...
    text = dump(wf)                      # YAML text; save(wf, path)

Schema (version 1; `?` = optional, may be null; sizes in bytes, times in seconds; db/README.md has the full text):

    mtcio_workflow: 1
    run: NAME?                         # trace run it was measured from
    source: {db: PATH?, created: ISO-8601?}?
    envelope: {run: NAME?}?            # envelope run to predict with (the predictor may be told another)
    stages:                            # in execution order
      - name: STR
        tasks: INT >= 1                # N
        hosts: INT >= 1                # C
        concurrency: INT >= 1?         # most tasks of the stage running at once (whole run)
        procs_per_host: INT >= 1?      # most tasks of the stage running at once on one host
        io_concurrency: FLOAT >= 1?    # mean tasks in I/O at once while any is (db/overlap.py)
        io_concurrency_served: FLOAT?  # the same of the I/O time less its CPU wait (io_cpu_wait): the load on Gfarm
        tasks_max_per_host: INT?       # tasks the busiest host ran (placement balance: N / hosts when even)
        files_per_process: FLOAT?      # data files one process opens in turn (mean over processes moving data)
        cpu_load: FLOAT?               # tasks computing on a host beside the stage's I/O (db/overlap.py; I/O-time mean)
        compute_per_call_us: FLOAT?    # a task's time outside I/O per file-system call, us (median over tasks)
        idle_before_ms: FLOAT?         # the host's I/O idle before a task's first open, ms (median over tasks)
        machine_busy: FLOAT in [0,1]?  # share of the machine's CPU time busy while the stage ran (shim cpu_clock;
                                       # per host from its first process's start to its last's end, mean by tasks)
        cpu_wait: FLOAT in [0,1]?      # share of the stage's processes' time ready to run without a CPU (shim sched:
                                       # run-queue wait over process life; an I/O call's time holds the wait after it)
        io_cpu_wait: FLOAT in [0,1]?   # share of the stage's traced I/O time waiting for a CPU (estimated from the
                                       # same clocks: I/O time not asleep x the share of wanted CPU time waited)
        io_cpu_wait_measured: FLOAT in [0,1]?   # the same as the shim timed it around each call (MTCPROF_CPU_WAIT=1)
        read:                          # 1-to-1 reads (file read by exactly one task of the stage)
          bytes_per_task: {min, mean, max}   # D (mean); bytes actually read per task
          files_per_task: FLOAT
          file_size: {min, mean, max}?       # size of the 1-to-1 input files
          alpha: FLOAT in [0,1]?             # local fraction of 1-to-1 bytes read (null: unknown)
          alpha_files: FLOAT in [0,1]?       # same, by task-file pairs
          reread_factor: FLOAT?              # bytes read / file size over task-file pairs (1 = read once)
          bytes_per_call: FLOAT?             # mean bytes per read system call (stdio: buffer-sized)
          op_size_quantiles: [FLOAT, ..]?    # bytes per op (task x file, at most the file) at equal-weight points of
                                             # their distribution (mtcprof model: ten, sizes that occurred)
          warm_fraction: FLOAT in [0,1]?     # of these bytes, the share read from files the run wrote
          young_fraction: FLOAT in [0,1]?    # the share read < 1 s after a task wrote the file on the reader's host
          opens_per_file: FLOAT?             # opens of one of these files by one task (mean over task-file pairs)
        shared:                        # N-to-1 reads (file read by >= 2 tasks of the stage)
          files: INT                         # count of shared files
          bytes: INT                         # D_N: summed size of the shared files
          bytes_read_per_task: FLOAT         # mean bytes of shared files read per task
          alpha: FLOAT in [0,1]?
          files_per_task: FLOAT?             # mean shared files read per task (null: bytes_read_per_task / mean size)
          bytes_per_call: FLOAT?             # mean bytes per read system call (stdio: buffer-sized)
          op_size_quantiles: [FLOAT, ..]?
          warm_fraction: FLOAT in [0,1]?
          young_fraction: FLOAT in [0,1]?
          opens_per_file: FLOAT?
        write:
          bytes_per_task: {min, mean, max}   # D of the write formulas
          files_per_task: FLOAT
          file_size: {min, mean, max}?
          local_fraction: FLOAT in [0,1]?    # written bytes that landed on the writer's host
          bytes_per_call: FLOAT?             # mean bytes per write system call (stdio: buffer-sized)
          rewrite_factor: FLOAT?             # bytes written / file size over task-file pairs (1 = written once)
          op_size_quantiles: [FLOAT, ..]?
          redirected_fraction: FLOAT in [0,1]?   # of the task-file pairs written, the share whose bytes all went
                                             # through fds the writers inherited (a shell's `>` created the file)
          left_open_fraction: FLOAT in [0,1]?    # the share written through fds the task opened and left for its
                                             # exit to close (a stdio stream never fclosed)
        metadata:
          ops_per_task: FLOAT                # opens + stats + unlinks + renames + mkdirs + rmdirs + truncates
          creates_per_task: FLOAT
          opens_per_task: FLOAT?
          stats_per_task: FLOAT?
          stats_cached_fraction: FLOAT in [0,1]?   # of the stats, the share the client's attribute cache served
          failed_per_task: FLOAT?            # calls on the stage's files that failed (a name not found)
          seeks_end_per_task: FLOAT?         # seeks to a file's end (on gfarm2fs each asks for the size)
        measured:                      # what the trace saw (for validation); all optional
          span_s: FLOAT?                     # first task start to last task end
          io_s_mean: FLOAT?                  # per task time inside I/O calls
          io_s_max: FLOAT?
          io_s_total: FLOAT?
          read_s_total: FLOAT?
          write_s_total: FLOAT?
          meta_s_total: FLOAT?               # open + close + stat/unlink/... time
        envelope: {read_file_size: INT?, write_file_size: INT?, shared_file_size: INT?}?
                                       # file sizes to look the envelope up at (default: the means above)
Unknown keys are an error (typos must not silently fall back to defaults), except under `x-*` names.
Also refused: duplicate keys, hosts > tasks, explicit tags other than YAML's plain ones.

load() reads untrusted files within bounds (MAX_BYTES, MAX_DEPTH, MAX_NODES values added by aliases, so a "billion
laughs" document is refused after reading it once; db/bounded_yaml.py) and raises only ModelError, whose message
names the file, the line and the field: "wf.yaml: line 12: stages[0].read.alpha: must be <= 1, got 1.5".
"""
from __future__ import annotations

import math
import os
import re
import stat
from dataclasses import dataclass, field, fields
from typing import Any

import yaml

from mtcio.db import bounded_yaml

SCHEMA_VERSION = 1
MAX_BYTES = 32 << 20         # ~20,000 stages as `mtcprof model` writes them; larger files are refused unread
MAX_DEPTH = 64               # nesting of mappings and sequences (the schema needs 5)
MAX_NODES = 200_000          # values aliases may add to the document (each alias counts what it repeats)
INT_MAX = (1 << 63) - 1      # what SQLite and the predictor's arithmetic hold exactly


class ModelError(ValueError):
    """A workflow model that does not follow the schema; the message names the field (e.g. stages[1].read.alpha)."""


@dataclass
class Dist:
    min: float = 0.0
    mean: float = 0.0
    max: float = 0.0


@dataclass
class Read:
    bytes_per_task: Dist = field(default_factory=Dist)
    files_per_task: float = 0.0
    file_size: Dist | None = None
    alpha: float | None = None
    alpha_files: float | None = None
    reread_factor: float | None = None
    bytes_per_call: float | None = None
    op_size_quantiles: list | None = None
    warm_fraction: float | None = None
    young_fraction: float | None = None
    opens_per_file: float | None = None


@dataclass
class Shared:
    files: int = 0
    bytes: int = 0
    bytes_read_per_task: float = 0.0
    alpha: float | None = None
    files_per_task: float | None = None
    bytes_per_call: float | None = None
    op_size_quantiles: list | None = None
    warm_fraction: float | None = None
    young_fraction: float | None = None
    opens_per_file: float | None = None


@dataclass
class Write:
    bytes_per_task: Dist = field(default_factory=Dist)
    files_per_task: float = 0.0
    file_size: Dist | None = None
    local_fraction: float | None = None
    bytes_per_call: float | None = None
    rewrite_factor: float | None = None
    op_size_quantiles: list | None = None
    redirected_fraction: float | None = None
    left_open_fraction: float | None = None


@dataclass
class Metadata:
    ops_per_task: float = 0.0
    creates_per_task: float = 0.0
    opens_per_task: float | None = None
    stats_per_task: float | None = None
    stats_cached_fraction: float | None = None
    failed_per_task: float | None = None
    seeks_end_per_task: float | None = None


@dataclass
class Measured:
    span_s: float | None = None
    io_s_mean: float | None = None
    io_s_max: float | None = None
    io_s_total: float | None = None
    read_s_total: float | None = None
    write_s_total: float | None = None
    meta_s_total: float | None = None


@dataclass
class StageEnvelope:
    read_file_size: int | None = None
    write_file_size: int | None = None
    shared_file_size: int | None = None


@dataclass
class Stage:
    name: str
    tasks: int
    hosts: int
    read: Read = field(default_factory=Read)
    shared: Shared = field(default_factory=Shared)
    write: Write = field(default_factory=Write)
    metadata: Metadata = field(default_factory=Metadata)
    concurrency: int | None = None
    procs_per_host: int | None = None
    io_concurrency: float | None = None
    io_concurrency_served: float | None = None
    tasks_max_per_host: int | None = None
    files_per_process: float | None = None
    cpu_load: float | None = None
    compute_per_call_us: float | None = None
    idle_before_ms: float | None = None
    machine_busy: float | None = None
    cpu_wait: float | None = None
    io_cpu_wait: float | None = None
    io_cpu_wait_measured: float | None = None
    measured: Measured = field(default_factory=Measured)
    envelope: StageEnvelope | None = None

    @property
    def rounds(self) -> int:
        """ceil(N / C): the number of rounds of C tasks (equations (1)-(3))."""
        return -(-self.tasks // self.hosts)


@dataclass
class Workflow:
    stages: list[Stage]
    run: str | None = None
    source: dict | None = None
    envelope: dict | None = None
    mtcio_workflow: int = SCHEMA_VERSION
    scaling: dict | None = None      # how the stages scale with the workflow's size (db/scaling.py)

    def stage(self, name: str) -> Stage:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(f"no stage {name!r} (stages: {', '.join(s.name for s in self.stages)})")


# ---- validation ----------------------------------------------------------------------------------------------------

_REQUIRED = {Stage: ("name", "tasks", "hosts"), Dist: ("min", "mean", "max"), Read: ("bytes_per_task",),
             Write: ("bytes_per_task",), Shared: ("files", "bytes"), Metadata: ()}
_FRACTIONS = {"alpha", "alpha_files", "local_fraction", "warm_fraction", "young_fraction", "stats_cached_fraction",
              "redirected_fraction", "left_open_fraction", "machine_busy", "cpu_wait", "io_cpu_wait",
              "io_cpu_wait_measured"}
# counts of tasks (a 0 would silently read as "unknown" in the predictor's `x or default`) and the I/O concurrency,
# a mean of tasks in I/O while any is, so at least 1 (db/overlap.py): null/absent stays the way to say unknown
_POSITIVE_INT = {"tasks", "hosts", "tasks_max_per_host", "concurrency", "procs_per_host"}
_AT_LEAST_ONE = {"io_concurrency"}


_show = bounded_yaml.show


def _num(v, where: str, *, integer=False, optional=False, lo=0.0, hi=None):
    if v is None:
        if optional:
            return None
        raise ModelError(f"{where}: required, got null")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ModelError(f"{where}: must be a number, got {_show(v)}")
    if isinstance(v, float) and not math.isfinite(v):
        # NaN is not "unknown" (that is null): taken as unknown it let the predictor fall back to defaults unsaid
        raise ModelError(f"{where}: must be a finite number{' or null' if optional else ''}, got {v!r}")
    if abs(v) > INT_MAX:
        raise ModelError(f"{where}: must be below 2**63, got {_show(v)}")
    if integer:
        if isinstance(v, float) and v != int(v):
            raise ModelError(f"{where}: must be a whole number, got {v!r}")
        v = int(v)
    if lo is not None and v < lo:
        raise ModelError(f"{where}: must be >= {lo:g}, got {v!r}")
    if hi is not None and v > hi:
        raise ModelError(f"{where}: must be <= {hi:g}, got {v!r}")
    return v


_SPECS: dict = {}


def _spec(cls) -> tuple:
    """(field names, [(name, kind, optional, lo, hi)]) of a schema class, worked out once from its annotations."""
    got = _SPECS.get(cls)
    if got is None:
        sub = {"Dist": Dist, "Read": Read, "Shared": Shared, "Write": Write, "Metadata": Metadata,
               "Measured": Measured, "StageEnvelope": StageEnvelope}
        out = []
        for f in fields(cls):
            t = str(f.type)
            base = t.split(" |")[0]
            out.append((f.name, sub.get(base, base), "None" in t,
                        1 if f.name in _POSITIVE_INT | _AT_LEAST_ONE else 0.0,
                        1.0 if f.name in _FRACTIONS else None))
        got = _SPECS[cls] = ({f.name for f in fields(cls)}, out)
    return got


def _build(cls, data, where: str):
    if not isinstance(data, dict):
        raise ModelError(f"{where}: must be a mapping, got {_show(data)}")
    names, spec = _spec(cls)
    if not data.keys() <= names:
        unknown = [k for k in data if k not in names and not str(k).startswith("x-")]
        if unknown:
            raise ModelError(f"{where}.{unknown[0]}: unknown field (known: {', '.join(n for n, *_ in spec)})")
    for r in _REQUIRED.get(cls, ()):
        if r not in data:
            raise ModelError(f"{where}.{r}: required field missing")
    kw = {}
    for name, base, optional, lo, hi in spec:
        if name not in data:
            continue
        v = data[name]
        if base == "int" or base == "float":
            t = type(v)
            if (t is int or (t is float and base == "float" and v - v == 0)) and lo <= v <= INT_MAX and \
                    (hi is None or v <= hi):
                kw[name] = v                    # the common case, checked inline: a finite number in range
            else:
                kw[name] = _num(v, f"{where}.{name}", integer=base == "int", optional=optional, lo=lo, hi=hi)
            continue
        w = f"{where}.{name}"
        if not isinstance(base, str):
            if v is None and optional:
                kw[name] = None
            else:
                kw[name] = _build(base, v, w)
        elif base == "str":
            if isinstance(v, bounded_yaml.Timestamp):      # `name: 2026-01-01` is a date to YAML, not a name
                raise ModelError(f"{w}: must be a non-empty string, got the timestamp {_show(v)} (quote it)")
            if not isinstance(v, str) or not v:
                raise ModelError(f"{w}: must be a non-empty string, got {_show(v)}")
            kw[name] = v
        elif base == "list":
            if v is None and optional:
                kw[name] = None
                continue
            if not isinstance(v, list) or not v:
                raise ModelError(f"{w}: must be a non-empty list of numbers, got {_show(v)}")
            kw[name] = [_num(x, f"{w}[{i}]") for i, x in enumerate(v)]
            if kw[name] != sorted(kw[name]):
                raise ModelError(f"{w}: must be in increasing order")
        else:
            kw[name] = v
    obj = cls(**kw)
    if cls is Dist and not (obj.min <= obj.mean <= obj.max):
        raise ModelError(f"{where}: needs min <= mean <= max, got {obj.min} / {obj.mean} / {obj.max}")
    if cls is Stage and obj.tasks_max_per_host is not None and obj.tasks_max_per_host > obj.tasks:
        raise ModelError(f"{where}.tasks_max_per_host: {obj.tasks_max_per_host} on one host, but the stage has "
                         f"{obj.tasks} tasks")
    if cls is Stage and obj.hosts > obj.tasks:
        raise ModelError(f"{where}.hosts: {obj.hosts} hosts for {obj.tasks} tasks (a stage runs on at most "
                         f"one host per task)")
    return obj


def from_dict(data: Any, source: str = "<workflow>") -> Workflow:
    """Validate a parsed YAML document and build a Workflow (ModelError naming the field otherwise)."""
    if not isinstance(data, dict):
        raise ModelError(f"{source}: a workflow model is a mapping with 'mtcio_workflow' and 'stages'")
    ver = data.get("mtcio_workflow")
    if ver is None:
        raise ModelError(f"{source}: mtcio_workflow: required field missing (schema version, {SCHEMA_VERSION})")
    if isinstance(ver, bool) or not isinstance(ver, int) or ver != SCHEMA_VERSION:
        raise ModelError(f"{source}: mtcio_workflow: schema version {_show(ver)} not supported (this mtcio "
                         f"reads {SCHEMA_VERSION})")
    known = {"mtcio_workflow", "run", "source", "envelope", "stages", "scaling"}
    unknown = [k for k in data if k not in known and not str(k).startswith("x-")]
    if unknown:
        raise ModelError(f"{source}: {unknown[0]}: unknown field (known: {', '.join(sorted(known))})")
    stages = data.get("stages")
    if not isinstance(stages, list) or not stages:
        raise ModelError(f"{source}: stages: must be a non-empty list, got {_show(stages)}")
    out = [_build(Stage, s, f"stages[{i}]") for i, s in enumerate(stages)]
    seen = set()
    for i, s in enumerate(out):
        if s.name in seen:
            raise ModelError(f"stages[{i}].name: duplicate stage {s.name!r}")
        seen.add(s.name)
    for k in ("source", "envelope"):
        if data.get(k) is not None and not isinstance(data[k], dict):
            raise ModelError(f"{source}: {k}: must be a mapping")
    run = data.get("run")
    if run is not None and (not isinstance(run, str) or isinstance(run, bounded_yaml.Timestamp)):
        raise ModelError(f"{source}: run: must be a string, got {'the timestamp ' if run else ''}{_show(run)}"
                         + (" (quote it)" if isinstance(run, bounded_yaml.Timestamp) else ""))
    scaling = _plain(data.get("scaling"))
    if scaling is not None:
        _check_scaling(scaling, {s.name for s in out})
    return Workflow(stages=out, run=run, source=_plain(data.get("source")), envelope=_plain(data.get("envelope")),
                    scaling=scaling)


def _plain(v):
    """Free-form parts (source, envelope) with timestamps as the plain strings they were written as."""
    if isinstance(v, dict):
        return {_plain(k): _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return str(v) if isinstance(v, bounded_yaml.Timestamp) else v


_FORMS = {"constant": ("a",), "proportional": ("a",), "linear": ("a", "b"), "power": ("a", "p")}


def _check_fit(f, where: str) -> None:
    if not isinstance(f, dict) or f.get("form") not in _FORMS:
        got = f.get("form") if isinstance(f, dict) else f
        raise ModelError(f"{where}.form: must be one of {', '.join(_FORMS)}, got {_show(got)}")
    for k in _FORMS[f["form"]]:
        _num(f.get(k), f"{where}.{k}", lo=None)
    _num(f.get("residual"), f"{where}.residual")
    pts = f.get("points")
    if not isinstance(pts, list) or not all(isinstance(p, list) and len(p) == 2 for p in pts):
        raise ModelError(f"{where}.points: must be a list of [x, y] pairs")
    for i, p in enumerate(pts):
        _num(p[0], f"{where}.points[{i}][0]")
        _num(p[1], f"{where}.points[{i}][1]")


def _check_scaling(sc, stages: set) -> None:
    """The `scaling:` section (db/scaling.py writes it): runs with their sizes, hosts and slots, fits of the counts
    and of every stage's parts. Checked here so that instantiating it can trust its shape."""
    w = "scaling"
    if not isinstance(sc, dict):
        raise ModelError(f"{w}: must be a mapping")
    for k in ("runs", "sizes", "hosts", "procs", "reference", "counts", "stages"):
        if k not in sc:
            raise ModelError(f"{w}.{k}: required field missing")
    runs = sc["runs"]
    if not isinstance(runs, list) or not runs or not all(isinstance(r, str) for r in runs):
        raise ModelError(f"{w}.runs: must be a non-empty list of run names")
    for k, integer, lo in (("sizes", False, 0.0), ("hosts", True, 1), ("procs", True, 1)):
        v = sc[k]
        if not isinstance(v, list) or len(v) != len(runs):
            raise ModelError(f"{w}.{k}: must be a list of one value per run ({len(runs)})")
        for i, x in enumerate(v):
            _num(x, f"{w}.{k}[{i}]", integer=integer, lo=lo)
        if k == "sizes" and min(v) <= 0:
            raise ModelError(f"{w}.sizes: must be > 0")
    if sc["reference"] not in runs:
        raise ModelError(f"{w}.reference: must be one of the runs")
    if not isinstance(sc["counts"], dict) or not isinstance(sc["stages"], dict):
        raise ModelError(f"{w}: counts and stages must be mappings")
    for k, f in sc["counts"].items():
        _check_fit(f, f"{w}.counts.{k}")
    for name, spec in sc["stages"].items():
        ws = f"{w}.stages.{name}"
        if name not in stages:
            raise ModelError(f"{ws}: no such stage in the model")
        if not isinstance(spec, dict) or not isinstance(spec.get("fields"), dict):
            raise ModelError(f"{ws}.fields: required mapping missing")
        names = spec.get("task_names")
        if not isinstance(names, list) or not all(isinstance(x, str) for x in names):
            raise ModelError(f"{ws}.task_names: must be a list of name shapes")
        for part, terms in spec["fields"].items():
            if not isinstance(terms, list):
                raise ModelError(f"{ws}.fields.{part}: must be a list of terms")
            for i, t in enumerate(terms):
                _check_fit(t, f"{ws}.fields.{part}[{i}]")
                if not isinstance(t.get("driver"), str) or (t["driver"] != "size" and t["driver"] not in
                                                            sc["counts"]):
                    raise ModelError(f"{ws}.fields.{part}[{i}].driver: must be 'size' or a count of scaling.counts")
                if len(t["points"]) != len(runs):
                    raise ModelError(f"{ws}.fields.{part}[{i}].points: one per run ({len(runs)})")


# ---- bounded loading -----------------------------------------------------------------------------------------------

def _field_lines(root) -> dict:
    """'stages[1].read.alpha' -> line, in the notation of the validation messages (each node visited once)."""
    lines: dict = {}
    seen = set()

    def walk(node, where):
        lines.setdefault(where, node.start_mark.line + 1)
        if id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            for i, c in enumerate(node.value):
                walk(c, f"{where}[{i}]")
        elif isinstance(node, yaml.MappingNode):
            for kn, vn in node.value:
                if isinstance(kn, yaml.ScalarNode):
                    lines.setdefault(f"{where}.{kn.value}" if where else kn.value, kn.start_mark.line + 1)
                    walk(vn, f"{where}.{kn.value}" if where else kn.value)

    walk(root, "")
    return lines


def _line_of(message: str, lines: dict) -> int | None:
    """Line of the field a validation message starts with, or of its nearest enclosing field."""
    m = re.match(r"([A-Za-z0-9_\-\[\].]+):", message)
    where = m.group(1) if m else ""
    while where:
        if where in lines:
            return lines[where]
        where = re.sub(r"(\.[^.\[\]]*|\[\d+\])$", "", where) if re.search(r"[.\[]", where) else ""
    return lines.get("")


def _read_text(path: str) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise ModelError(f"{path}: cannot read ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ModelError(f"{path}: not a regular file")
        if st.st_size > MAX_BYTES:
            raise ModelError(f"{path}: {st.st_size:,} bytes, larger than a workflow model may be "
                             f"({MAX_BYTES:,})")
        raw = b""
        while len(raw) <= MAX_BYTES:
            chunk = os.read(fd, MAX_BYTES + 1 - len(raw))
            if not chunk:
                break
            raw += chunk
    except OSError as e:
        raise ModelError(f"{path}: cannot read ({e.strerror})") from None
    finally:
        os.close(fd)
    if len(raw) > MAX_BYTES:
        raise ModelError(f"{path}: larger than a workflow model may be ({MAX_BYTES:,} bytes)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise ModelError(f"{path}: line {line}: not UTF-8 text (byte 0x{raw[e.start]:02x} at offset "
                         f"{e.start})") from None


def load(path: str) -> Workflow:
    """Read and validate a workflow model file; ModelError naming the file, line and field on any problem."""
    text = _read_text(path)
    try:
        data = bounded_yaml.load(text, MAX_DEPTH, MAX_NODES)
    except bounded_yaml.Limit as e:
        raise ModelError(f"{path}: " + (f"line {e.line}: " if e.line else "") + str(e)) from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        raise ModelError(f"{path}: " + (f"line {mark.line + 1}: " if mark else "") +
                         f"not valid YAML ({e.problem or e.context})") from None
    except yaml.YAMLError as e:       # e.g. a control character (the reader's error has a position, not a mark)
        raise ModelError(f"{path}: not valid YAML ({' '.join(str(e).split())})") from None
    if data is None:
        raise ModelError(f"{path}: empty document (a workflow model is a mapping with 'mtcio_workflow' "
                         f"and 'stages')")
    try:
        return from_dict(data, path)
    except ModelError as e:
        msg = str(e)
        msg = msg[len(path) + 2:] if msg.startswith(path + ": ") else msg
        # the lines of the fields only now, for the message: the document is known to be within bounds
        line = _line_of(msg, _field_lines(bounded_yaml.compose(text)))
        raise ModelError(f"{path}: " + (f"line {line}: " if line else "") + msg) from None


def to_dict(wf: Workflow) -> dict:
    def conv(o):
        if hasattr(o, "__dataclass_fields__"):
            return {f.name: conv(getattr(o, f.name)) for f in fields(o)}
        if isinstance(o, list):
            return [conv(x) for x in o]
        if isinstance(o, float) and o == int(o) and abs(o) < 2 ** 53:
            return o
        return o
    d = {"mtcio_workflow": wf.mtcio_workflow, "run": wf.run, "source": wf.source, "envelope": wf.envelope,
         "stages": [conv(s) for s in wf.stages]}
    if wf.scaling is not None:
        d["scaling"] = wf.scaling
    return d


def dump(wf: Workflow) -> str:
    from_dict(to_dict(wf))          # never write what load() would refuse
    return yaml.safe_dump(to_dict(wf), sort_keys=False, default_flow_style=None, width=120)


def save(wf: Workflow, path: str) -> None:
    """Write the model readable by its owner only (it names users' files), replacing `path` atomically."""
    import os
    import tempfile
    text = dump(wf)
    fd, tmp = tempfile.mkstemp(prefix=".workflow.", suffix=".tmp", dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write("# mtcio workflow model (schema: db/workflow_model.py, db/README.md)\n" + text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
