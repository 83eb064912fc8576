"""The demo's one HTML page (OUT/index.html) and its terminal summary: a sky predicted from two smaller ones before
it ran, beside its two measured runs.

    path, summary = write(out, db, runs, info)       # runs: the two runs of the large sky

Reads OUT/predicted/prediction.json (mtcpredict --at the large sky, written before it ran: the predicted I/O time
per stage), OUT/validated/prediction.json (the same prediction validated against both large runs: each run's
measured I/O time per stage), OUT/baseline/prediction.json (the first large run's own model validated on the
second: the same-configuration baseline) and the first large run's locality from the db.  Errors are against the
mean of the two runs; the runs' spread is (max - min) / mean of their measured times, the noise an error is read
against.  Links OUT/predicted/report.html, OUT/validated/report.html (mtcpredict) and OUT/profile/index.html
(mtcprof report of the first large run), embeds the validated one; shows OUT/mosaic.png.  Locality is shown
beside the values measured in Kyo, Tatebe, Tanaka (IPSJ 2014) (mProjectPP 94 %, mDiffFit 62 %, mBackground
63 %; Montage on 8 Gfarm nodes under Pwrake).
"""
from __future__ import annotations

import base64
import html
import json
import math
import os
import statistics

from mtcio.private import write_private
from mtcio.units import fmt_bytes, fmt_s

PAPER_ALPHA = {"mProjectPP": 0.94, "mDiff": 0.62, "mBackground": 0.63}   # the paper's mDiffFit is our mDiff
SCALED, BASELINE_MODEL = "scaled.yaml", "baseline.yaml"     # fitted over the small runs; the first large run's
PREDICTED, VALIDATED, BASELINE = "predicted", "validated", "baseline"   # mtcpredict's --out folders
RAKE = "Rake with the mtcio plugin and placement (each task on the host holding most of its input bytes)"


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _pct(v):
    return "–" if _missing(v) else f"{100 * v:.0f} %"


def _num(v, fmt="{:.3f}"):
    return "–" if _missing(v) else fmt.format(v)


def locality(db: str, run: str) -> list[dict]:
    """Per stage: tasks, hosts, α (1-to-1 reads, by bytes), local share of all Gfarm bytes read, bytes read."""
    from mtcio.db.api import Store
    with Store(db) as s:
        st = s.stages(run)
    rows = []
    for _, r in st.iterrows():
        rows.append({"stage": r["stage"], "tasks": int(r["tasks"]), "hosts": int(r["hosts"]),
                     "alpha": None if math.isnan(r["alpha"]) else float(r["alpha"]),
                     "alpha_all": None if math.isnan(r["alpha_all"]) else float(r["alpha_all"]),
                     "bytes_read": int(r["bytes_read"]), "bytes_written": int(r["bytes_written"]),
                     "span_s": float(r["span_s"]), "t_io_s": float(r["t_io_s"])})
    return rows


def _result(out: str, folder: str) -> dict:
    path = os.path.join(out, folder, "prediction.json")
    if not os.path.exists(path):
        return {}
    with open(path) as fh:
        return json.load(fh)


def predictions(out: str, folder: str, variant: str = "refined") -> dict:
    """{stage: row} of one variant in mtcpredict's OUT/FOLDER/prediction.json ({} when it is missing)."""
    return {row["stage"]: row for row in _result(out, folder).get("predictions", [])
            if row.get("variant", variant) == variant}


def repeats(out: str, folder: str) -> dict:
    """{stage: [measured I/O time of each validated run, in --validate's order]} from OUT/FOLDER/prediction.json."""
    return {st: m.get("repeats") or [m["measured_s"]] for st, m in _result(out, folder).get("measured", {}).items()}


def notes(out: str, folder: str) -> list[str]:
    """What mtcpredict --at said it assumed or took from the graph (the fits' counts beside the graph's)."""
    return list((_result(out, folder).get("at") or {}).get("notes", []))


