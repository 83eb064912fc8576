"""One page of tests/bench/wfbench_predict.py's results: per target (recipe x size x hosts) its summary, then per
stage the prediction from the other size, both runs, the error, the runs' spread, the baseline and (a), the
prediction from the instance alone.

    page.write("wfbench.html", state, rows)      # state.json and the rows score() returns
"""
from __future__ import annotations

import html

from mtcio.private import write_private

STYLE = ("body{font-family:sans-serif;max-width:70em;margin:1em auto}table{border-collapse:collapse;margin:.5em 0}"
         "td,th{border:1px solid #bbb;padding:2px 6px;text-align:right}td:first-child{text-align:left}"
         ".miss{color:#a00}.pass{color:#070}")


def _pct(x):
    return f"{x:+.0f} %"


def write(path: str, state: dict, rows: list) -> None:
    out = ["<!doctype html><meta charset=utf-8><title>WfBench on Gfarm: predicted vs measured</title>",
           f"<style>{STYLE}</style><h1>WfBench workflows on Gfarm: each size predicted from the other</h1>",
           f"<p>Session started {html.escape(state.get('started', ''))}; files scaled per recipe by "
           + ", ".join(f"{html.escape(k)} {v:.3g}" for k, v in state.get("factors", {}).items())
           + ". Error = (predicted − mean of the two runs) / mean, per stage's I/O time (busiest slot); spread = "
           "(max − min) / mean of the two runs; baseline = the first run's own model predicting the second. "
           "Target: median |error| ≤ 20 %, p90 ≤ 50 %.</p>",
           "<p>(a) from the instance alone: " + html.escape(state.get("instance_alone", "not run")) + "</p>",
           "<h2>Summary</h2><table><tr><th>target</th><th>from</th><th>median |err|</th><th>p90</th>"
           "<th>whole I/O</th><th>measured s</th><th>spread median (p90)</th><th>baseline median (p90)</th>"
           "<th>(a) median (p90)</th><th>(a) whole I/O</th></tr>"]
    for t in state["targets"]:
        s = t.get("summary")
        if not s:
            continue
        cls = "pass" if s["pass"] else "miss"
        out.append(f"<tr><td>{html.escape(t['recipe'])} {t['size']} × {t['hosts']}</td>"
                   f"<td>{html.escape(', '.join(t['traced']))}</td><td class={cls}>{s['median']:.0f} %</td>"
                   f"<td class={cls}>{s['p90']:.0f} %</td><td>{_pct(s['whole_pct'])}</td>"
                   f"<td>{s['measured_s']:.2f}</td><td>{s['spread_median']:.0f} % ({s['spread_p90']:.0f} %)</td>"
                   f"<td>{s['baseline_median']:.0f} % ({s['baseline_p90']:.0f} %)</td>"
                   + (f"<td>{s['alone_median']:.0f} % ({s['alone_p90']:.0f} %)</td><td>{_pct(s['alone_whole_pct'])}</td>"
                      if "alone_median" in s else "<td>–</td><td>–</td>") + "</tr>")
    out.append("</table><h2>Per stage</h2><table><tr><th>target</th><th>stage</th><th>tasks</th><th>predicted s</th>"
               "<th>run 1 s</th><th>run 2 s</th><th>error</th><th>spread</th><th>baseline</th><th>(a) s</th>"
               "<th>(a) error</th></tr>")
    for r in rows:
        out.append(f"<tr><td>{html.escape(r['target'])}</td><td>{html.escape(r['stage'])}</td>"
                   f"<td>{r['tasks'] if r['tasks'] is not None else '–'}</td><td>{r['pred']:.3f}</td>"
                   f"<td>{r['runs'][0]:.3f}</td><td>{r['runs'][1]:.3f}</td><td>{_pct(r['err'])}</td>"
                   f"<td>{r['spread']:.0f} %</td><td>{_pct(r['baseline'])}</td>"
                   + (f"<td>{r['alone']:.3f}</td><td>{_pct(r['alone_err'])}</td>" if r.get("alone_err") is not None
                      else "<td>–</td><td>–</td>") + "</tr>")
    out.append("</table>")
    write_private(path, "\n".join(out) + "\n")
