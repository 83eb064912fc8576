"""The demo's one HTML page (OUT/index.html) and its terminal summary.

    path, summary = write(out, db, run, info)

Reads the traced run from the db (stage table, locality) and OUT/predict/prediction.json (mtcpredict
--validate); links and embeds OUT/predict/report.html (mtcpredict) and OUT/profile/index.html (mtcprof
report); shows OUT/mosaic.png.  Locality is shown beside the values measured in Kyo, Tatebe, Tanaka (IPSJ 2014) (mProjectPP 94 %,
mDiffFit 62 %, mBackground 63 %; Montage on 8 Gfarm nodes under Pwrake).
"""
from __future__ import annotations

import html
import json
import math
import os

PAPER_ALPHA = {"mProjectPP": 0.94, "mDiff": 0.62, "mBackground": 0.63}   # the paper's mDiffFit is our mDiff
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


def predictions(out: str) -> dict:
    """{stage: {variant: row}} from mtcpredict's prediction.json ({} when it is missing)."""
    path = os.path.join(out, "predict", "prediction.json")
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


def summary_text(loc, pred, info) -> str:
    lines = [f"Montage {info['preset']} preset: {info['tiles']} tiles, {info['overlaps']} overlaps, "
             f"{info['hosts']} hosts x {info['slots']} slots; workflow wall time {info['wall_s']:.1f} s",
             f"{'stage':<12}{'tasks':>6}{'hosts':>6}{'alpha':>8}{'local all':>10}{'paper':>6}"
             f"{'I/O meas s':>11}{'faithful s':>11}{'err %':>8}{'refined s':>10}{'err %':>8}"]
    for r in loc:
        p = pred.get(r["stage"], {})
        f, rf = p.get("faithful"), p.get("refined")
        meas = (rf or f or {}).get("measured_s")
        lines.append(f"{r['stage']:<12}{r['tasks']:>6}{r['hosts']:>6}{_pct(r['alpha']):>8}{_pct(r['alpha_all']):>10}"
                     f"{_pct(PAPER_ALPHA.get(r['stage'])) if r['stage'] in PAPER_ALPHA else '':>6}"
                     f"{_num(meas):>11}{_num((f or {}).get('total_s')):>11}{_num(_err(f), '{:+.0f}'):>8}"
                     f"{_num((rf or {}).get('total_s')):>10}{_num(_err(rf), '{:+.0f}'):>8}")
    errs = sorted(abs(e) for e in (_err(p.get("refined")) for p in pred.values()) if e is not None)
    if errs:
        lines.append(f"refined model, |error| over {len(errs)} stages: median {errs[len(errs) // 2]:.0f} %, "
                     f"max {errs[-1]:.0f} %")
    return "\n".join(lines)


def write(out: str, db: str, run: str, info: dict) -> tuple[str, str]:
    loc = locality(db, run)
    pred = predictions(out)
    e = html.escape
    rows = []
    for r in loc:
        p = pred.get(r["stage"], {})
        f, rf = p.get("faithful"), p.get("refined")
        meas = (rf or f or {}).get("measured_s")
        paper = PAPER_ALPHA.get(r["stage"])
        rows.append(
            f"<tr><td>{e(r['stage'])}</td><td>{r['tasks']}</td><td>{r['hosts']}</td>"
            f"<td>{_pct(r['alpha'])}</td><td>{_pct(r['alpha_all'])}</td><td>{_pct(paper) if paper else ''}</td>"
            f"<td>{r['bytes_read'] / 1e6:.2f}</td><td>{r['bytes_written'] / 1e6:.2f}</td><td>{r['span_s']:.2f}</td>"
            f"<td>{_num(meas)}</td><td>{_num((f or {}).get('total_s'))}</td><td>{_num(_err(f), '{:+.0f}')}</td>"
            f"<td>{_num((rf or {}).get('total_s'))}</td><td>{_num(_err(rf), '{:+.0f}')}</td></tr>")
    steps = "".join(f"<li>{e(k)}: {v:.1f} s</li>" for k, v in info.get("steps", {}).items())
    links = []
    for rel, title in (("predict/report.html", "mtcpredict report (envelope, heatmaps with the stages, parity)"),
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
Workflow wall time {info['wall_s']:.1f} s; run <code>{e(run)}</code> in <code>{e(db)}</code>.</p>
<h2>Stages: locality and I/O time, measured vs predicted</h2>
<p>α: local share of the bytes of 1-to-1 inputs (files one task of the stage reads; the model's α). Local all: every
Gfarm byte read, shared inputs included. Paper: the locality measured with Pwrake on 8 nodes in Kyo, Tatebe, Tanaka (IPSJ 2014; its mDiffFit is
mDiff + mFitplane here). I/O times are the stage's I/O time as mtcpredict validates it.</p>
<table><tr><th>stage</th><th>tasks</th><th>hosts</th><th>α</th><th>local all</th><th>paper</th><th>read MB</th>
<th>written MB</th><th>span s</th><th>I/O measured s</th><th>faithful s</th><th>error %</th><th>refined s</th>
<th>error %</th></tr>
{''.join(rows)}</table>
<h2>The mosaic</h2>{mosaic}
<h2>Reports</h2><ul>{''.join(links)}</ul>
<h2>Steps</h2><ul>{steps}</ul>
{embeds}
</body></html>
"""
    path = os.path.join(out, "index.html")
    with open(path, "w") as fh:
        fh.write(page)
    return path, summary_text(loc, pred, info)