def spread(*xs):
    """(max - min) / mean of the runs' measured I/O times, in %; None when one is missing or all are 0."""
    if not xs or any(x is None for x in xs) or sum(xs) <= 0:
        return None
    return 100 * (max(xs) - min(xs)) / (sum(xs) / len(xs))


def error(pred, meas):
    """(predicted - measured) / measured in %; None when either is missing or nothing was measured."""
    return None if pred is None or not meas else 100 * (pred - meas) / meas


def stage_rows(loc, predicted, measured, baseline) -> list[dict]:
    """Per stage of the first large run: its locality; the prediction made before the runs (predicted: {stage:
    row}), each run's measured time (measured: {stage: [s, s]}), the error against their mean, their spread; the
    baseline's prediction of the second run and its error against that run."""
    rows = []
    for r in loc:
        p, b = predicted.get(r["stage"], {}), baseline.get(r["stage"], {})
        ms = measured.get(r["stage"], [])
        mean = sum(ms) / len(ms) if ms else None
        rows.append({**r, "predicted_tasks": p.get("N"), "predicted_s": p.get("total_s"), "measured_s": ms,
                     "error_pct": error(p.get("total_s"), mean), "spread_pct": spread(*ms) if len(ms) > 1 else None,
                     "baseline_s": b.get("total_s"),
                     "baseline_error_pct": error(b.get("total_s"), b.get("measured_s"))})
    return rows


def workflow_row(rows) -> dict:
    """The whole workflow's I/O time, summed over the stages that were predicted and measured in both runs."""
    done = [r for r in rows if r["predicted_s"] is not None and len(r["measured_s"]) == 2]
    if not done:
        return {"stages": 0}
    pred = sum(r["predicted_s"] for r in done)
    meas = [sum(r["measured_s"][i] for r in done) for i in (0, 1)]
    based = [r for r in done if r["baseline_s"] is not None]
    base = (error(sum(r["baseline_s"] for r in based), sum(r["measured_s"][1] for r in based))
            if len(based) == len(done) else None)
    return {"stages": len(done), "predicted_s": pred, "measured_s": meas, "error_pct": error(pred, sum(meas) / 2),
            "spread_pct": spread(*meas), "baseline_s": sum(r["baseline_s"] for r in based) if based else None,
            "baseline_error_pct": base}


def p90(xs):
    """The 90th percentile by the nearest rank, as tests/bench/montage_predict.py takes it."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.9 * (len(xs) - 1))))] if xs else None


def figures(rows) -> dict:
    """Median and p90 of |error| over the stages (scaled prediction, baseline), the runs' spread, the workflow."""
    err = [abs(r["error_pct"]) for r in rows if r["error_pct"] is not None]
    base = [abs(r["baseline_error_pct"]) for r in rows if r["baseline_error_pct"] is not None]
    spr = [r["spread_pct"] for r in rows if r["spread_pct"] is not None]
    med = lambda xs: statistics.median(xs) if xs else None      # noqa: E731
    return {"stages": len(err), "median": med(err), "p90": p90(err), "spread_median": med(spr),
            "spread_max": max(spr) if spr else None, "baseline_median": med(base), "baseline_p90": p90(base),
            "workflow": workflow_row(rows)}


