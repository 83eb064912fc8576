"""montage_example/RESULTS.md, rendered from the results file beside it (results.json).

The benchmarks write their figures into the results file (`--results FILE` of tests/bench/scale_predict.py,
montage_predict.py, montage_overhead.py, shim_bench.py); this renders the page from it, so the page says nothing
the file does not hold. The notes under a table are a reader's reading of one pass (`notes_pass`): when a bench
writes a newer pass the page says which pass they were written on.

    python -m montage_example.results [--results FILE] [-o FILE|-] [--check]

The file's sections: setup, scale (trace small, predict large: passes, each with its targets' median / p90 /
whole-workflow error per way of predicting and the two runs' spread), same_config (per variant median, p90,
whole-workflow error, stage-runs inside the interval; the floor the runs' spread sets; per-stage bias per host
count), overhead (traced / untraced ratios), demo (`montage_example/demo.py --results FILE`: the newest demos, each
with its per-stage error, whole-workflow error, the runs' spread and the baseline), limits.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results.json")
PAGE = os.path.join(HERE, "RESULTS.md")
WIDTH = 116
SECTIONS = ("setup", "scale", "same_config", "overhead", "demo", "limits")


class ResultsError(Exception):
    """A results file that cannot be rendered: the message says which field."""


def load(path: str = RESULTS) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise ResultsError(f"{path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise ResultsError(f"{path}: not JSON ({e.msg}, line {e.lineno})") from None
    if not isinstance(data, dict):
        raise ResultsError(f"{path}: not a JSON object")
    return data


def save(data: dict, path: str = RESULTS) -> None:
    """The results file written whole (a temporary file renamed over it: a bench killed mid-write loses nothing)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, path)


def update(path: str, section: str, fn) -> None:
    """fn(section's dict) changes one section of the results file at `path` in place (a new file if none)."""
    data = load(path) if os.path.exists(path) else {}
    fn(data.setdefault(section, {}))
    save(data, path)


def set_overhead_row(path: str, row: dict) -> None:
    """One row of the "overhead" section, replacing the row of the same command (a new row last)."""
    def put(section):
        rows = section.setdefault("rows", [])
        i = next((i for i, r in enumerate(rows) if r["command"] == row["command"]), None)
        if i is None:
            rows.append(row)
        else:
            rows[i] = row
    update(path, "overhead", put)


def command_line(script: str, argv, drop=("--results", "--pass"), hide=("--keep", "--predict-only", "--score")) -> str:
    """The command that reproduces a bench's figures, as the page shows it: `drop`'s options left out (with their
    values) and `hide`'s values shown as DIR (no folder of the machine that ran it)."""
    out, skip = ["python", script], False
    for i, x in enumerate(argv):
        if skip:
            skip = False
            continue
        name = x.split("=", 1)[0]
        if name in drop:
            skip = "=" not in x
            continue
        if name in hide:
            out.append(f"{name} DIR" if "=" not in x else f"{name}=DIR")
            skip = "=" not in x
            continue
        out.append(shlex.quote(x))
    return " ".join(out)


# --------------------------------------------------------------------------------- rendering
def para(text: str, indent: str = "", first: str | None = None) -> list[str]:
    """A paragraph wrapped at WIDTH, a number never parted from its unit (" %")."""
    lines = textwrap.wrap(text.replace(" %", "\0%"), WIDTH, initial_indent=first if first is not None else indent,
                          subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)
    return [ln.replace("\0", " ") for ln in lines]


def bullets(items) -> list[str]:
    return [ln for it in items for ln in para(it, "  ", "- ")]


def pct(x, signed: bool = False, digits: int = 0) -> str:
    return "" if x is None else f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


def seconds(x) -> str:
    return "" if x is None else f"{x:,} s"


def field(d: dict, key: str, where: str):
    if key not in d:
        raise ResultsError(f"{where}: no {key!r}")
    return d[key]


def notes_header(sec: dict, newest: str) -> list[str]:
    read_on = sec.get("notes_pass")
    if read_on is not None and read_on != newest:
        return [f"Notes written on pass {read_on}, before pass {newest}'s figures:"]
    return []


