"""`mtcprof report --db DB --run R -o DIR`: one self-contained HTML page (DIR/index.html) about a traced run.

The page has the run's summary, the stage table (tasks, bytes, time in I/O, alpha, access classes), read locality per
stage and per host, the busiest files, access-size histograms per stage and a task timeline (host x time, coloured by
stage).  Figures are PNGs drawn with matplotlib (Agg), embedded as base64 data URIs and also written next to the page;
CSS is inline and there is no script, so the page opens anywhere, offline.  The folder is created 0700, its files
0600 (a trace's paths and commands are private).  Names that are not UTF-8 are shown with \\xNN for their bytes.
"""
from __future__ import annotations

import argparse
import base64
import datetime as _dt
import html
import io
import math
import os
import sys

import numpy as np
import pandas as pd

from mtcio.db import store as _store
from mtcio.db.logformat import HIST_BINS
from mtcio.exitcodes import BAD_INPUT, printable
from mtcio.units import fmt_bytes, fmt_s   # the same units in every table and page

PROG = "mtcprof report"


# ---- formatting --------------------------------------------------------------------------------------------------

def fmt_int(n) -> str:
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "—"
    return f"{int(n):,}"


def fmt_frac(x) -> str:
    if x is None or pd.isna(x):
        return "—"
    p = 100 * float(x)
    if 0 < p < 0.1:
        return "<0.1%"
    return f"{p:.1f}%" if p < 10 else f"{p:.0f}%"


def _e(x) -> str:
    return html.escape("" if x is None else str(x))


def _bytes_cell(n, exact: bool = True) -> str:
    """A table cell: human-readable size, with the exact byte count under it (and as tooltip)."""
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return '<td class="num">—</td>'
    sub = f'<br><span class="exact">{fmt_int(n)} B</span>' if exact and abs(n) >= 1024 else ""
    return f'<td class="num" title="{fmt_int(n)} bytes">{fmt_bytes(n)}{sub}</td>'


def _num(s) -> str:
    return f'<td class="num">{s}</td>'


def _table(header: list[str], rows: list[str], cls: str = "") -> str:
    th = "".join(f"<th>{h}</th>" for h in header)
    return (f'<div class="scroll"><table class="{cls}"><thead><tr>{th}</tr></thead><tbody>{"".join(rows)}</tbody>'
            f"</table></div>")


# ---- figures -----------------------------------------------------------------------------------------------------

def _plt():
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def stage_colors(stages: list[str]) -> dict:
    plt = _plt()
    cmap = plt.get_cmap("tab10" if len(stages) <= 10 else "tab20")
    return {s: cmap(i % cmap.N) for i, s in enumerate(stages)}


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    _plt().close(fig)
    return buf.getvalue()


def _lanes(starts, ends) -> list[int]:
    """Greedy lane per interval (in start order) so that overlapping intervals get different lanes."""
    free: list[float] = []
    out = []
    for s, e in zip(starts, ends):
        for i, f in enumerate(free):
            if f <= s:
                free[i] = e
                out.append(i)
                break
        else:
            free.append(e)
            out.append(len(free) - 1)
    return out