def summary_lines(fig, runs, info) -> list[str]:
    """The figures in words, with the runs' spread beside every error."""
    if not fig["stages"]:
        return ["no stage was predicted and measured"]
    w = fig["workflow"]
    small = " and ".join(f"{k}" for k in info["small"].values())
    lines = [f"predicted from {small} tiles, before it ran: per-stage |error| median {_num(fig['median'], '{:.0f}')} "
             f"%, p90 {_num(fig['p90'], '{:.0f}')} % over {fig['stages']} stages, against the mean of the two runs; "
             f"the two runs' spread median {_num(fig['spread_median'], '{:.0f}')} %, max "
             f"{_num(fig['spread_max'], '{:.0f}')} % ((max-min)/mean: the noise an error is read against)"]
    if w["stages"]:
        lines.append(f"whole workflow, I/O time summed over {w['stages']} stages: predicted "
                     f"{_num(w['predicted_s'], '{:.2f}')} s, measured {_num(w['measured_s'][0], '{:.2f}')} s and "
                     f"{_num(w['measured_s'][1], '{:.2f}')} s: error {_num(w['error_pct'], '{:+.0f}')} %, the runs' "
                     f"spread {_num(w['spread_pct'], '{:.0f}')} %")
    if fig["baseline_median"] is not None:
        lines.append(f"same-configuration baseline (run {runs[0]}'s own model -> run {runs[1]}): per-stage |error| "
                     f"median {_num(fig['baseline_median'], '{:.0f}')} %, p90 {_num(fig['baseline_p90'], '{:.0f}')} "
                     f"%; whole workflow {_num(w.get('baseline_error_pct'), '{:+.0f}')} %")
    return lines


def _walls(info, runs) -> str:
    return ", ".join(f"{info['walls_s'][r]:.1f} s" for r in runs if r in info["walls_s"])


def headline(runs, info) -> str:
    small = " and ".join(f"{k} tiles (run {r}, {_walls(info, [r])} wall)" for r, k in info["small"].items())
    return (f"Montage {info['preset']} preset, {info['hosts']} hosts x {info['slots']} slots: traced {small}; "
            f"{info['large']} tiles ({info['overlaps'].get(info['large'], '?')} overlaps) predicted "
            f"(written at t = {info['predicted_at_s']:.1f} s) before its first run was launched (t = "
            f"{info['launched_at_s']:.1f} s), then run twice ({_walls(info, runs)} wall)")


def summary_text(rows, runs, info) -> str:
    fig = figures(rows)
    lines = [headline(runs, info),
             f"{'':<12}{'':>6}{'I/O time, predicted before the runs vs measured':>50}{'baseline':>16}",
             f"{'stage':<12}{'tasks':>6}{'pred s':>9}{'run1 s':>9}{'run2 s':>9}{'err %':>7}{'spread %':>9}"
             f"{'':>7}{'pred s':>9}{'err %':>7}"]
    w = fig["workflow"]
    whole = {"stage": "workflow", "tasks": sum(r["tasks"] for r in rows), "predicted_s": w.get("predicted_s"),
             "measured_s": w.get("measured_s", []), "error_pct": w.get("error_pct"), "spread_pct": w.get("spread_pct"),
             "baseline_s": w.get("baseline_s"), "baseline_error_pct": w.get("baseline_error_pct")}
    for r in rows + [whole]:
        ms = list(r["measured_s"]) + [None] * (2 - len(r["measured_s"]))
        lines.append(f"{r['stage']:<12}{r['tasks']:>6}{_num(r['predicted_s']):>9}{_num(ms[0]):>9}{_num(ms[1]):>9}"
                     f"{_num(r['error_pct'], '{:+.0f}'):>7}{_num(r['spread_pct'], '{:.0f}'):>9}{'':>7}"
                     f"{_num(r['baseline_s']):>9}{_num(r['baseline_error_pct'], '{:+.0f}'):>7}")
    lines.append(f"run1, run2: {runs[0]}, {runs[1]}; err: against their mean; baseline: {runs[0]}'s own model "
                 f"predicting {runs[1]}, err against {runs[1]}")
    return "\n".join(lines + summary_lines(fig, runs, info))


# The stage table's columns, as DASH names them (the header shows "predicted", "run", "baseline" more than once)
COLUMNS = ("stage", "predicted tasks", "tasks", "α", "local all", "read", "written", "predicted", "run", "run",
           "error", "spread", "baseline", "baseline")
# Why a cell of the page's stage table holds no value, by column: said under the table for each column that has one.
DASH = {
    "predicted tasks": "the stage is not in the prediction (no traced stage of that name at the smaller sizes)",
    "α": "the stage read no Gfarm file of its own (1-to-1): every input it read is shared with other tasks, or "
         "not in Gfarm, so there is no local share of such reads",
    "local all": "the stage read no Gfarm bytes",
    "predicted": "the stage is not in the prediction made before the runs",
    "run": "the stage was not measured in that run (no traced task of it)",
    "error": "no prediction or no measurement to compare",
    "spread": "measured in fewer than two runs",
    "baseline": "the stage is not in the first run's own model, or was not measured in the second run",
}


