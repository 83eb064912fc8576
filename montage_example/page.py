"""The demo's one HTML page (OUT/index.html) and its terminal summary.

    path, summary = write(out, db, runs, info)

Reads the first traced run from the db (stage table, locality) and OUT/predict/prediction.json (mtcpredict
--validate of the second run with the first run's model) and OUT/predict-2/prediction.json (the first with the
second's); links OUT/predict/report.html, OUT/predict-2/report.html (mtcpredict) and OUT/profile/index.html
(mtcprof report of the first run), embeds the first and the last; shows OUT/mosaic.png.  Locality is shown beside the values measured in Kyo, Tatebe, Tanaka (IPSJ 2014) (mProjectPP 94 %,
mDiffFit 62 %, mBackground 63 %; Montage on 8 Gfarm nodes under Pwrake).
"""
from __future__ import annotations

import html
import json
import math
import os
import statistics

from mtcio.private import write_private

PAPER_ALPHA = {"mProjectPP": 0.94, "mDiff": 0.62, "mBackground": 0.63}   # the paper's mDiffFit is our mDiff
MODELS = ("workflow.yaml", "workflow-2.yaml")       # mtcprof model of the first run, of the second
PREDICTIONS = ("predict", "predict-2")              # mtcpredict of the second run (first's model), of the first
RAKE = "Rake with the mtcio plugin and placement (each task on the host holding most of its input bytes)"


def _pct(v):
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.0f} %"


def _num(v, fmt="{:.3f}"):
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else fmt.format(v)


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


def predictions(out: str, folder: str) -> dict:
    """{stage: {variant: row}} from mtcpredict's OUT/FOLDER/prediction.json ({} when it is missing)."""
    path = os.path.join(out, folder, "prediction.json")
    if not os.path.exists(path):
        return {}
    with open(path) as fh:
        res = json.load(fh)
    by = {}
    for row in res.get("predictions", []):
        by.setdefault(row["stage"], {})[row.get("variant", "?")] = row
    return by


def _err(row):
    return None if not row or row.get("error_pct") is None else row["error_pct"]


def _meas(p):
    return (p.get("refined") or p.get("faithful") or {}).get("measured_s")


def spread(a, b):
    """(max - min) / mean of two runs' measured I/O time, in %; None when either is missing or both are 0."""
    if a is None or b is None or a + b <= 0:
        return None
    return 100 * abs(a - b) / ((a + b) / 2)


def stage_rows(loc, preds) -> list[dict]:
    """Per stage of the first run: its locality, and per validated run (preds[i]: the run predicted from the other
    run's model) measured, faithful and refined with their errors; the two runs' spread."""
    rows = []
    for r in loc:
        ps = [p.get(r["stage"], {}) for p in preds]
        rows.append({**r, "runs": [{"measured_s": _meas(p), "faithful": p.get("faithful") or {},
                                    "refined": p.get("refined") or {}} for p in ps],
                     "spread_pct": spread(*(_meas(p) for p in ps))})
    return rows


def summary_line(rows) -> str:
    errs = [abs(e) for r in rows for x in r["runs"] if (e := _err(x["refined"])) is not None]
    spreads = [r["spread_pct"] for r in rows if r["spread_pct"] is not None]
    if not errs:
        return "no stage was predicted and measured"
    return (f"refined model, each run from the other run's model: |error| over {len(errs)} stage-runs median "
            f"{statistics.median(errs):.0f} %, max {max(errs):.0f} %"
            + (f"; the two runs' measured I/O per stage differ by median {statistics.median(spreads):.0f} %, "
               f"max {max(spreads):.0f} % ((max-min)/mean: the noise an error is read against)" if spreads else ""))


def summary_text(rows, runs, info) -> str:
    walls = ", ".join(f"{w:.1f} s" for w in info["walls_s"])
    head = "".join(f"{'run ' + r:>24}" for r in reversed(runs))
    lines = [f"Montage {info['preset']} preset: {info['tiles']} tiles, {info['overlaps']} overlaps, "
             f"{info['hosts']} hosts x {info['slots']} slots; workflow wall time {walls}",
             f"{'':<12}{'':>6}{'':>6}{'':>7}{'':>7}{'':>6}{head}",
             f"{'stage':<12}{'tasks':>6}{'hosts':>6}{'alpha':>7}{'local':>7}{'paper':>6}"
             + f"{'meas s':>9}{'pred s':>9}{'err %':>6}" * len(runs) + f"{'spread %':>9}"]
    for r in rows:
        cells = "".join(f"{_num(x['measured_s']):>9}{_num(x['refined'].get('total_s')):>9}"
                        f"{_num(_err(x['refined']), '{:+.0f}'):>6}" for x in r["runs"])
        lines.append(f"{r['stage']:<12}{r['tasks']:>6}{r['hosts']:>6}{_pct(r['alpha']):>7}{_pct(r['alpha_all']):>7}"
                     f"{_pct(PAPER_ALPHA.get(r['stage'])) if r['stage'] in PAPER_ALPHA else '':>6}{cells}"
                     f"{_num(r['spread_pct'], '{:.0f}'):>9}")
    lines.append("pred: the refined model of the other run; alpha, local: locality of run " + runs[0])
    lines.append(summary_line(rows))
    return "\n".join(lines)


