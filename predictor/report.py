"""`mtcpredict --out DIR`: PNG maps and one self-contained HTML page for site admins, read top-down: the answer
per stage first (predicted time, bottleneck, interval; when validated the error beside the runs' spread), then the
maps, the envelope, and the details (full tables, look-ups and warnings behind a click).  figures.py draws."""
from __future__ import annotations

import base64
import gc
import html
import io
import marshal
import os
import signal

from mtcio.cpus import usable_cpus
from mtcio.db.store import readable, write_private   # 0600 whatever the umask, replaced atomically
from mtcio.units import fmt_bytes, fmt_interval, fmt_pct, fmt_rate, fmt_s

from . import figures
from .model import TERM_LABEL, TERMS
from .surface import op_clock
from .table import CELL_RATE_SAID, INTERVAL_SAID


def _e(x) -> str:
    """A name or value in the page's HTML: undecodable bytes and control characters as \\xNN (the page is UTF-8
    text, a name from the trace need not be), then escaped."""
    return html.escape(str(readable(x)))


# what drawing and writing a figure costs, relative (timed one by one on a 2-core machine; a unit ~0.13 s there):
# the two processes' shares.  BOOTSTRAP: the unit cost of one prediction in one bootstrap replicate (800 of them
# ~0.2 s), which the parent computes while the child draws
COST = {"parity": 3, "maps": 3, "stage_time": 4, "dominant": 1, "whatif": 2, "envelope": 4}
BOOTSTRAP = 0.002


def split(keys, head: float = 0.0) -> tuple[list, list]:
    """`keys` dealt to two processes, the costliest first to the less loaded: (this process's, the child's); this
    process starts with `head` units of other work; the child gets the larger share, this one writes the page after."""
    shares, load = ([], []), [head, 0.0]
    for k in sorted(keys, key=lambda k: -COST.get(k, 1)):
        i = load.index(min(load))
        shares[i].append(k)
        load[i] += COST.get(k, 1)
    return shares if load[0] <= load[1] else shares[::-1]


class Drawing:
    """The figures a forked child draws beside this process (most of `--out`'s time is drawing: on two CPUs it
    overlaps the bootstrap, the what-ifs and this process's own figures).  The child sends {section: (file name,
    PNG bytes)} through a pipe (marshal) and writes no file: a prediction that fails after the fork leaves nothing behind
    (cancel() stops the child)."""

    def __init__(self, keys, pid, fd):
        self.keys, self.pid, self.fd = keys, pid, fd

    @classmethod
    def start(cls, wf, surface, preds, late=(), head: float = 0.0, procs=None) -> "Drawing | None":
        """With two CPUs, a child drawing its share of the figures that need only the point predictions (the
        figures.LATE ones, `late`, stay here, with `head` units of other work); None with one CPU."""
        if (procs or usable_cpus()) < 2 or not hasattr(os, "fork"):
            return None
        plt = figures.pyplot()    # imported once for both processes (~0.4 s of CPU each on a 2-core machine)
        draws = dict(figures.plan(plt, None, wf, surface, preds))
        _, theirs = split(list(draws) + list(late), head)
        theirs = [k for k in theirs if k not in late]
        if not theirs:
            return None
        r, w = os.pipe()
        gc.freeze()   # the heap so far out of the collector's reach until collect(): no copy-on-write of each page
        try:
            pid = os.fork()
        except OSError:                             # no process to spare: all drawn here
            gc.unfreeze()
            os.close(r)
            os.close(w)
            return None
        if pid == 0:                                # the child: its figures' bytes sent back, then gone
            code = 1
            try:
                os.close(r)
                sent = {}
                for key in theirs:
                    sent.update(_draw(plt, draws, key))
                with os.fdopen(w, "wb") as fh:
                    marshal.dump(sent, fh)
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        return cls(theirs, pid, r)

    def collect(self) -> dict | None:
        """The child's figures once it is done; None if it failed (its share is then drawn here)."""
        with os.fdopen(self.fd, "rb") as fh:
            sent = fh.read()
        status = os.waitpid(self.pid, 0)[1]
        self.pid = None
        gc.unfreeze()
        try:
            got = marshal.loads(sent) if status == 0 else None
        except (EOFError, ValueError, TypeError):
            return None
        return got if isinstance(got, dict) else None

    def cancel(self) -> None:
        """Stop a child not collected (the prediction failed after it started)."""
        if self.pid:
            os.kill(self.pid, signal.SIGKILL)
            os.close(self.fd)
            os.waitpid(self.pid, 0)
            self.pid = None
            gc.unfreeze()


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    return buf.getvalue()