def _cell(v, text, col, dashes):
    """A table cell; a missing value is a dash whose reason DASH[col] is said under the table."""
    if _missing(v):
        dashes.add(col)
        return "<td>–</td>"
    return f"<td>{text}</td>"


def _stage_tr(r, e, dashes) -> str:
    paper = PAPER_ALPHA.get(r["stage"])
    ms = list(r["measured_s"]) + [None] * (2 - len(r["measured_s"]))
    if _missing(r["alpha"]):
        dashes.add("α")
    alpha = _pct(r["alpha"]) + (f" <small>(paper {_pct(paper)}<sup>*</sup>)</small>" if paper else "")
    err = f"<b>{_num(r['error_pct'], '{:+.0f}')} %</b>"
    cells = [f"<td>{e(r['stage'])}</td>",
             _cell(r.get("predicted_tasks"), r.get("predicted_tasks"), "predicted tasks", dashes),
             f"<td>{r['tasks']}</td>", f"<td>{alpha}</td>",
             _cell(r["alpha_all"], _pct(r["alpha_all"]), "local all", dashes),
             f"<td>{fmt_bytes(r['bytes_read'])}</td>", f"<td>{fmt_bytes(r['bytes_written'])}</td>",
             _cell(r["predicted_s"], fmt_s(r["predicted_s"]), "predicted", dashes),
             _cell(ms[0], fmt_s(ms[0]), "run", dashes), _cell(ms[1], fmt_s(ms[1]), "run", dashes),
             _cell(r["error_pct"], err, "error", dashes),
             _cell(r["spread_pct"], _num(r["spread_pct"], "{:.0f}") + " %", "spread", dashes),
             _cell(r["baseline_s"], fmt_s(r["baseline_s"]), "baseline", dashes),
             _cell(r["baseline_error_pct"], _num(r["baseline_error_pct"], "{:+.0f}") + " %", "baseline", dashes)]
    return "<tr>" + "".join(cells) + "</tr>"


def _workflow_tr(w, dashes) -> str:
    if not w["stages"]:
        return ""
    return (f"<tr class='total'><td>whole workflow</td><td colspan='6'>I/O time summed over {w['stages']} stages</td>"
            f"<td>{fmt_s(w['predicted_s'])}</td><td>{fmt_s(w['measured_s'][0])}</td><td>{fmt_s(w['measured_s'][1])}</td>"
            f"<td><b>{_num(w['error_pct'], '{:+.0f}')} %</b></td>"
            f"{_cell(w['spread_pct'], _num(w['spread_pct'], '{:.0f}') + ' %', 'spread', dashes)}"
            f"{_cell(w['baseline_s'], fmt_s(w['baseline_s']), 'baseline', dashes)}"
            f"{_cell(w['baseline_error_pct'], _num(w['baseline_error_pct'], '{:+.0f}') + ' %', 'baseline', dashes)}"
            "</tr>")


def _links(out, runs, e) -> str:
    links = []
    for rel, title in ((f"{PREDICTED}/report.html", "mtcpredict report of the prediction made before the runs"),
                       (f"{PREDICTED}/table.txt", "mtcpredict's table as the terminal showed it before the runs"),
                       (f"{PREDICTED}/model-at.yaml", "the model instantiated at the target (what was predicted)"),
                       (f"{VALIDATED}/report.html", "mtcpredict report of the same prediction beside both runs "
                                                    "(envelope, heatmaps with the stages, parity)"),
                       (f"{BASELINE}/report.html", f"mtcpredict report: run {runs[1]} from run {runs[0]}'s own model"),
                       ("profile/index.html", f"mtcprof report of run {runs[0]} (stages, locality, timeline)")):
        if os.path.exists(os.path.join(out, rel)):
            links.append(f"<li><a href='{rel}'>{e(title)}</a></li>")
    return "".join(links)