def write(out: str, db: str, runs, info: dict) -> tuple[str, str]:
    """runs: the two runs; OUT/predict holds the second validated with the first's model, OUT/predict-2 the
    first with the second's."""
    loc = locality(db, runs[0])
    rows = stage_rows(loc, [predictions(out, f) for f in PREDICTIONS])
    e = html.escape
    trs = []
    for r in rows:
        paper = PAPER_ALPHA.get(r["stage"])
        x2, x1 = r["runs"]
        trs.append(
            f"<tr><td>{e(r['stage'])}</td><td>{r['tasks']}</td><td>{r['hosts']}</td>"
            f"<td>{_pct(r['alpha'])}</td><td>{_pct(r['alpha_all'])}</td><td>{_pct(paper) if paper else ''}</td>"
            f"<td>{r['bytes_read'] / 1e6:.2f}</td><td>{r['bytes_written'] / 1e6:.2f}</td><td>{r['span_s']:.2f}</td>"
            f"<td>{_num(x2['measured_s'])}</td><td>{_num(x2['faithful'].get('total_s'))}</td>"
            f"<td>{_num(_err(x2['faithful']), '{:+.0f}')}</td><td>{_num(x2['refined'].get('total_s'))}</td>"
            f"<td>{_num(_err(x2['refined']), '{:+.0f}')}</td><td>{_num(x1['measured_s'])}</td>"
            f"<td>{_num(x1['refined'].get('total_s'))}</td><td>{_num(_err(x1['refined']), '{:+.0f}')}</td>"
            f"<td>{_num(r['spread_pct'], '{:.0f}')}</td></tr>")
    steps = "".join(f"<li>{e(k)}: {v:.1f} s</li>" for k, v in info.get("steps", {}).items())
    links = []
    for rel, title in (("predict/report.html", f"mtcpredict report: run {runs[-1]} from the model of run {runs[0]} "
                                               "(envelope, heatmaps with the stages, parity)"),
                       ("predict-2/report.html", f"mtcpredict report: run {runs[0]} from the model of run {runs[-1]}"),
                       ("profile/index.html", "mtcprof report (stages, locality, timeline, busiest files)")):
        if os.path.exists(os.path.join(out, rel)):
            links.append(f"<li><a href='{rel}'>{e(title)}</a></li>")
    embeds = "".join(f"<h2>{e(t)}</h2><iframe src='{rel}' style='width:100%;height:900px;border:1px solid #ccc'>"
                     f"</iframe>" for rel, t in (("predict/report.html", "mtcpredict"), ("profile/index.html", "mtcprof"))
                     if os.path.exists(os.path.join(out, rel)))
    mosaic = ("<img src='mosaic.png' alt='the mosaic' style='max-width:480px;image-rendering:pixelated'>"
              if os.path.exists(os.path.join(out, "mosaic.png")) else "<p>(no mosaic preview)</p>")
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>mtcio demo: Montage on Gfarm</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1200px}}td,th{{padding:2px 8px;text-align:right}}
td:first-child,th:first-child{{text-align:left}}table{{border-collapse:collapse}}tr:nth-child(even){{background:#f3f3f3}}</style>
</head><body>
<h1>Montage 6.0 on a 4-host Gfarm, traced, predicted and validated</h1>
<p>{e(info['preset'])} preset: {info['tiles']} synthetic tiles, {info['overlaps']} overlaps, {info['hosts']} hosts
&times; {info['slots']} slots, {e(info.get('runner', RAKE))}.
The workflow ran twice, runs {', '.join(f"<code>{e(r)}</code>" for r in runs)} in <code>{e(db)}</code>
(wall time {', '.join(f"{w:.1f} s" for w in info['walls_s'])}).</p>
<h2>Stages: locality and I/O time, measured vs predicted</h2>
<p>Each run is predicted from the model <code>mtcprof model</code> wrote from the other run's trace, never from its
own. α: local share of the bytes of 1-to-1 inputs (files one task of the stage reads; the model's α), in run
<code>{e(runs[0])}</code>. Local all: every Gfarm byte read, shared inputs included. Paper: the locality measured with
Pwrake on 8 nodes in Kyo, Tatebe, Tanaka (IPSJ 2014; its mDiffFit is mDiff + mFitplane here). I/O times are the
stage's I/O time as mtcpredict validates it. Spread: how far the two runs' measured I/O times are apart, (max −
min) / mean: an error inside it is within the workflow's own noise.</p>
<p>{e(summary_line(rows))}</p>
<table><tr><th colspan="9"></th><th colspan="5">run {e(runs[-1])}</th><th colspan="3">run {e(runs[0])}</th><th></th></tr>
<tr><th>stage</th><th>tasks</th><th>hosts</th><th>α</th><th>local all</th><th>paper</th><th>read MB</th>
<th>written MB</th><th>span s</th><th>I/O measured s</th><th>faithful s</th><th>error %</th><th>refined s</th>
<th>error %</th><th>I/O measured s</th><th>refined s</th><th>error %</th><th>spread %</th></tr>
{''.join(trs)}</table>
<h2>The mosaic</h2>{mosaic}
<h2>Reports</h2><ul>{''.join(links)}</ul>
<h2>Steps</h2><ul>{steps}</ul>
{embeds}
</body></html>
"""
    path = os.path.join(out, "index.html")
    write_private(path, page)          # 0600 as every output
    return path, summary_text(rows, runs, info)
