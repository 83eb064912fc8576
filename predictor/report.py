"""`mtcpredict --out DIR`: PNG maps and one self-contained HTML page for site admins."""
from __future__ import annotations

import base64
import html
import io
import math
import os

import numpy as np

from mtcio.db.store import readable, write_private   # 0600 whatever the umask, replaced atomically

from . import heatmap
from .model import TERM_LABEL, TERMS
from .surface import SIZELESS, fmt_size, op_clock
from .table import CELL_RATE_SAID, INTERVAL_SAID

CLASS_METRIC = (("write (1 create per round)", "TL"), ("1-to-1 read, local", "T1L"), ("1-to-1 read, remote", "T1R"),
                ("N-to-1 read", "TN"))


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams["text.usetex"] = False
    return plt


def _label(s: str) -> str:
    """Stage names as plain text in matplotlib (a $ would start mathtext; an undecodable byte, which no font can
    draw, as \\xNN)."""
    return readable(s).replace("$", r"\$")


def _e(x) -> str:
    """A name or value in the page's HTML: undecodable bytes and control characters as \\xNN (the page is UTF-8
    text, a name from the trace need not be), then escaped."""
    return html.escape(str(readable(x)))


def _save(fig, out, name):
    buf = io.BytesIO()
    for ax in fig.axes:                 # minor ticks of log axes cost more to draw than the rest of a figure
        ax.minorticks_off()
    fig.savefig(buf, format="png", dpi=80)
    data = buf.getvalue()
    write_private(os.path.join(out, name), data)
    return name, base64.b64encode(data).decode()


def _sizeticks(ax, sizes):
    ticks = [t for t in (1 << 10, 1 << 14, 1 << 17, 1 << 20, 1 << 24, 1 << 27, 1 << 30) if sizes[0] <= t <= sizes[-1]]
    ax.set_xticks(ticks)
    ax.set_xticklabels([fmt_size(t, sep="", short=True) for t in ticks])