# The figures shown on the page itself, embedded: (file under OUT, title, what it shows)
FIGURES = ((f"{VALIDATED}/parity.png", "Predicted before the runs against measured",
            "left: each stage's predicted I/O time against its measured one (the two runs' mean), the grey band "
            "±20 %; right: each stage's error beside the two runs' spread"),
           (f"{VALIDATED}/maps.png", "Where the stages sit on the envelope",
            "predicted bandwidth (MiB/s) of each access class over file size and concurrency, the stages marked "
            "and named in each map's legend"),
           (f"{VALIDATED}/stage_time.png", "Predicted stage I/O time over file size and node count",
            "the four heaviest stages; the white mark: as traced"),
           ("profile/timeline.png", None, "every task of the first run, host by time"))


def _embedded(out, e) -> str:
    """The FIGURES that exist, each as an image in the page (data: URI): the page needs no other file to show them."""
    parts = []
    for rel, title, said in FIGURES:
        path = os.path.join(out, rel)
        if not os.path.exists(path):
            continue
        with open(path, "rb") as fh:
            data = base64.b64encode(fh.read()).decode()
        parts.append(f"<h3>{e(title or 'Task timeline of the first run')}</h3><p class=note>{e(said)}</p>"
                     f"<img alt='{e(rel)}' src='data:image/png;base64,{data}'>")
    return "".join(parts)


def _dash_notes(dashes) -> str:
    said = [f"<li><b>–</b> in <i>{html.escape(col)}</i>: {html.escape(DASH[col])}</li>" for col in DASH if col in dashes]
    return f"<ul class=note>{''.join(said)}</ul>" if said else ""


STYLE = """body{font-family:sans-serif;margin:2em;max-width:1400px}td,th{padding:2px 8px;text-align:right;
white-space:nowrap}td:first-child,th:first-child{text-align:left}table{border-collapse:collapse}
tr:nth-child(even){background:#f3f3f3}tr.total{border-top:2px solid #888;font-weight:bold}
th.group{text-align:center;border-bottom:1px solid #888}img{max-width:100%}.note{color:#555;font-size:13px}"""


def rows_of(out: str, db: str, runs) -> list[dict]:
    """The stage rows of the large sky: predicted before the runs, both runs measured, the baseline."""
    return stage_rows(locality(db, runs[0]), predictions(out, PREDICTED), repeats(out, VALIDATED),
                      predictions(out, BASELINE))


def write(out: str, db: str, runs, info: dict) -> tuple[str, str]:
    """runs: the two runs of the large sky, in the order they ran (and were validated)."""
    rows = rows_of(out, db, runs)
    path = os.path.join(out, "index.html")
    write_private(path, render(out, db, rows, runs, info))          # 0600 as every output
    return path, summary_text(rows, runs, info)