def draw_figures(plt, out, plan, drawing: Drawing | None = None) -> dict:
    """{section: (file name, PNG base64)} of every figure of `plan` (figures.plan), in page order, written in
    `out`: those `drawing`'s child draws taken from it, the others drawn here; what the child failed to send is
    drawn here too, so a child's trouble costs time, never a figure."""
    draws = dict(plan)
    theirs = [k for k in (drawing.keys if drawing else ()) if k in draws]
    imgs = {}
    for key in draws:
        if key not in theirs:
            imgs.update(_draw(plt, draws, key))
    got = drawing.collect() if drawing else {}
    for key in theirs:
        if got is None or key not in got:
            imgs.update(_draw(plt, draws, key))
        else:
            imgs[key] = got[key]
    for name, png in imgs.values():
        write_private(os.path.join(out, name), png)
    return {k: (imgs[k][0], base64.b64encode(imgs[k][1]).decode()) for k in draws if k in imgs}


def _draw(plt, draws, key) -> dict:
    """{section: (file name, PNG bytes)} of one figure (none when it has nothing to show)."""
    made = draws[key]()
    if not made:
        return {}
    png = _png(made[1])
    plt.close(made[1])
    return {key: (made[0], png)}


SECTION_TITLE = {
    "parity": "Predicted against measured",
    "maps": "Predicted bandwidth by access class (the workflow's stages marked)",
    "stage_time": "Predicted stage I/O time over task file size and node count",
    "dominant": "Dominant term",
    "whatif": "What-if: where the bottleneck moves",
    "envelope": "The envelope used (points: measured means; lines: the surface between them)",
}


def write_report(out, result, wf, surface, preds, measured, envelope=None, drawing: Drawing | None = None):
    """drawing: the figures a child has been drawing since the point predictions (Drawing.start)."""
    plt = figures.pyplot()
    imgs = draw_figures(plt, out, figures.plan(plt, result, wf, surface, preds), drawing)
    page = _html(result, imgs, measured, wf, surface, envelope)
    path = os.path.join(out, "report.html")
    write_private(path, page)
    return path


def _t(x):
    if x is None:
        return "—"
    if isinstance(x, float):
        if x == 0:
            return "0"
        return f"{x:.3g}" if abs(x) >= 1e-3 else f"{x:.2e}"
    return _e(x)


CONDITIONS = (("io_concurrency", "tasks in I/O at once"),
              ("io_concurrency_served", "the same, less their wait for a CPU"),
              ("cpu_load", "tasks computing beside the I/O, per host"),
              ("compute_per_call_us", "computing per call, us"), ("idle_before_ms", "host's I/O idle before a task, ms"),
              ("machine_busy", "machine's CPUs busy"), ("cpu_wait", "processes' time waiting for a CPU"),
              ("io_cpu_wait", "I/O time waiting for a CPU"))


def _conditions(wf) -> list[str]:
    """The traced conditions of every stage, from the workflow model: what the refinements and an admin read."""
    e = _e
    cols = [(f, h) for f, h in CONDITIONS if any(getattr(st, f) is not None for st in wf.stages)]
    if not cols:
        return []
    out = ["<h3>Traced conditions per stage (workflow model)</h3><table><tr><th class=l>stage</th>"
           + "".join(f"<th>{e(h)}</th>" for _, h in cols) + "</tr>"]
    def cell(st, f):
        v = getattr(st, f)
        return f"{100 * v:.0f} %" if f in ("machine_busy", "cpu_wait", "io_cpu_wait") and v is not None else _t(v)
    for st in wf.stages:
        out.append(f"<tr><td class=l>{e(st.name)}</td>" + "".join(f"<td>{cell(st, f)}</td>" for f, _ in cols)
                   + "</tr>")
    out.append("</table>")
    return out