def timeline_png(tl: pd.DataFrame, colors: dict) -> bytes:
    """y = host, x = seconds since the run's first task start; one bar per task coloured by stage.  Tasks that
    overlap on a host are drawn in sub-rows of the host's band; failed tasks have a red hatched edge."""
    plt = _plt()
    from matplotlib.patches import Patch
    tl = tl.assign(host=tl["host"].fillna("?"), stage=tl["stage"].fillna("(no stage)"))
    hosts = sorted(tl["host"].unique())
    lanes = {}
    for h, g in tl.sort_values("start_s").groupby("host"):
        for tid, lane in zip(g["task_id"], _lanes(g["start_s"], g["end_s"])):
            lanes[tid] = lane
    nlanes = {h: max(lanes[t] for t in g["task_id"]) + 1 for h, g in tl.groupby("host")}
    height = min(14.0, 1.2 + 0.45 * len(hosts) + 0.04 * sum(nlanes.values()))
    fig, ax = plt.subplots(figsize=(12, max(2.6, height)))
    span = float(tl["end_s"].max()) or 1.0
    min_w = span / 1500  # a task shorter than a pixel still shows
    for stage, g in tl.groupby("stage", sort=False):
        for i, h in enumerate(hosts):
            gh = g[g["host"] == h]
            if not len(gh):
                continue
            n = nlanes[h]
            band = 0.8 / n
            for lane, gl in gh.groupby(gh["task_id"].map(lanes)):
                y = i - 0.4 + lane * band
                bars = [(s, max(e - s, min_w)) for s, e in zip(gl["start_s"], gl["end_s"])]
                failed = (gl["exit_status"].fillna(0) != 0).to_numpy()
                ok = [b for b, f in zip(bars, failed) if not f]
                bad = [b for b, f in zip(bars, failed) if f]
                lw = 0.3 if n * len(hosts) < 60 else 0
                if ok:
                    ax.broken_barh(ok, (y, band * 0.9), facecolors=colors[stage], edgecolor="black", linewidth=lw)
                if bad:
                    ax.broken_barh(bad, (y, band * 0.9), facecolors=colors[stage], edgecolor="red", linewidth=1.2,
                                   hatch="///")
    for i in range(len(hosts) - 1):
        ax.axhline(i + 0.5, color="#999", linewidth=0.6)
    ax.set_yticks(range(len(hosts)))
    ax.set_yticklabels(hosts)
    ax.set_ylim(len(hosts) - 0.5, -0.5)
    ax.set_xlim(0, span * 1.01)
    ax.set_xlabel("time since run start (s)")
    ax.set_ylabel("host")
    ax.grid(axis="x", alpha=0.3)
    handles = [Patch(facecolor=colors[s], edgecolor="black", label=s) for s in tl["stage"].drop_duplicates()]
    if (tl["exit_status"].fillna(0) != 0).any():
        handles.append(Patch(facecolor="white", edgecolor="red", hatch="///", label="failed task"))
    ax.legend(handles=handles, title="stage", loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9)
    ax.set_title("Task timeline (one bar per task)")
    return _png(fig)