def scale_section(s: dict) -> list[str]:
    passes = field(s, "passes", "scale")
    if not passes:
        raise ResultsError("scale: no passes")
    out = ["## Trace small, predict large (`tests/bench/scale_predict.py`)", ""]
    runs = "; ".join(f"{'**' if i == 0 else ''}pass {p['pass']}{'**' if i == 0 else ''} at {p['commit']}, "
                     f"{p['when']} ({', '.join(x for x in (seconds(p.get('seconds')), p.get('conditions')) if x)})"
                     for i, p in enumerate(passes))
    out += para(f"`{field(s, 'command', 'scale')}`: {field(s, 'what', 'scale')} {field(s, 'rule', 'scale')} "
                f"Newest first: {runs}.")
    out += ["", "| target | pass | with `rake -P` graph: median / p90 / whole | fits alone | same-configuration "
                "baseline | the two runs' spread: median / p90 |", "|---|---|---|---|---|---|"]
    order = list(dict.fromkeys(t["target"] for p in passes for t in p["targets"]))   # a target of any pass
    for tgt in order:
        rows = [(p, t) for p in passes for t in p["targets"] if t["target"] == tgt]
        for i, (p, t) in enumerate(rows):
            g, f, b, sp = t["graph"], t["fits"], t["baseline"], t["spread"]
            out.append(f"| {tgt if i == 0 else ''} | {p['pass']} | {g[0]:.0f} % / {g[1]:.0f} % / {g[2]:+.1f} % | "
                       f"{f[0]:.0f} / {f[1]:.0f} / {f[2]:+.1f} % | {b[0]:.0f} / {b[1]:.0f} / {b[2]:+.1f} % | "
                       f"{sp[0]:.0f} / {sp[1]:.0f} % |")
    out += [""] + para(field(s, "footnote", "scale")) + [""]
    out += notes_header(s, passes[0]["pass"]) + bullets(s.get("notes", []))
    return out


def same_config_section(s: dict) -> list[str]:
    w = "same_config"
    out = ["## Same configuration (`tests/bench/montage_predict.py`)", ""]
    out += para(f"`{field(s, 'command', w)}`: {field(s, 'configurations', w)} (pass {field(s, 'pass', w)}, "
                f"{field(s, 'when', w)}, {seconds(field(s, 'seconds', w))}, {field(s, 'conditions', w)}; "
                f"{field(s, 'stage_runs', w)} stage-runs).")
    out += ["", "| variant | median | p90 | whole-workflow I/O: median (max) | inside its 90 % interval |",
            "|---|---|---|---|---|"]
    for v in field(s, "variants", w):
        whole = f"{v['whole']:.1f} % (max {v['whole_max']:.1f})" if v.get("whole") is not None else ""
        ins = v.get("inside")
        inside = f"{ins[0]} of {ins[1]} ({100 * ins[0] / ins[1]:.0f} %)" if ins else ""
        out.append(f"| {v['variant']} | {pct(v['median'], digits=1)} % | "
                   f"{pct(v.get('p90'), digits=1) + ' %' if v.get('p90') is not None else ''} | {whole} | {inside} |")
    fl = s.get("floor")
    if fl:
        out.append(f"| the floor: a predictor exact for each configuration's expected time | ~{fl[0]:.1f} % | "
                   f"~{fl[1]:.1f} % | | |")
    bias = s.get("bias") or {}
    if bias:
        hs = field(s, "bias_hosts", w)
        out += ["", f"Per-stage bias of the refined default: its signed error, median over the runs on "
                    f"{' / '.join(map(str, hs))} hosts:", "",
                "| stage | " + " | ".join(f"{h} hosts" for h in hs) + " |", "|---|" + "---|" * len(hs)]
        out += [f"| {st} | " + " | ".join(f"{x:+.0f} %" if x is not None else "" for x in es) + " |"
                for st, es in bias.items()]
    out += [""] + notes_header(s, s["pass"]) + bullets(s.get("notes", []))
    return out