def _envelope_waits(envelope) -> list[str]:
    """The share of the envelope's op time its workers spent ready to run without a CPU (the engine's scheduler
    clock, summed per point: op_wait_s / op_s), per metric and hosts x processes per host: where the clients'
    CPUs, not the file system, held the measured ops back."""
    acc = {}
    for p in (envelope.points if envelope else []):
        clock = op_clock(p.get("config")) if p.get("ok") and p["metric"].startswith("T") else None
        if clock:                                   # a B point is its T twin's run
            a = acc.setdefault((p["metric"], p["hosts"], p["procs_per_host"]), [0.0, 0.0])
            a[0] += clock[0]
            a[1] += clock[1]
    if not acc:
        return []
    e = _e
    cols = sorted({(h, n) for _, h, n in acc})
    out = [f"<h3>Envelope {e(str(envelope.name))}: its ops' time waiting for a CPU</h3><table><tr><th class=l>"
           "metric</th>" + "".join(f"<th>{h} hosts x {n}</th>" for h, n in cols) + "</tr>"]
    for m in sorted({m for m, _, _ in acc}):
        cells = (acc.get((m, h, n)) for h, n in cols)
        out.append(f"<tr><td class=l>{e(m)}</td>"
                   + "".join(f"<td>{100 * a[0] / a[1]:.0f} %</td>" if a else "<td>—</td>" for a in cells) + "</tr>")
    out.append("</table>")
    return out


STYLE = ("body{font:14px sans-serif;margin:2em;max-width:1400px} table{border-collapse:collapse;margin:.5em 0 1em}"
         "td,th{border:1px solid #ccc;padding:3px 6px;text-align:right;white-space:nowrap} th{background:#eee}"
         "td.l,th.l{text-align:left;white-space:normal} .warn{color:#a50} img{max-width:100%} .answer td{font-size:15px}"
         "details{margin:.3em 0} summary{cursor:pointer} .note{color:#555;font-size:13px} h2{margin-top:1.6em}"
         "details.w summary{color:#a50}")

# the variant whose prediction is the answer: the most corrected one the report has
ANSWER_ORDER = ("calibrated", "refined", "faithful")
UNIT = {"T": "ops/s", "B": "bytes/s"}


def _answer_rows(result):
    by_stage: dict = {}
    for d in result["predictions"]:
        by_stage.setdefault(d["stage"], {})[d["variant"]] = d
    rows = []
    for stage, vs in by_stage.items():
        best = next(vs[v] for v in ANSWER_ORDER + tuple(vs) if v in vs)
        rows.append((stage, best, vs))
    return rows


def _answer(result) -> list[str]:
    """Per stage: the predicted time, its bottleneck and interval; when validated, the measured time, the error and
    the runs' spread beside it."""
    e = _e
    rows = _answer_rows(result)
    validated = any("measured_s" in d for _, d, _ in rows)
    hdr = ["stage", "predicted I/O time", "90% interval", "bottleneck"]
    if validated:
        hdr += ["measured", "error", "the runs' spread"]
    if len({d["variant"] for _, d, _ in rows}) == 1:
        variant = rows[0][1]["variant"]
    else:
        variant = None
        hdr.insert(1, "variant")
    out = ["<table class=answer><tr>" + "".join(f"<th{' class=l' if h in ('stage', 'bottleneck', 'variant') else ''}>"
                                                f"{e(h)}</th>" for h in hdr) + "</tr>"]
    for stage, d, vs in rows:
        iv = d.get("interval")
        cells = [f"<td class=l><b>{e(stage)}</b></td>"] + ([f"<td class=l>{e(d['variant'])}</td>"] if not variant
                                                            else [])
        cells += [f"<td><b>{fmt_s(d['total_s'])}</b></td>", f"<td>{fmt_interval(*iv) if iv else '—'}</td>",
                  f"<td class=l>{e(d['dominant'])}</td>"]
        if validated:
            cells += [f"<td>{fmt_s(d.get('measured_s'))}</td>", f"<td>{fmt_pct(d.get('error_pct'), signed=True)}</td>",
                      f"<td>{fmt_pct(d.get('noise_pct'))}</td>"]
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    notes = [f"Predicted by the <b>{e(variant)}</b> model." if variant else
             "Each stage's most corrected prediction (calibrated, else refined, else faithful)."]
    if any(d.get("interval") for _, d, _ in rows):
        notes.append(e(INTERVAL_SAID) + ".")
    else:
        notes.append("— in the interval: none computed (--bootstrap 0).")
    if validated:
        notes.append("Measured: per host, its tasks' traced I/O time divided by its slots, the maximum over hosts "
                     "(the mean over the validated runs). Error: predicted / measured − 1. The runs' spread: "
                     "(slowest − fastest run) / mean; an error within it is within the noise; — where one run "
                     "was validated.")
    out.append("<p class=note>" + " ".join(notes) + "</p>")
    return out