def histograms_png(hist: pd.DataFrame, stages: list[str]) -> bytes:
    """Darshan-style access-size histograms: one panel per stage, read and write request counts per size bin."""
    plt = _plt()
    from matplotlib.ticker import MaxNLocator
    n = len(stages)
    ncols = min(3, n)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.1 * nrows), squeeze=False)
    x = np.arange(len(HIST_BINS))
    w = 0.4
    for k, stage in enumerate(stages):
        ax = axes[k // ncols][k % ncols]
        h = hist[hist["stage"] == stage]
        rd = h[h["kind"] == "read"].set_index("bin")["count"].reindex(HIST_BINS, fill_value=0).to_numpy()
        wr = h[h["kind"] == "write"].set_index("bin")["count"].reindex(HIST_BINS, fill_value=0).to_numpy()
        ax.bar(x - w / 2, rd, w, label="read", color="#4c72b0")
        ax.bar(x + w / 2, wr, w, label="write", color="#dd8452")
        top = max(int(rd.max()), int(wr.max()), 1)
        if top >= 100:
            ax.set_yscale("log")
            ax.set_ylim(0.8, top * 40)
        else:
            ax.set_ylim(0, top * 1.35 + 0.5)
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        for xs, vals in ((x - w / 2, rd), (x + w / 2, wr)):
            for xi, v in zip(xs, vals):
                if v:
                    ax.annotate(f"{v:,}", (xi, v), ha="center", va="bottom", fontsize=6, xytext=(0, 1),
                                textcoords="offset points", rotation=90 if v >= 100 else 0)
        ax.set_xticks(x)
        ax.set_xticklabels(HIST_BINS, rotation=45, ha="right", fontsize=7)
        ax.set_title(stage or "(no stage)", fontsize=10)
        ax.set_ylabel("requests")
        ax.set_xlabel("request size (bytes)", fontsize=8)
        if k == 0:
            ax.legend(fontsize=8)
    for k in range(n, nrows * ncols):
        axes[k // ncols][k % ncols].axis("off")
    fig.suptitle("Access sizes per stage (read/write calls per size bin)", fontsize=11)
    fig.tight_layout()
    return _png(fig)


def locality_png(loc: pd.DataFrame, label_col: str, title: str) -> bytes:
    """Horizontal stacked bars: bytes read local / remote / unknown per stage or host."""
    plt = _plt()
    labels = [str(v) or "(no stage)" for v in loc[label_col]]
    fig, ax = plt.subplots(figsize=(8, 0.9 + 0.35 * len(labels)))
    left = np.zeros(len(loc))
    tot = (loc["bytes_local"] + loc["bytes_remote"] + loc["bytes_unknown"]).to_numpy(dtype=float)
    tot[tot == 0] = 1
    for col, color, name in (("bytes_local", "#55a868", "local"), ("bytes_remote", "#c44e52", "remote"),
                             ("bytes_unknown", "#bbbbbb", "unknown")):
        v = loc[col].to_numpy(dtype=float) / tot * 100
        ax.barh(labels, v, left=left, color=color, label=name)
        left += v
    ax.set_xlim(0, 100)
    ax.invert_yaxis()
    ax.set_xlabel("% of bytes read")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    return _png(fig)


# ---- the page ----------------------------------------------------------------------------------------------------

CSS = """
body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:24px auto;max-width:1200px;
     padding:0 16px;color:#222;line-height:1.4}
h1{font-size:1.6em;margin-bottom:0.2em}h2{margin-top:1.6em;border-bottom:2px solid #ddd;padding-bottom:3px}
h3{margin-bottom:0.3em}
.meta{color:#555;font-size:0.92em}
table{border-collapse:collapse;margin:8px 0 12px 0;font-size:0.86em}
th,td{border:1px solid #d5d5d5;padding:3px 7px;vertical-align:top}
th{background:#f0f3f7;text-align:left;font-weight:600}
tbody tr:nth-child(even){background:#fafbfc}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.scroll{overflow-x:auto}
td.name{white-space:nowrap}
td.cls{white-space:nowrap;font-size:0.95em}
table.stages th{font-size:0.92em}
td.path{font-family:monospace;font-size:0.95em;word-break:break-all;max-width:480px}
.exact{color:#888;font-size:0.85em}
.note{color:#555;font-size:0.88em;max-width:1000px}
.warn{background:#fff4e5;border-left:4px solid #f0a030;padding:6px 10px}
.empty{background:#eef3fb;border-left:4px solid #4c72b0;padding:10px 14px;font-size:1.05em}
.swatch{display:inline-block;width:0.9em;height:0.9em;border:1px solid #555;vertical-align:middle;margin-right:4px}
img{max-width:100%;height:auto;border:1px solid #eee}
dl.summary{display:grid;grid-template-columns:max-content auto;gap:2px 16px;font-size:0.92em}
dl.summary dt{font-weight:600}dl.summary dd{margin:0}
"""


def _img(png: bytes, alt: str) -> str:
    return f'<img alt="{_e(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">'


def _when(ts) -> str:
    if ts is None or (isinstance(ts, float) and math.isnan(ts)):
        return "—"
    return _dt.datetime.fromtimestamp(float(ts)).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def _hex(rgba) -> str:
    return "#%02x%02x%02x" % tuple(int(round(255 * c)) for c in rgba[:3])


def _classes_text(ac: pd.DataFrame, stage) -> str:
    parts = []
    for r in ac[ac["stage"].fillna("") == (stage or "")].itertuples():
        f = "file" if r.files == 1 else "files"
        parts.append(f"<b>{_e(r[2])}</b> {r.files:,} {f} · {fmt_bytes(r.bytes)}")
    return "<br>".join(parts) or "—"


def _locality_rows(loc: pd.DataFrame, label_col: str) -> list[str]:
    rows = []
    for r in loc.itertuples():
        label = getattr(r, label_col) or "(no stage)"
        rows.append(f"<tr><td>{_e(label)}</td>{_bytes_cell(r.bytes_local)}{_bytes_cell(r.bytes_remote)}"
                    f"{_bytes_cell(r.bytes_unknown)}{_num(fmt_int(r.files_local))}{_num(fmt_int(r.files_remote))}"
                    f"{_num(fmt_frac(r.alpha))}{_num(fmt_frac(r.alpha_files))}</tr>")
    return rows


def build_report(s, run, outdir: str, top: int = 20, db_path: str | None = None) -> str:
    """Write outdir/index.html (and the PNGs beside it) for `run` of the open api.Store `s`; returns the page's path."""
    row = s.trace_run(run)
    name, rid = row["name"], int(row["id"])
    _store.private_dir(outdir)
    made = _dt.datetime.now().astimezone()
    tasks = s.tasks(rid)
    head = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>mtcprof report: {_e(name)}</title><style>{CSS}</style></head><body>\n"
            f"<h1>I/O report — run <code>{_e(name)}</code></h1>\n"
            f'<p class="meta">Run ingested {_e(_when(row["created"]))} · report made '
            f'{_e(made.strftime("%Y-%m-%d %H:%M:%S %Z"))} by mtcprof report · database '
            f"<code>{_e(os.path.abspath(db_path or s.path))}</code></p>\n")
    parts = [head]
    if not len(tasks):
        parts.append(f'<p class="empty">This run has no tasks: nothing was ingested for run '
                     f'<code>{_e(name)}</code> (no logs, or logs without any process of a task).</p>')
        parts.append(_warnings_section(s, rid))
        return _write(outdir, parts)
    with _plt().rc_context({"text.parse_math": False}):     # names are text: a stage "$\\foo$" is no formula
        parts.extend(_body(s, rid, tasks, outdir, top))
    return _write(outdir, parts)


def _write(outdir: str, parts: list[str]) -> str:
    parts.append("</body></html>\n")
    path = os.path.join(outdir, "index.html")
    _store.write_private(path, "".join(parts))
    return path


def _pwrake_section(s, rid, tasks: pd.DataFrame) -> list[str]:
    """Pwrake's own view (`mtcprof pwrake-import`): its exec host and declared input locality beside the trace's."""
    import sqlite3

    from mtcio.db.pwrake_import import compare
    old = s.conn.row_factory
    s.conn.row_factory = sqlite3.Row
    try:
        cmp = compare(s.conn, rid)
    except sqlite3.OperationalError:          # a db from before pwrake_tasks existed
        return []
    finally:
        s.conn.row_factory = old
    if not cmp:
        return []
    stage_of = dict(zip(tasks["name"], tasks["stage"].fillna("")))
    by = {}
    for c in cmp:
        st = by.setdefault(stage_of.get(c["task"], "(not traced)"), {"n": 0, "same": 0, "decl": [], "alpha": []})
        st["n"] += 1
        st["same"] += int(c["traced_host"] is not None and c["traced_host"] == c["exec_host"])
        if c["declared_local"] is not None:
            st["decl"].append(c["declared_local"])
        if c["alpha"] is not None:
            st["alpha"].append(c["alpha"])
    mean = lambda v: fmt_frac(sum(v) / len(v)) if v else "—"  # noqa: E731
    rows = [f"<tr><td>{_e(stage)}</td>{_num(fmt_int(v['n']))}{_num(fmt_int(v['same']))}{_num(mean(v['decl']))}"
            f"{_num(mean(v['alpha']))}</tr>" for stage, v in by.items()]
    trows = [f"<tr><td>{_e(c['task'])}</td><td>{_e(c['exec_host'] or '—')}</td><td>{_e(c['traced_host'] or '—')}</td>"
             f"{_num(fmt_frac(c['declared_local']) if c['declared_local'] is not None else '—')}"
             f"{_num(fmt_frac(c['alpha']) if c['alpha'] is not None else '—')}</tr>" for c in cmp[:200]]
    return ['<h3 id="pwrake">Pwrake\'s declared locality beside the measured one</h3>',
            '<p class="note">From Pwrake\'s own profile (task.csv): the host it ran each task on and the share of '
            "the task's declared inputs with a replica there (preq_loc, by file count); beside them the host the "
            "trace saw and α, the local share of the bytes the task really read.</p>",
            _table(["stage", "tasks", "same host", "declared local (mean)", "measured α (mean)"], rows),
            _table(["task", "Pwrake host", "traced host", "declared local", "measured α"], trows)
            + (f"<p>… {len(cmp) - 200} more tasks in table pwrake_tasks.</p>" if len(cmp) > 200 else "")]


def _gap_mark(gap_procs: dict, kind: str) -> str:
    """A number's note when some processes' capture could not tell all of it (Darshan logs)."""
    n = gap_procs.get(kind, 0)
    if not n:
        return ""
    what = {"module_partial": "more in files beyond Darshan's record limit",
            "dxt_partial": "DXT trace partial"}[kind]
    return f' <span class="warn">(+ {what}: {n:,} processes, <a href="#capture">capture</a>)</span>'


def _capture_note(gap_procs: dict, n_procs: int) -> str:
    """One line: what the Darshan logs of the run could not tell, and which numbers it touches."""
    from mtcio.db.darshan_log import GAP_TEXT
    parts = [f"{GAP_TEXT[k]} ({n:,} of {n_procs:,} processes)" for k, n in sorted(gap_procs.items())
             if k in GAP_TEXT]
    return ('<p class="warn" id="capture">Captured by Darshan: ' + "; ".join(_e(p) for p in parts)
            + ". Meta-data ops, opens/closes and the bytes of such copies in the tables below lack these.</p>")


def _warnings_section(s, rid) -> str:
    w = s.warnings(rid)
    if not len(w):
        return ""
    rows = [f'<tr><td class="path">{_e(r.log_path)}</td>{_num(fmt_int(r.offset))}<td>{_e(r.message)}</td></tr>'
            for r in w.head(50).itertuples()]
    more = f"<p class=note>… and {len(w) - 50:,} more.</p>" if len(w) > 50 else ""
    return (f'<h2 id="warnings">Ingest warnings ({len(w):,})</h2><p class="warn">Damaged logs, records the shim '
            f"dropped, unresolved replicas: the numbers above leave out what these lost.</p>"
            + _table(["log", "offset", "message"], rows) + more)


def _save(outdir: str, name: str, png: bytes) -> bytes:
    _store.write_private(os.path.join(outdir, name), png)
    return png


def _body(s, rid, tasks: pd.DataFrame, outdir: str, top: int) -> list[str]:
    st = s.stages(rid)
    ac = s.access_classes(rid)
    tf = s.task_files(rid)
    scope_gfarm = bool(len(tf) and tf["on_gfarm"].all() and tf["on_gfarm"].any())
    loc_stage = s.locality(rid, by="stage")
    order = {(x or ""): i for i, x in enumerate(st["stage"])}
    loc_stage = loc_stage.sort_values("stage", key=lambda c: c.map(lambda v: order.get(v, len(order))))
    loc_host = s.locality(rid, by="host")
    procs = s.processes(rid)
    stage_names = [x if x is not None else "" for x in st["stage"]]
    colors = stage_colors([x or "(no stage)" for x in stage_names])
    out = []

    # summary
    t0, t1 = int(tasks["start_ns"].min()), int(tasks["end_ns"].max())
    failed = int((tasks["exit_status"].fillna(0) != 0).sum())
    n_ops = int(procs["ops_traced"].fillna(0).sum()) if "ops_traced" in procs else 0
    files_dropped, ops_dropped = int(procs["files_dropped"].fillna(0).sum()), int(procs["ops_dropped"].fillna(0).sum())
    hosts = sorted(tasks["host"].dropna().unique())
    gaps = s.capture_gaps(rid)
    gap_procs = {k: g["process_id"].nunique() for k, g in gaps.groupby("kind")} if len(gaps) else {}
    summ = [("tasks", f"{len(tasks):,}" + (f" ({failed:,} failed)" if failed else "")),
            ("stages", f"{len(st):,}"),
            ("hosts", f"{len(hosts):,}: " + ", ".join(_e(h) for h in hosts[:12]) + (" …" if len(hosts) > 12 else "")),
            ("processes", f"{len(procs):,}"),
            ("span", f"{fmt_s((t1 - t0) / 1e9)} (first task start {_e(_when(t0 / 1e9))})"),
            ("bytes read", f"{fmt_bytes(tasks['bytes_read'].sum())} ({fmt_int(tasks['bytes_read'].sum())} B)"
             + _gap_mark(gap_procs, "module_partial")),
            ("bytes written",
             f"{fmt_bytes(tasks['bytes_written'].sum())} ({fmt_int(tasks['bytes_written'].sum())} B)"
             + _gap_mark(gap_procs, "module_partial")),
            ("time in I/O calls", f"{fmt_s(tasks['t_io_s'].sum())} summed over tasks "
                                  f"({fmt_frac(tasks['t_io_s'].sum() / max(tasks['duration_s'].sum(), 1e-12))} "
                                  f"of task time)"),
            ("op trace", (f"{n_ops:,} operations traced" if n_ops else "not recorded (run with MTCPROF_TRACE=ops)")
             + (f' <span class="warn">+ {ops_dropped:,} dropped (over MTCPROF_TRACE_MAX)</span>' if ops_dropped
                else "") + _gap_mark(gap_procs, "dxt_partial")),
            ("files in the analyses", "Gfarm files only" if scope_gfarm else "all files the tasks touched")]
    out.append('<h2 id="summary">Summary</h2><dl class="summary">' +
               "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in summ) + "</dl>")
    if files_dropped or ops_dropped:
        n = int(((procs["files_dropped"].fillna(0) > 0) | (procs["ops_dropped"].fillna(0) > 0)).sum())
        out.append(f'<p class="warn" id="dropped">Incomplete counts: {n:,} processes went past the shim\'s limits '
                   f"and dropped {files_dropped:,} file records (more than 65,536 files in one process) and "
                   f"{ops_dropped:,} ops (more than MTCPROF_TRACE_MAX). Bytes, files, times and ops of what was "
                   f"dropped are missing from every number below; stages marked † are affected.</p>")
    if gap_procs:
        out.append(_capture_note(gap_procs, len(procs)))
    nav = ["stages", "locality", "files", "histograms", "timeline"]
    out.append('<p class="meta">Sections: ' + " · ".join(f'<a href="#{n}">{n}</a>' for n in nav) + "</p>")

    # stage table
    dur = tasks.groupby(tasks["stage"].fillna(""))["duration_s"].sum()
    rows = []
    for r in st.itertuples():
        sname = r.stage or ""
        sw = f'<span class="swatch" style="background:{_hex(colors[sname or "(no stage)"])}"></span>'
        share = r.t_io_s / dur.get(sname, 0) if dur.get(sname, 0) > 0 else float("nan")
        mark = " †" if r.files_dropped or r.ops_dropped else ""
        rows.append(
            f"<tr><td class=\"name\">{sw}{_e(sname or '(no stage)')}{mark}</td>"
            f"{_num(fmt_int(r.tasks))}{_num(fmt_int(r.hosts))}"
            f"{_num(fmt_s(r.span_s))}{_num(fmt_int(r.failed))}"
            f"{_bytes_cell(r.bytes_read)}{_bytes_cell(r.bytes_written)}"
            f"{_num(fmt_int(r.files_read) + ' / ' + fmt_int(r.files_written))}"
            f"{_num(fmt_s(r.t_io_s))}{_num(fmt_frac(share))}{_num(fmt_s(r.io_s_mean))}"
            f"{_num(fmt_frac(r.alpha))}{_num(fmt_frac(r.alpha_all))}"
            f'<td class="cls">{_classes_text(ac, r.stage)}</td>{_bytes_cell(r.D_mean, exact=False)}'
            f"{_num(fmt_int(r.meta_ops))}{_num('—' if pd.isna(r.reread_factor) else f'{r.reread_factor:.2f}')}"
            f"{_num(fmt_int(r.concurrency))}</tr>")
    out.append('<h2 id="stages">Stages</h2>' + _table(
        ["stage", "tasks (N)", "hosts (C)", "span", "failed", "bytes read", "bytes written", "files r / w",
         "time in I/O", "I/O share", "I/O per task", "α", "α all", "access classes",
         "D", "meta ops", "re-read", "max conc."], rows, "stages"))
    out.append('<p class="note">time in I/O: time inside traced I/O calls, summed over the stage\'s tasks; '
               "I/O share: that time over the tasks' summed run time (above 100% when a task's threads or processes "
               "do I/O at the same time). α: local fraction of the bytes of 1-to-1 reads (files read by one task "
               "of the stage), the model's α; α all: the same over all reads, N-to-1 included. D: bytes of 1-to-1 "
               "reads per task (mean). Access classes: 1-1 = read by one task of the stage, N-1 = read by "
               "several (shared), "
               "write = written. re-read: bytes read / file size. max conc.: most tasks of the stage running at "
               "once. — = unknown (no replica information: files not on Gfarm, or gfwhere was not run).</p>")

    # locality
    out.append('<h2 id="locality">Read locality</h2>')
    known = (loc_stage["bytes_local"].sum() + loc_stage["bytes_remote"].sum()) if len(loc_stage) else 0
    if len(loc_stage) and known == 0:
        out.append('<p class="warn">The locality of every read is unknown: no replica locations were recorded '
                   "(files not on Gfarm, or ingest ran without gfwhere).</p>")
    hdr = ["bytes local", "bytes remote", "bytes unknown", "files local", "files remote", "α (bytes)", "α (files)"]
    if len(loc_stage):
        out.append("<h3>Per stage</h3>" + _table(["stage"] + hdr, _locality_rows(loc_stage, "stage")))
        out.append("<h3>Per host</h3>" + _table(["host"] + hdr, _locality_rows(loc_host, "host")))
        if known:
            out.append(_img(_save(outdir, "locality.png",
                                  locality_png(loc_stage, "stage", "Read locality per stage")),
                            "read locality per stage"))
        out.append('<p class="note">A read is local when a replica of the file is on the reading task\'s host '
                   "(gfwhere at ingest); files local/remote count task × file pairs.</p>")
    else:
        out.append("<p>No reads.</p>")
    out.extend(_pwrake_section(s, rid, tasks))

    # busiest files
    bf = s.busiest_files(rid, top + 1000)
    moved = bf[(bf["bytes_read"] + bf["bytes_written"]) > 0]
    bf = (moved if len(moved) else bf).head(top)
    keys = [k for k in bf["key"] if isinstance(k, str)]
    prefix = os.path.commonpath(keys) if len(keys) >= 2 and all(k.startswith("/") for k in keys) else ""
    if prefix in ("", "/") or prefix in keys:
        prefix = ""
    rows = []
    for r in bf.itertuples():
        key = r.key[len(prefix) + 1:] if prefix else r.key
        reps = ", ".join(r.replica_hosts) if isinstance(r.replica_hosts, (list, tuple)) else "—"
        rows.append(f'<tr><td class="path" title="{_e(r.key)}">{_e(key)}</td>{_bytes_cell(r.size, exact=False)}'
                    f"{_num(fmt_int(r.tasks))}{_num(fmt_int(r.readers))}{_num(fmt_int(r.writers))}"
                    f"{_bytes_cell(r.bytes_read, exact=False)}{_bytes_cell(r.bytes_written, exact=False)}"
                    f"{_num(fmt_int(r.reads))}{_num(fmt_int(r.writes))}{_num(fmt_int(r.opens))}"
                    f"{_num(fmt_int(r.stats))}{_num(fmt_s(r.t_io_s))}<td>{_e(', '.join(r.stages))}</td>"
                    f"<td>{_e(reps)}</td></tr>")
    out.append(f'<h2 id="files">Busiest files (top {len(bf):,} by bytes read + written)</h2>' + _table(
        ["file", "size", "tasks", "readers", "writers", "bytes read", "bytes written", "reads", "writes", "opens",
         "stats", "time in I/O", "stages", "replicas"], rows, "files")
        + (f'<p class="note">Paths are under <code>{_e(prefix)}/</code>. ' if prefix else '<p class="note">')
        + "Files that were only opened or stat'ed (no byte read or written) are left out.</p>")

    # histograms
    hist = s.histograms(rid, by="stage")
    out.append('<h2 id="histograms">Access sizes</h2>')
    if len(hist) and hist["count"].sum() > 0:
        png = _save(outdir, "histograms.png", histograms_png(hist, stage_names))
        out.append(_img(png, "access-size histograms per stage"))
        rows = []
        for stage in stage_names:
            h = hist[hist["stage"] == stage]
            for kind in ("read", "write"):
                c = h[h["kind"] == kind].set_index("bin")["count"].reindex(HIST_BINS, fill_value=0)
                rows.append(f"<tr><td>{_e(stage or '(no stage)')}</td><td>{kind}</td>"
                            + "".join(_num(fmt_int(v) if v else "·") for v in c) + _num(fmt_int(c.sum())) + "</tr>")
        out.append(_table(["stage", "kind"] + [f"{b} B" for b in HIST_BINS] + ["total"], rows))
        out.append('<p class="note">Counts of read and write calls per request size (Darshan\'s bins).</p>')
    else:
        out.append("<p>No read or write calls were recorded.</p>")

    # timeline
    tl = s.timeline(rid)
    out.append('<h2 id="timeline">Task timeline</h2>')
    out.append(_img(_save(outdir, "timeline.png", timeline_png(tl, colors)), "task timeline, host by time"))
    if failed:
        ft = tasks[tasks["exit_status"].fillna(0) != 0]
        rows = [f"<tr><td>{_e(r.name)}</td><td>{_e(r.stage)}</td><td>{_e(r.host)}</td>"
                f"{_num(fmt_int(r.exit_status))}<td class=path>{_e(r.command)}</td></tr>"
                for r in ft.head(50).itertuples()]
        out.append(f"<h3>Failed tasks ({failed:,})</h3>" + _table(["task", "stage", "host", "exit", "command"], rows))
    out.append(_warnings_section(s, rid))
    return out


# ---- CLI ---------------------------------------------------------------------------------------------------------

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", required=True, help="SQLite store written by mtcprof ingest")
    p.add_argument("--run", required=True, help="run name")
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="folder for index.html (and the PNGs it embeds); created if missing")
    p.add_argument("--top", type=int, default=20, help="busiest files to list (default 20)")


def main(args: argparse.Namespace) -> int:
    from mtcio.db.api import Store
    if args.top < 1:
        print(f"{PROG}: --top must be at least 1", file=sys.stderr)
        return 2
    if not os.path.exists(args.db):
        print(f"{PROG}: {args.db}: no such database", file=sys.stderr)
        return BAD_INPUT
    if os.path.exists(args.output) and not os.path.isdir(args.output):
        # -o names the folder the page and its figures go into: a file there is a wrong -o, not one to replace
        print(f"{PROG}: {printable(args.output)}: exists and is not a folder (-o takes the folder to write "
              f"index.html and its figures into)", file=sys.stderr)
        return BAD_INPUT
    made = not os.path.exists(args.output)      # a folder this call makes is removed again if the page fails
    try:
        with Store(args.db, readable=True) as s:
            try:
                s.trace_run(args.run)
            except _store.StoreError as e:      # a --run the db does not have (or not a traced one): bad input
                print(f"{PROG}: {e}", file=sys.stderr)
                return BAD_INPUT
            path = build_report(s, args.run, args.output, top=args.top, db_path=args.db)
    except _store.StoreError as e:        # the db or the run given: not an mtcio db, a newer schema...
        print(f"{PROG}: {e}", file=sys.stderr)
        return BAD_INPUT
    except OSError as e:
        _remove_made(args.output, made)
        from mtcio.db import write_errors
        words = write_errors.disk_words(_store.readable(e.filename or args.output), e)
        where = f"{_store.readable(e.filename)}: " if e.filename else ""
        print(f"{PROG}: {words or where + (e.strerror or str(e))}; no report written", file=sys.stderr)
        return 1
    except BaseException:
        _remove_made(args.output, made)
        raise
    print(_store.readable(path))
    return 0


def _remove_made(folder: str, made: bool) -> None:
    """The output folder this call created, with what it holds of the failed page."""
    if made and os.path.isdir(folder):
        import shutil
        shutil.rmtree(folder, ignore_errors=True)