def render(out: str, db: str, rows, runs, info: dict) -> str:
    """The page (self-contained: its figures embedded) from the stage rows and what OUT holds."""
    fig = figures(rows)
    e = html.escape
    small = ", ".join(f"{k} tiles (run <code>{e(r)}</code>)" for r, k in info["small"].items())
    said = "".join(f"<li>{e(n)}</li>" for n in notes(out, PREDICTED))
    steps = "".join(f"<li>{e(k)}: {v:.1f} s</li>" for k, v in info.get("steps", {}).items())
    mosaic = ""
    if os.path.exists(os.path.join(out, "mosaic.png")):
        with open(os.path.join(out, "mosaic.png"), "rb") as fh:
            mosaic = (f"<img src='data:image/png;base64,{base64.b64encode(fh.read()).decode()}' alt='the mosaic' "
                      "style='max-width:480px;image-rendering:pixelated'>")
    large = info["large"]
    dashes: set = set()
    table = "".join(_stage_tr(r, e, dashes) for r in rows) + _workflow_tr(fig["workflow"], dashes)
    paper_note = ("<p class=note><sup>*</sup> paper: the local share Kyo, Tatebe, Tanaka (IPSJ 2014) measured for the "
                  "stage (Montage of 956 images under Pwrake on 8 Gfarm nodes; its mDiffFit is mDiff + mFitplane "
                  "here); given for the stages the paper measured, only.</p>"
                  if any(r["stage"] in PAPER_ALPHA for r in rows) else "")
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>mtcio demo: Montage on Gfarm</title>
<meta name="viewport" content="width=device-width"><style>{STYLE}</style>
</head><body>
<h1>Montage 6.0 on a 4-host Gfarm: traced small, predicted large, then run</h1>
<ul>{''.join(f"<li><b>{e(line)}</b></li>" for line in summary_lines(fig, runs, info))}</ul>
<p>{e(info['preset'])} preset, {info['hosts']} hosts &times; {info['slots']} slots, {e(info.get('runner', RAKE))}.
Traced {small}; <code>mtcprof model --size</code> fitted how every stage grows with the tiles; <code>mtcpredict
--at size={large} hosts={info['hosts']} procs={info['slots']} --tasks-from</code> (the {large}-tile workflow's
<code>rake -P</code>) predicted {large} tiles ({info['overlaps'].get(large, '?')} overlaps): its output
(<code>{PREDICTED}/prediction.json</code>) was written at t = {info['predicted_at_s']:.1f} s of the demo, before the
first {large}-tile run was launched at t = {info['launched_at_s']:.1f} s. Then {large} tiles ran twice, runs
{' and '.join(f"<code>{e(r)}</code>" for r in runs)} (wall time {_walls(info, runs)}) in <code>{e(db)}</code>.</p>
<h2>Stages at {large} tiles: I/O time predicted before the runs vs measured in both</h2>
<table><tr><th></th><th colspan="2" class="group">tasks</th><th colspan="4" class="group">run {e(runs[0])}</th>
<th colspan="5" class="group">I/O time: predicted from {e(' and '.join(map(str, info['small'].values())))} tiles
vs measured</th><th colspan="2" class="group">baseline</th></tr>
<tr><th>stage</th><th>predicted</th><th>run</th><th>α</th><th>local all</th><th>read</th>
<th>written</th><th>predicted</th><th>run 1</th><th>run 2</th><th>error</th><th>spread</th>
<th>predicted</th><th>error</th></tr>
{table}</table>
<p class=note>Predicted: the refined model's I/O time of the stage (its busiest slot), from the fitted model. Run 1,
run 2: the stage's I/O time as mtcpredict <code>--validate</code> measures it in each run. Error: against the two
runs' mean. Spread: how far the two runs are apart, (max − min) / mean: an error inside it is within the
workflow's own noise. Baseline: run <code>{e(runs[0])}</code>'s own model (same configuration, traced) predicting
run <code>{e(runs[1])}</code>, error against that run. α: local share of the bytes of 1-to-1 inputs in run
<code>{e(runs[0])}</code>; local all: every Gfarm byte read, shared inputs included.</p>
{paper_note}{_dash_notes(dashes)}
<h3>What the prediction assumed</h3><ul>{said or '<li>(no notes)</li>'}</ul>
<h2>Figures</h2>{_embedded(out, e) or '<p>(no figures: the validated prediction or the run report is missing)</p>'}
<h2>The mosaic ({large} tiles, run {e(runs[0])})</h2>{mosaic or '<p>(no mosaic preview)</p>'}
<h2>Reports</h2>
<p class=note>This page holds everything it shows. The reports it links are in the demo's folders, which only
their owner may read (0700; files 0600, as every mtcio output: traces reveal users' paths and commands): open
them as that user, or make them readable (<code>chmod -R go+rX</code> on the folder) before serving it to others.</p>
<ul>{_links(out, runs, e)}</ul>
<h2>Steps</h2><ul>{steps}</ul>
</body></html>
"""