def _hosts_line(result, wf, surface) -> str | None:
    """One line on what predicting for more hosts than the envelope was measured on means for a decision."""
    measured = max((h for _, h in surface.grids), default=None)
    used = max((st.hosts for st in wf.stages), default=None)
    if not measured or not used or used <= measured:
        return None
    return (f"<p><b>{used} hosts predicted from an envelope measured on {measured}.</b> Each look-up is taken from "
            f"the {measured}-host points at the same concurrency (processes in I/O at once), which assumes the "
            f"file system's servers keep up with {used} hosts as with {measured}: where the metadata server (one "
            f"gfmd) or the network saturates between {measured} and {used} hosts, the times are optimistic. "
            f"Measure the envelope on {used} hosts before buying or sizing for them.</p>")


def _short(text: str, limit: int = 110) -> str:
    """A warning in one line: cut at a word before `limit` characters, with what was left out counted."""
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0].rstrip(",;:")
    return f"{cut} …"


def _warnings(result) -> list[str]:
    ws = result.get("warnings", [])
    if not ws:
        return []
    out = [f"<h3>Warnings ({len(ws)})</h3>"]
    for w in ws:
        if len(w) <= 110:
            out.append(f"<p class=warn>{_e(w)}</p>")
        else:
            out.append(f"<details class=w><summary>{_e(_short(w))}</summary><p>{_e(w)}</p></details>")
    return out


def _stage_table(result) -> list[str]:
    e = _e
    validated = any("measured_s" in d for d in result["predictions"])
    hdr = ["stage", "variant", "N", "C", "slots", "k", "rounds", "D", "α", "read", "write", "meta", "total",
           "90% interval", "bound"] + (["measured", "error", "noise"] if validated else [])
    left = ("stage", "variant", "bound")
    out = ["<table><tr>" + "".join(f"<th{' class=l' if h in left else ''}>{e(h)}</th>" for h in hdr) + "</tr>"]
    for d in result["predictions"]:
        iv = d.get("interval")
        cells = [e(d["stage"]), e(d["variant"]), f"{d['N']:,}", d["C"], d["slots"], f"{d['k']:g}", f"{d['rounds']:,}",
                 fmt_bytes(d["D"] or d.get("D_write")), f"{d['alpha']:.2f}", fmt_s(d["read_s"]), fmt_s(d["write_s"]),
                 fmt_s(d["meta_s"]), fmt_s(d["total_s"]), fmt_interval(*iv) if iv else "—",
                 e(d["dominant"] + (f" [{d['write_bound']}]" if d.get("write_bound") else ""))]
        if validated:
            cells += [fmt_s(d.get("measured_s")), fmt_pct(d.get("error_pct"), signed=True),
                      fmt_pct(d.get("noise_pct"))]
        out.append("<tr>" + "".join(f"<td{' class=l' if i in (0, 1, 14) else ''}>{c}</td>"
                                    for i, c in enumerate(cells)) + "</tr>")
    out.append("</table><p class=note>N tasks, C nodes, slots = nodes × processes per node, k processes in I/O at "
               "once, D bytes per task file (written, when the stage reads none), α the share of 1-to-1 reads that "
               "are local. — : no such value (no interval with --bootstrap 0; no spread with one validated run).</p>")
    return out