def _maps(plt, out, surface, wf, sizes, ks):
    from matplotlib.colors import LogNorm
    fig, axs = plt.subplots(2, 2, figsize=(11, 8.5), constrained_layout=True)
    hosts = wf.stages[0].hosts
    for ax, (title, m) in zip(axs.flat, CLASS_METRIC):
        if m not in surface.metrics():
            ax.set_title(f"{title}: not in the envelope")
            ax.axis("off")
            continue
        bw = heatmap.bandwidth(surface, m, sizes, ks, hosts, with_create=(m == "TL" and "Tm" in surface.metrics()))
        pc = ax.pcolormesh(sizes, ks, bw, norm=LogNorm(), shading="auto", cmap="viridis")
        fig.colorbar(pc, ax=ax, label="predicted bandwidth (bytes/s)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        _sizeticks(ax, sizes)
        ax.set_xlabel("file size")
        ax.set_ylabel("concurrency k (processes in I/O)")
        ax.set_title(title)
        marks = {}
        for st in wf.stages:
            d = st.write.file_size if m == "TL" else st.read.file_size
            if m == "TN" and st.shared.files:
                x = st.shared.bytes / st.shared.files
            elif d and d.mean > 0 and m != "TN":
                x = d.mean
            else:
                continue
            k = st.hosts * (st.procs_per_host or 1)
            near = next((p for p in marks if abs(math.log(p[0] / x)) < 0.3 and abs(math.log(p[1] / k)) < 0.1), (x, k))
            marks.setdefault(near, []).append(_label(st.name))
        for (x, k), names in marks.items():   # stages at (about) one point share one mark and one label
            ax.plot([x], [k], "o", mfc="none", mec="red", ms=9)
            ax.annotate(", ".join(names), (x, k), textcoords="offset points", xytext=(6, 4), color="red", fontsize=8)
    r = _save(fig, out, "maps.png")
    plt.close(fig)
    return r


def _stage_times(plt, out, surface, stages, sizes):
    from matplotlib.colors import LogNorm
    sel = stages[:4]
    fig, axs = plt.subplots(1, len(sel), figsize=(5 * len(sel), 4), constrained_layout=True, squeeze=False)
    sizes = sizes[::2]                   # a whole prediction per cell: half the columns of the other maps
    for ax, st in zip(axs[0], sel):
        nodes = np.array(sorted({1, 2, 4, 8, 16, 32, 64, st.hosts}))
        t = heatmap.stage_time(surface, st, sizes, nodes)
        pc = ax.pcolormesh(sizes, np.arange(len(nodes)), t, norm=LogNorm(), shading="nearest", cmap="magma_r")
        fig.colorbar(pc, ax=ax, label="predicted I/O time (s)")
        ax.set_xscale("log")
        _sizeticks(ax, sizes)
        ax.set_yticks(range(len(nodes)))
        ax.set_yticklabels([str(n) for n in nodes])
        ax.set_xlabel("task file size")
        ax.set_ylabel("nodes C")
        ax.set_title(f"{_label(st.name)}: N={st.tasks}, {st.procs_per_host or 1} per node")
        d = st.write.file_size or st.read.file_size
        if d and d.mean > 0:
            ax.plot([d.mean], [list(nodes).index(st.hosts)], "o", mfc="none", mec="cyan", ms=10)
    r = _save(fig, out, "stage_time.png")
    plt.close(fig)
    return r


def _dominant(plt, out, surface, st, sizes, ks):
    from matplotlib.colors import ListedColormap
    idx = heatmap.dominant(surface, st, sizes, ks, st.hosts)
    cmap = ListedColormap(["#8c564b", "#2ca02c", "#d62728", "#9467bd", "#1f77b4"])
    fig, ax = plt.subplots(figsize=(7, 5), constrained_layout=True)
    ax.pcolormesh(sizes, ks, idx, cmap=cmap, vmin=-0.5, vmax=4.5, shading="auto")
    ax.set_xscale("log")
    ax.set_yscale("log")
    _sizeticks(ax, sizes)
    ax.set_xlabel(f"largest task file (every file of the task scaled with it; {_label(st.name)}'s is marked)")
    ax.set_ylabel("concurrency k")
    ax.set_title(f"dominant term for a task shaped like {_label(st.name)}")
    from matplotlib.patches import Patch
    present = sorted(set(np.unique(idx)))
    ax.legend(handles=[Patch(color=cmap(i), label=heatmap.DOMINANT_LABELS[i]) for i in present],
              loc="upper left", fontsize=8)
    ax.plot([heatmap.reference_size(st)], [st.hosts * (st.procs_per_host or 1)], "o", mfc="none", mec="white", ms=10)
    r = _save(fig, out, "dominant.png")
    plt.close(fig)
    return r


def _envelope(plt, out, surface):
    metrics = [m for m in ("Tm", "Ts", "Tf", "T1L", "B1L", "T1R", "B1R", "TN", "BN", "TL", "BL") if m in surface.metrics()]
    rows = -(-len(metrics) // 3)
    fig, axs = plt.subplots(rows, 3, figsize=(12, 3.4 * rows), constrained_layout=True, squeeze=False)
    for ax, m in zip(axs.flat, metrics):
        h, g = surface.grid_for(m, None)
        means = surface._means[(m, h)]
        if m in SIZELESS:
            ks = g.ks
            ax.plot(ks, [means.get((g.sizes[0], k), np.nan) for k in ks], "o-")
            ax.set_xscale("log")
            ax.set_xlabel("concurrency k")
        else:
            dense = np.exp(np.linspace(math.log(g.sizes[0]), math.log(g.sizes[-1]), 60))
            for k in g.ks:
                line = heatmap.grid_values(surface, m, dense, np.array([float(k)]), h)[0]
                p = ax.plot(dense, line, "-", lw=1)
                ax.plot(g.sizes, [means.get((s, k), np.nan) for s in g.sizes], "o", color=p[0].get_color(),
                        label=f"k={k}")
            ax.set_xscale("log")
            _sizeticks(ax, dense)
            ax.set_xlabel("file size")
            ax.legend(fontsize=7)
        ax.set_yscale("log")
        ax.set_title(f"{m} ({'bytes/s' if m.startswith('B') else 'ops/s'}), {h} hosts")
    for ax in list(axs.flat)[len(metrics):]:
        ax.axis("off")
    r = _save(fig, out, "envelope.png")
    plt.close(fig)
    return r


def _parity(plt, out, rows, wf):
    # log axes: a prediction of 0 s (a stage whose refined I/O is all absorbed) has no place on them; the tables
    # give it
    val = [d for d in rows if d.get("measured_s") and d["total_s"] > 0]
    if not val:
        return None
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 5), constrained_layout=True)
    for v, mk in (("faithful", "s"), ("refined", "o"), ("calibrated", "^")):
        pts = [d for d in val if d["variant"] == v]
        if pts:
            a1.plot([d["measured_s"] for d in pts], [d["total_s"] for d in pts], mk, label=v, alpha=0.8)
    lo = min(min(d["measured_s"], d["total_s"]) for d in val) / 1.5
    hi = max(max(d["measured_s"], d["total_s"]) for d in val) * 1.5
    a1.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    a1.fill_between([lo, hi], [lo / 1.2, hi / 1.2], [lo * 1.2, hi * 1.2], color="grey", alpha=0.15, label="±20 %")
    a1.set_xscale("log")
    a1.set_yscale("log")
    a1.set_xlabel("measured I/O time (s)")
    a1.set_ylabel("predicted (s)")
    a1.legend()
    a1.set_title("parity")
    ref = [d for d in val if d["variant"] == "refined"] or val
    xs, ys, cs = [], [], []
    for d in ref:
        st = wf.stage(d["stage"])
        f = st.write.file_size or st.read.file_size
        xs.append(f.mean if f and f.mean > 0 else 1.0)
        ys.append(d["slots"])
        cs.append(d["total_s"] / d["measured_s"])
    sc = a2.scatter(xs, ys, c=np.log2(cs), cmap="coolwarm", vmin=-1, vmax=1, s=120, edgecolors="k")
    cb = fig.colorbar(sc, ax=a2)
    cb.set_label("predicted / measured (log2)")
    for x, y, d in zip(xs, ys, ref):
        a2.annotate(_label(d["stage"]), (x, y), textcoords="offset points", xytext=(6, 6), fontsize=8)
    a2.set_xscale("log")
    a2.set_yscale("log")
    a2.set_xlabel("task file size")
    a2.set_ylabel("slots")
    a2.set_title(f"{ref[0]['variant']} predicted / measured by stage")
    r = _save(fig, out, "parity.png")
    plt.close(fig)
    return r


