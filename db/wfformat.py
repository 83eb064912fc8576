"""WfFormat (WfCommons' JSON instance format) as mtcio reads and writes it: legal ids, the project's schema, and an
instance read from a file with every problem named in one line.

Versions 1.5 and 1.6 share one layout: `workflow.specification` (tasks with name, id, parents, children,
inputFiles, outputFiles; files with id and sizeInBytes) and the optional `workflow.execution` (makespan, start,
per-task runtime, readBytes/writtenBytes, machines).  1.6 adds `metrics` to both sections and a task's
`category` in its execution entry; 1.4 and older had another layout (workflow.tasks with files inline) and are
refused.  `wfformat-schema.json` beside this file is the project's JSON Schema of what it reads and writes,
written from WfFormat's documented required fields (wfcommons' own validator fetches its schema from the network).

    ids = IdMaker(TASK_CHARS); ids.make("a b") -> "a_b"; ids.make("a_b") -> "a_b#2"   # legal and unique
    inst = read_instance(path)         # -> Instance; WfFormatError naming the problem (one line)
    problems = schema_problems(doc)    # jsonschema against wfformat-schema.json ([] when jsonschema is absent)

Imports nothing heavy (json, re): `mtcpredict INSTANCE.json` and `mtcprof model --from-wfformat` start fast.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field

VERSIONS = ("1.5", "1.6")
SCHEMA_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wfformat-schema.json")
MAX_BYTES = 1 << 30          # a 1 GiB instance is refused unread (the largest WfInstances are ~100 MB)

# WfFormat's characters: a task id as parents/children may name it, a file id as inputFiles/outputFiles may
_ALNUM = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
TASK_CHARS = _ALNUM + "_.#-"
FILE_CHARS = TASK_CHARS + ":/"
TASK_ID = re.compile(r"^[0-9a-zA-Z_.#-]+$")
FILE_ID = re.compile(r"^[0-9a-zA-Z_.#:/-]+$")


class WfFormatError(ValueError):
    """An input that is not a usable WfFormat instance; the message is one line naming the problem."""


class IdMaker:
    """Legal, unique ids for names: every byte (of the name's exact bytes) WfFormat does not allow becomes '_',
    and a name whose id is taken gets '#2', '#3' ... ('#' is legal in both kinds of id)."""

    def __init__(self, chars: str = TASK_CHARS):
        self.allowed = set(chars)
        self.used: set = set()

    def make(self, name: str) -> str:
        raw = os.fsencode(name) if isinstance(name, str) else bytes(name)
        base = "".join(chr(b) if chr(b) in self.allowed else "_" for b in raw) or "_"
        out, k = base, 1
        while out in self.used:
            k += 1
            out = f"{base}#{k}"
        self.used.add(out)
        return out


def exact_utf8(name: str) -> bool:
    """Is the name its own exact bytes as UTF-8 text (no undecodable byte kept as a surrogate escape)?"""
    try:
        name.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def schema() -> dict:
    with open(SCHEMA_FILE, encoding="utf-8") as f:
        return json.load(f)


def schema_problems(doc) -> list[str] | None:
    """Where `doc` breaks wfformat-schema.json, one line each ("workflow > specification > tasks > 3 > id: ...");
    None when the jsonschema package is not installed (pip install 'mtcio[wfcommons]')."""
    try:
        import jsonschema
    except ImportError:
        return None
    v = jsonschema.Draft7Validator(schema())
    out = []
    for e in sorted(v.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path))):
        where = " > ".join(str(p) for p in e.absolute_path) or "the instance"
        msg = e.message if len(e.message) < 160 else e.message[:157] + "..."
        out.append(f"{where}: {msg}")
    return out


@dataclass
class Task:
    id: str
    name: str
    category: str               # the stage: the task's category, else its name (WfFormat's name is often the program)
    parents: list
    children: list
    inputs: list                # file ids
    outputs: list
    runtime_s: float | None = None
    read_bytes: float | None = None
    written_bytes: float | None = None
    machines: list = field(default_factory=list)


@dataclass
class Instance:
    name: str
    version: str
    tasks: list                 # [Task] in the instance's order
    sizes: dict                 # file id -> bytes
    machines: list              # node names the execution section lists
    path: str = ""

    def levels(self) -> dict:
        """task id -> its level (0: no parents; else 1 + its deepest parent's)."""
        return _levels(self.tasks)


def _where(path: str) -> str:
    from mtcio.exitcodes import printable
    return printable(path)


def read_instance(path: str) -> Instance:
    """The WfFormat instance in `path`; WfFormatError with one line naming the file and the problem."""
    p = _where(path)
    with open(path, "rb") as f:           # OSError (missing, a folder, unreadable): the caller's one line
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise WfFormatError(f"{p}: larger than {MAX_BYTES >> 20} MiB; not read")
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise WfFormatError(f"{p}: not JSON (not UTF-8 text at byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise WfFormatError(f"{p}: not JSON (line {e.lineno} column {e.colno}: {e.msg})") from None
    return parse(doc, p)


def parse(doc, where: str = "<instance>") -> Instance:
    if not isinstance(doc, dict) or not isinstance(doc.get("workflow"), dict):
        kind = type(doc).__name__ if not isinstance(doc, dict) else "an object without 'workflow'"
        raise WfFormatError(f"{where}: not a WfFormat instance (JSON {kind}; WfFormat has name, schemaVersion and "
                            "workflow.specification)")
    ver = doc.get("schemaVersion")
    wf = doc["workflow"]
    if "specification" not in wf:
        if "tasks" in wf or "jobs" in wf:
            raise WfFormatError(f"{where}: schemaVersion {ver!r}: an older WfFormat layout (workflow.tasks); "
                                f"mtcio reads {' and '.join(VERSIONS)} (WfFormat's tools/ migrate older instances)")
        raise WfFormatError(f"{where}: not a WfFormat instance (no workflow.specification)")
    if ver not in VERSIONS:
        raise WfFormatError(f"{where}: unknown WfFormat schemaVersion {str(ver)!r}: mtcio reads "
                            f"{' and '.join(VERSIONS)}")
    spec = wf["specification"]
    if not isinstance(spec, dict) or not isinstance(spec.get("tasks"), list) or not spec["tasks"]:
        raise WfFormatError(f"{where}: not a WfFormat instance (workflow.specification.tasks is not a non-empty "
                            "list)")
    # the problems this command is asked about first, named plainly; then the schema for everything else
    files = spec.get("files", [])
    for i, f in enumerate(files if isinstance(files, list) else []):
        s = f.get("sizeInBytes") if isinstance(f, dict) else None
        if isinstance(s, (int, float)) and not isinstance(s, bool) and s < 0:
            raise WfFormatError(f"{where}: file {_show(f.get('id'))} (workflow.specification.files[{i}]): negative "
                                f"size {s}")
    ex = wf.get("execution") if isinstance(wf.get("execution"), dict) else {}
    for i, t in enumerate(ex.get("tasks", []) if isinstance(ex.get("tasks"), list) else []):
        for k in ("readBytes", "writtenBytes", "runtimeInSeconds"):
            v = t.get(k) if isinstance(t, dict) else None
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0:
                raise WfFormatError(f"{where}: task {_show(t.get('id'))} (workflow.execution.tasks[{i}]): negative "
                                    f"{k} {v}")
    problems = schema_problems(doc)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise WfFormatError(f"{where}: not valid WfFormat: {problems[0]}{more}")
    if problems is None:
        _shape_checks(spec, where)
    sizes = {}
    for f in files:
        if f["id"] in sizes:
            raise WfFormatError(f"{where}: file {_show(f['id'])} is declared twice")
        sizes[f["id"]] = f["sizeInBytes"]
    exec_of = {t["id"]: t for t in ex.get("tasks", [])}
    tasks, seen = [], set()
    for t in spec["tasks"]:
        if t["id"] in seen:
            raise WfFormatError(f"{where}: task {_show(t['id'])} is declared twice")
        seen.add(t["id"])
        e = exec_of.get(t["id"], {})
        cat = e.get("category") or t.get("category") or t["name"]
        tasks.append(Task(id=t["id"], name=t["name"], category=cat, parents=list(t["parents"]),
                          children=list(t["children"]), inputs=list(t.get("inputFiles", [])),
                          outputs=list(t.get("outputFiles", [])), runtime_s=e.get("runtimeInSeconds"),
                          read_bytes=e.get("readBytes"), written_bytes=e.get("writtenBytes"),
                          machines=list(e.get("machines", []))))
    for t in tasks:
        for kind, refs in (("parent", t.parents), ("child", t.children)):
            for r in refs:
                if r not in seen:
                    raise WfFormatError(f"{where}: task {_show(t.id)} names {kind} {_show(r)}, which is not a task "
                                        "of the instance")
                if r == t.id:
                    raise WfFormatError(f"{where}: task {_show(t.id)} is its own {kind}")
        for fid in t.inputs + t.outputs:
            if files and fid not in sizes:
                raise WfFormatError(f"{where}: task {_show(t.id)} uses file {_show(fid)}, which is not in "
                                    "workflow.specification.files")
    _levels(tasks, where)          # a cycle is an error
    machines = [m["nodeName"] for m in ex.get("machines", [])]
    return Instance(name=doc["name"], version=ver, tasks=tasks, sizes=sizes, machines=machines, path=where)


def _shape_checks(spec: dict, where: str) -> None:
    """Without jsonschema: the fields the import reads, checked by hand."""
    for i, t in enumerate(spec["tasks"]):
        if not isinstance(t, dict):
            raise WfFormatError(f"{where}: not valid WfFormat: workflow > specification > tasks > {i}: not an object")
        for k in ("name", "id", "parents", "children"):
            if k not in t:
                raise WfFormatError(f"{where}: not valid WfFormat: workflow > specification > tasks > {i}: "
                                    f"'{k}' is a required property")
    for i, f in enumerate(spec.get("files", [])):
        if not isinstance(f, dict) or not isinstance(f.get("sizeInBytes"), int) or "id" not in f:
            raise WfFormatError(f"{where}: not valid WfFormat: workflow > specification > files > {i}: needs id and "
                                "an integer sizeInBytes")


def _levels(tasks: list, where: str = "<instance>") -> dict:
    """task id -> level, through parents and children both (an edge either side names counts); a cycle is a
    WfFormatError naming some of its tasks."""
    parents = {t.id: set(t.parents) for t in tasks}
    for t in tasks:
        for c in t.children:
            parents.setdefault(c, set()).add(t.id)
    kids: dict = {t.id: [] for t in tasks}
    for c, ps in parents.items():
        for p_ in ps:
            kids.setdefault(p_, []).append(c)
    left = {k: len(v) for k, v in parents.items()}
    ready = [k for k, n in left.items() if n == 0]
    level = {k: 0 for k in ready}
    while ready:
        nxt = []
        for k in ready:
            for c in kids.get(k, []):
                level[c] = max(level.get(c, 0), level[k] + 1)
                left[c] -= 1
                if left[c] == 0:
                    nxt.append(c)
        ready = nxt
    stuck = sorted(k for k, n in left.items() if n > 0)
    if stuck:
        names = ", ".join(_show(s) for s in stuck[:3]) + (" ..." if len(stuck) > 3 else "")
        raise WfFormatError(f"{where}: a cycle in parents/children: {len(stuck)} tasks are on or after one "
                            f"({names})")
    return level


def _show(v) -> str:
    from mtcio.exitcodes import printable
    return repr(printable(v, 60)) if isinstance(v, str) else printable(repr(v), 60)