def _attribution(result) -> list[str]:
    e = _e
    out = ["<table><tr><th class=l>stage</th><th class=l>variant</th>"
           + "".join(f"<th>{e(TERM_LABEL[t])}</th>" for t in TERMS) + "</tr>"]
    for d in result["predictions"]:
        out.append(f"<tr><td class=l>{e(d['stage'])}</td><td class=l>{e(d['variant'])}</td>"
                   + "".join(f"<td>{100 * d['shares'].get(t, 0):.1f} %"
                             + (f" <small>({e(d['bounds'].get(t, ''))})</small>" if d["terms"].get(t) else "")
                             + "</td>" for t in TERMS) + "</tr>")
    out.append("</table>")
    return out


def _balance(measured) -> list[str]:
    e = _e
    out = ["<table><tr><th class=l>stage</th><th>hosts</th><th>host I/O time max/mean</th><th>host bytes max/mean</th>"
           "<th>rounds</th><th>slowest/median task, mean</th><th>worst</th><th>I/O concurrency</th><th>span</th></tr>"]
    for name, m in measured.items():
        r = m["rounds"]
        out.append(f"<tr><td class=l>{e(name)}</td><td>{m['hosts']}</td><td>{_t(m['balance_time'])}×</td>"
                   f"<td>{_t(m['balance_bytes'])}×</td><td>{r['n']}</td>"
                   f"<td>{_t(r['slowest_over_median_mean'])}×</td><td>{_t(r['slowest_over_median_max'])}×</td>"
                   f"<td>{_t(m.get('io_concurrency'))}</td><td>{fmt_s(m['span_s'])}</td></tr>")
    out.append("</table>")
    return out


def _lookup_value(lk) -> str:
    return fmt_rate(lk["value"], UNIT.get(str(lk.get("metric", "T"))[:1], "ops/s")) if lk.get("value") is not None \
        else "—"


def _lookups(result) -> list[str]:
    """The envelope values each prediction used, one collapsed block per stage and variant; a note that every
    row of a block shares is said once above its table."""
    e = _e
    out = []
    for d in result["predictions"]:
        lks = list((d.get("lookups") or {}).items())
        if not lks:
            continue
        parts = [[p.strip() for p in str(lk.get("note") or "").split(";") if p.strip()] for _, lk in lks]
        common = [p for p in parts[0] if all(p in q for q in parts)] if len(lks) > 1 else []
        rows = []
        for (name, lk), ps in zip(lks, parts):
            size = lk.get("size")
            rest = "; ".join(p for p in ps if p not in common)
            rows.append(f"<tr><td class=l>{e(lk.get('metric', name))}</td>"
                        f"<td>{fmt_bytes(size) if isinstance(size, (int, float)) else '—'}</td>"
                        f"<td>{_t(lk.get('k'))}</td><td>{_lookup_value(lk)}</td><td class=l>{e(lk['source'])}</td>"
                        f"<td class=l>{e(rest) if rest else '—'}</td></tr>")
        out.append(f"<details><summary>{e(d['stage'])}, {e(d['variant'])}: {len(lks)} look-ups</summary>"
                   + (f"<p class=note>All of them: {e('; '.join(common))}.</p>" if common else "")
                   + "<table><tr><th class=l>metric</th><th>file size</th><th>k</th><th>value</th><th class=l>source"
                     "</th><th class=l>note</th></tr>" + "".join(rows) + "</table></details>")
    if out:
        out.append("<p class=note>k: processes in I/O at once. Source: measured (a point of the envelope), "
                   "interpolated (between points), clamped (outside the measured sizes, taken at the nearest), "
                   "extrapolated (beyond the measured concurrency, by regression). — : no further note.</p>")
    return out


def _img(imgs, key) -> list[str]:
    img = imgs.get(key)
    if not img:
        return []
    return [f"<h3>{_e(SECTION_TITLE[key])}</h3><img alt='{_e(img[0])}' src='data:image/png;base64,{img[1]}'>"]