def _whatif(plt, out, rows):
    """Dominant term per (what-if, stage), the predicted total written in each cell."""
    if not rows:
        return None
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch
    combos = list(dict.fromkeys(r["what_if"] for r in rows))
    stages = list(dict.fromkeys(r["stage"] for r in rows))
    kinds = list(dict.fromkeys(r["dominant"] for r in rows))
    grid = np.zeros((len(combos), len(stages)))
    fig, ax = plt.subplots(figsize=(2 + 1.6 * len(stages), 1 + 0.35 * len(combos)), constrained_layout=True)
    for r in rows:
        i, j = combos.index(r["what_if"]), stages.index(r["stage"])
        grid[i, j] = kinds.index(r["dominant"])
        ax.text(j, i, f"{r['total_s']:.3g} s", ha="center", va="center", fontsize=7)
    cmap = ListedColormap(["#c6dbef", "#fdd0a2", "#c7e9c0", "#dadaeb", "#fcbba1", "#d9d9d9", "#fee391",
                           "#a1d99b"][:max(1, len(kinds))])
    ax.imshow(grid, cmap=cmap, vmin=-0.5, vmax=len(kinds) - 0.5, aspect="auto")
    ax.set_xticks(range(len(stages)))
    ax.set_xticklabels([_label(s) for s in stages], rotation=30, ha="right")
    ax.set_yticks(range(len(combos)))
    ax.set_yticklabels(combos, fontsize=8)
    ax.legend(handles=[Patch(color=cmap(i), label=k) for i, k in enumerate(kinds)], fontsize=7,
              loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.set_title("what-if: dominant term and predicted I/O time (refined)")
    r = _save(fig, out, "whatif.png")
    plt.close(fig)
    return r


def write_report(out, result, wf, surface, preds, measured, envelope=None):
    plt = _plt()
    sizes, ks = heatmap.axes(surface, wf.stages)
    refined = [p for p in preds if p.variant == "refined"] or preds
    main = max(refined, key=lambda p: p.total_s)
    order = sorted(wf.stages, key=lambda s: -max((p.total_s for p in refined if p.stage == s.name), default=0))
    imgs = [("Predicted bandwidth by access class (the workflow's stages marked)", _maps(plt, out, surface, wf, sizes,
                                                                                          ks)),
            ("Predicted stage I/O time over task file size and node count", _stage_times(plt, out, surface, order,
                                                                                           sizes)),
            ("Dominant term", _dominant(plt, out, surface, wf.stage(main.stage), sizes, ks)),
            ("The envelope used (points: measured means; lines: the surface between them)", _envelope(plt, out,
                                                                                                       surface))]
    par = _parity(plt, out, result["predictions"], wf)
    if par:
        imgs.insert(0, ("Predicted vs measured", par))
    wi = _whatif(plt, out, result.get("what_if"))
    if wi:
        imgs.append(("What-if: where the bottleneck moves", wi))
    page = _html(result, imgs, measured, wf, envelope)
    path = os.path.join(out, "report.html")
    write_private(path, page)
    return path


def _t(x):
    if x is None:
        return "–"
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
    out = ["<h2>Traced conditions per stage (workflow model)</h2><table><tr><th class=l>stage</th>"
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
    out = [f"<h2>Envelope {e(str(envelope.name))}: its ops' time waiting for a CPU</h2><table><tr><th class=l>"
           "metric</th>" + "".join(f"<th>{h} hosts x {n}</th>" for h, n in cols) + "</tr>"]
    for m in sorted({m for m, _, _ in acc}):
        cells = (acc.get((m, h, n)) for h, n in cols)
        out.append(f"<tr><td class=l>{e(m)}</td>"
                   + "".join(f"<td>{100 * a[0] / a[1]:.0f} %</td>" if a else "<td>–</td>" for a in cells) + "</tr>")
    out.append("</table>")
    return out


def _html(result, imgs, measured, wf, envelope=None):
    e = _e
    env = result["envelope"]
    prov = env.get("provenance") or {}
    parts = ["<!doctype html><meta charset=utf-8><title>mtcpredict report</title><style>"
             "body{font:14px sans-serif;margin:2em;max-width:1400px} table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:3px 6px;text-align:right} th{background:#eee}"
             "td.l,th.l{text-align:left} .warn{color:#a50} img{max-width:100%}</style>",
             "<h1>mtcpredict: predicted I/O time per stage</h1>",
             f"<p>Envelope <b>{e(str(env['name']))}</b> from {e(str(env['origin']))}"
             + (f" (measured {e(str(prov.get('started', '')))} on {e(str(prov.get('testbed', '')))})" if prov else "")
             + (f"; {CELL_RATE_SAID[env['cell_rate']]}" if env.get("cell_rate") in CELL_RATE_SAID else "") + "</p>"]
    at = result.get("at")
    if at:     # a size and host count never traced: say so first, with what was assumed
        parts.append(f"<p><b>Predicted at size {at['size']:g} on {at['hosts']} hosts x {at['procs']} slots</b>, "
                     "from a model fitted over traced runs of other sizes"
                     + (f"; task counts from the graph {e(str(at['graph']))}" if at.get("graph") else "")
                     + ".</p><ul>" + "".join(f"<li>{e(n)}</li>" for n in at.get("notes", [])) + "</ul>")
    if result.get("validated_runs"):
        parts.append(f"<p>Validated against traced run(s): {e(', '.join(result['validated_runs']))}. Measured = per "
                     "host, the sum of its tasks' traced I/O time divided by its slots; the maximum over hosts.</p>")
    for w in result.get("warnings", []):
        parts.append(f"<p class=warn>warning: {e(w)}</p>")
    hdr = ["stage", "variant", "N", "C", "slots", "k", "rounds", "D", "α", "read s", "write s", "meta s", "total s",
           "90% interval", "bound", "measured s", "error %", "noise %"]
    left = ("stage", "variant", "bound")
    parts.append("<h2>Stages</h2><table><tr>"
                 + "".join(f"<th{' class=l' if h in left else ''}>{e(h)}</th>" for h in hdr) + "</tr>")
    for d in result["predictions"]:
        iv = d.get("interval")
        cells = [d["stage"], d["variant"], d["N"], d["C"], d["slots"], d["k"], d["rounds"], d["D"], d["alpha"],
                 d["read_s"], d["write_s"], d["meta_s"], d["total_s"],
                 f"{_t(iv[0])} – {_t(iv[1])}" if iv else None,
                 d["dominant"] + (f" [{d['write_bound']}]" if d.get("write_bound") else ""),
                 d.get("measured_s"), d.get("error_pct"), d.get("noise_pct")]
        parts.append("<tr>" + "".join(f"<td{' class=l' if i in (0, 1, 14) else ''}>{_t(c)}</td>"
                                      for i, c in enumerate(cells)) + "</tr>")
    parts.append("</table>")
    if any(d.get("interval") for d in result["predictions"]):
        parts.append(f"<p>{e(INTERVAL_SAID)}.</p>")
    parts.append("<h2>Attribution (share of each stage's predicted time)</h2><table><tr><th class=l>stage</th>"
                 "<th class=l>variant</th>" + "".join(f"<th>{e(TERM_LABEL[t])}</th>" for t in TERMS) + "</tr>")
    for d in result["predictions"]:
        parts.append(f"<tr><td class=l>{e(d['stage'])}</td><td class=l>{e(d['variant'])}</td>"
                     + "".join(f"<td>{100 * d['shares'].get(t, 0):.1f} %"
                               + (f" <small>({e(d['bounds'].get(t, ''))})</small>" if d["terms"].get(t) else "")
                               + "</td>" for t in TERMS) + "</tr>")
    parts.append("</table>")
    if measured:
        parts.append("<h2>Balance of the traced run (the formulas assume balanced rounds)</h2><table><tr>"
                     "<th class=l>stage</th><th>hosts</th><th>host I/O time max/mean</th><th>host bytes max/mean</th>"
                     "<th>rounds</th><th>slowest/median task, mean</th><th>worst</th><th>I/O concurrency</th>"
                     "<th>span s</th></tr>")
        for name, m in measured.items():
            r = m["rounds"]
            parts.append(f"<tr><td class=l>{e(name)}</td><td>{m['hosts']}</td><td>{_t(m['balance_time'])}</td>"
                         f"<td>{_t(m['balance_bytes'])}</td><td>{r['n']}</td>"
                         f"<td>{_t(r['slowest_over_median_mean'])}</td><td>{_t(r['slowest_over_median_max'])}</td>"
                         f"<td>{_t(m.get('io_concurrency'))}</td><td>{_t(m['span_s'])}</td></tr>")
        parts.append("</table>")
    parts += _conditions(wf)
    parts += _envelope_waits(envelope)
    for title, img in imgs:
        if img:
            parts.append(f"<h2>{e(title)}</h2><img alt='{e(img[0])}' src='data:image/png;base64,{img[1]}'>")
    parts.append("<h2>Envelope values used</h2><table><tr><th class=l>stage</th><th class=l>variant</th>"
                 "<th class=l>look-up</th><th>value</th><th class=l>source</th><th class=l>note</th></tr>")
    for d in result["predictions"]:
        for name, lk in (d.get("lookups") or {}).items():
            parts.append(f"<tr><td class=l>{e(d['stage'])}</td><td class=l>{e(d['variant'])}</td>"
                         f"<td class=l>{e(name)}</td><td>{_t(lk['value'])}</td><td class=l>{e(lk['source'])}</td>"
                         f"<td class=l>{e(lk['note'])}</td></tr>")
    parts.append("</table>")
    notes = sorted({(d["stage"], n) for d in result["predictions"] for n in d.get("notes", [])})
    if notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{e(s)}: {e(n)}</li>" for s, n in notes) + "</ul>")
    if result.get("what_if"):
        parts.append("<h2>What-if (refined)</h2><table><tr><th class=l>what-if</th><th class=l>stage</th><th>N</th>"
                     "<th>C</th><th>α</th><th>read s</th><th>write s</th><th>meta s</th><th>total s</th>"
                     "<th class=l>bound</th></tr>")
        for r in result["what_if"]:
            parts.append(f"<tr><td class=l>{e(r['what_if'])}</td><td class=l>{e(r['stage'])}</td><td>{r['N']}</td>"
                         f"<td>{r['C']}</td><td>{_t(r['alpha'])}</td><td>{_t(r['read_s'])}</td>"
                         f"<td>{_t(r['write_s'])}</td><td>{_t(r['meta_s'])}</td><td>{_t(r['total_s'])}</td>"
                         f"<td class=l>{e(r['dominant'])}</td></tr>")
        parts.append("</table>")
    cal = result.get("calibration")
    if cal:
        parts.append(f"<h2>Calibration</h2><p>{e(str(cal.get('summary', '')))}</p>")
    return "\n".join(parts)