def overhead_section(s: dict) -> list[str]:
    out = ["## Tracing overhead (`tests/bench/montage_overhead.py`, `tests/bench/shim_bench.py`)", "",
           "| command | what | traced / untraced, median |", "|---|---|---|"]
    for r in field(s, "rows", "overhead"):
        out.append(f"| `{r['command']}` | {r['what']} | {r['ratio']:.3f} ({r['detail']}) |")
    for n in s.get("notes", []):
        out += [""] + para(n)
    return out


def demo_section(s: dict) -> list[str]:
    w = "demo"
    out = [f"## `make demo` (`{field(s, 'command', w)}`)", ""] + para(field(s, "what", w)) + [""]
    runs = s.get("runs") or []
    if not runs:
        return out + ["No demo recorded yet: `python montage_example/demo.py --results montage_example/results.json`."]
    out += ["| when | preset | launcher | demo | large-sky runs | per-stage \\|error\\| median (p90) | whole workflow "
            "| runs' spread median (max) | baseline median (p90), whole | load |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        sky = f"{', '.join(map(str, r['small']))} -> {r['large']} tiles"
        out.append(f"| {r['when']} | {r['preset']}: {sky} | {r['launcher']} | {seconds(r['seconds'])} | "
                   f"{' and '.join(f'{x:.1f} s' for x in r['walls_s'])} | {pct(r['median'])} % ({pct(r['p90'])} %) "
                   f"over {r['stages']} | {pct(r['whole_pct'], signed=True)} % (spread {pct(r['whole_spread_pct'])} %)"
                   f" | {pct(r['spread_median'])} % ({pct(r['spread_max'])} %) | {pct(r['baseline_median'])} % "
                   f"({pct(r['baseline_p90'])} %), {pct(r['baseline_whole_pct'], signed=True)} % | {r['load']} |")
    return out


def render(data: dict) -> str:
    for k in SECTIONS:
        field(data, k, "results")
    out = [f"# {field(data, 'title', 'results')}", "",
           "<!-- rendered from results.json by `python -m montage_example.results`: edit that file (or rerun the "
           "bench with --results), not this page -->", ""]
    out += para(field(data, "intro", "results")) + [""]
    out += para(f"Setup: {data['setup']}") + [""]
    out += scale_section(data["scale"]) + [""]
    out += same_config_section(data["same_config"]) + [""]
    out += overhead_section(data["overhead"]) + [""]
    out += demo_section(data["demo"]) + [""]
    out += ["## Known limits", ""] + bullets(data["limits"])
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------- command
def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m montage_example.results", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="exit codes:\n  0    ok (--check: the page is what the file renders)\n"
               "  1    --check: the page differs from what the file renders\n"
               "  2    bad input: a results file that is missing, not JSON or lacks a field; an output that cannot "
               "be written")
    p.add_argument("--results", default=RESULTS, metavar="FILE", help="the results file (default: results.json "
                   "beside this module)")
    p.add_argument("-o", "--out", default=PAGE, metavar="FILE", help="the page to write, - for stdout (default: "
                   "RESULTS.md beside this module)")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if the page is not what the file "
                   "renders")
    a = p.parse_args(argv)
    prog = "montage_example.results"
    try:
        text = render(load(a.results))
    except ResultsError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    except (KeyError, IndexError, TypeError, ValueError) as e:
        print(f"{prog}: {a.results}: a field of the wrong shape ({type(e).__name__}: {e})", file=sys.stderr)
        return 2
    if a.check:
        try:
            with open(a.out, encoding="utf-8") as f:
                same = f.read() == text
        except OSError as e:
            print(f"{prog}: {a.out}: {e.strerror}", file=sys.stderr)
            return 2
        if not same:
            print(f"{prog}: {a.out} is not what {a.results} renders (run without --check)", file=sys.stderr)
        return 0 if same else 1
    if a.out == "-":
        sys.stdout.write(text)
        return 0
    try:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        print(f"{prog}: {a.out}: {e.strerror}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