def _html(result, imgs, measured, wf, surface, envelope=None):
    e = _e
    env = result["envelope"]
    prov = env.get("provenance") or {}
    parts = ["<!doctype html><meta charset=utf-8><title>mtcpredict report</title>"
             "<meta name=viewport content='width=device-width'>", f"<style>{STYLE}</style>",
             "<h1>mtcpredict: predicted I/O time per stage</h1>"]
    at = result.get("at")
    if at:     # a size and host count never traced: say so first, with what was assumed
        parts.append(f"<p><b>Predicted at size {at['size']:g} on {at['hosts']} hosts x {at['procs']} slots</b>, "
                     "from a model fitted over traced runs of other sizes"
                     + (f"; task counts from the graph {e(str(at['graph']))}" if at.get("graph") else "") + ".</p>")
    parts += _answer(result)
    line = _hosts_line(result, wf, surface)
    if line:
        parts.append(line)
    ws = result.get("warnings", [])
    parts.append(f"<p class=note>Envelope <b>{e(str(env['name']))}</b> from {e(str(env['origin']))}"
                 + (f" (measured {e(str(prov.get('started', '')))} on {e(str(prov.get('testbed', '')))})" if prov
                    else "")
                 + (f"; {CELL_RATE_SAID[env['cell_rate']]}" if env.get("cell_rate") in CELL_RATE_SAID else "")
                 + (f". Validated against traced run(s): {e(', '.join(result['validated_runs']))}"
                    if result.get("validated_runs") else "")
                 + (f". {len(ws)} warning{'s' if len(ws) != 1 else ''} about the envelope's coverage and the "
                    f"stages' calls: <a href='#details'>details</a>" if ws else "") + ".</p>")
    parts.append("<h2>Maps</h2>")
    for key in ("parity", "maps", "stage_time", "dominant", "whatif"):
        parts += _img(imgs, key)
    parts.append("<h2>Envelope</h2>")
    parts += _img(imgs, "envelope")
    parts += _envelope_waits(envelope)
    parts.append("<h2 id=details>Details</h2>")
    parts += _warnings(result)
    if at and at.get("notes"):
        parts.append("<h3>How the model was instantiated</h3><ul>"
                     + "".join(f"<li>{e(n)}</li>" for n in at["notes"]) + "</ul>")
    parts.append("<h3>Stages, every variant</h3>")
    parts += _stage_table(result)
    parts.append("<h3>Attribution (share of each stage's predicted time)</h3>")
    parts += _attribution(result)
    if measured:
        parts.append("<h3>Balance of the traced run (the formulas assume balanced rounds)</h3>")
        parts += _balance(measured)
    parts += _conditions(wf)
    lk = _lookups(result)
    if lk:
        parts.append("<h3>Envelope values used</h3>")
        parts += lk
    notes = sorted({(d["stage"], n) for d in result["predictions"] for n in d.get("notes", [])})
    if notes:
        groups: dict = {}
        for st, n in notes:
            groups.setdefault(n, []).append(st)
        parts.append(f"<details><summary>Notes ({len(groups)})</summary><ul>"
                     + "".join(f"<li>{e(', '.join(sts))}: {e(n)}</li>" for n, sts in groups.items())
                     + "</ul></details>")
    if result.get("what_if"):
        parts.append("<h3>What-if (refined)</h3><table><tr><th class=l>what-if</th><th class=l>stage</th><th>N</th>"
                     "<th>C</th><th>α</th><th>read</th><th>write</th><th>meta</th><th>total</th>"
                     "<th class=l>bound</th></tr>")
        for r in result["what_if"]:
            parts.append(f"<tr><td class=l>{e(r['what_if'])}</td><td class=l>{e(r['stage'])}</td><td>{r['N']:,}</td>"
                         f"<td>{r['C']}</td><td>{r['alpha']:.2f}</td><td>{fmt_s(r['read_s'])}</td>"
                         f"<td>{fmt_s(r['write_s'])}</td><td>{fmt_s(r['meta_s'])}</td><td>{fmt_s(r['total_s'])}</td>"
                         f"<td class=l>{e(r['dominant'])}</td></tr>")
        parts.append("</table>")
    cal = result.get("calibration")
    if cal:
        parts.append(f"<h3>Calibration</h3><p>{e(str(cal.get('summary', '')))}</p>")
    return "\n".join(parts)
