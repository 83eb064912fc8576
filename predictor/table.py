"""The terminal table of a prediction (and of a what-if sweep)."""
from __future__ import annotations

from mtcio.exitcodes import printable
from mtcio.units import fmt_bytes, fmt_interval, fmt_s

# how the points were read, said where it is not the default (--cell-rate)
CELL_RATE_SAID = {"quartile": "each point its repeats' upper quartile",
                  "mean": "each point its repeats' mean, swung or not"}


def _s(x):
    return fmt_s(x, none="-")


_LEFT = {"stage", "variant", "bound", "what-if"}


def _grid(header, rows):
    w = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h)) for i, h in enumerate(header)]

    def fmt(r):  # names left, numbers right
        return "  ".join(str(c).ljust(w[i]) if header[i] in _LEFT else str(c).rjust(w[i])
                         for i, c in enumerate(r)).rstrip()
    return "\n".join([fmt(header), fmt(["-" * x for x in w])] + [fmt(r) for r in rows])


INTERVAL_SAID = ("90% interval (faithful, refined): the envelope's own spread (its repeats resampled); not the "
                 "workflow's spread from run to run nor the model's error (predictor/README.md, Intervals)")


def render(result: dict) -> str:
    validated = any("measured_s" in d for d in result["predictions"])
    header = ["stage", "variant", "N", "C", "D", "α", "read", "write", "meta", "total", "90% interval", "bound"]
    if validated:
        header += ["measured", "error", "noise"]
    rows = []
    for d in result["predictions"]:
        iv = d.get("interval")
        r = [printable(d["stage"], 40), d["variant"], d["N"],
             d["C"] if d["slots"] == d["C"] else f"{d['C']}x{d['slots'] // d['C']}",
             fmt_bytes(d["D"] or d.get("D_write")), f"{d['alpha']:.2f}", _s(d["read_s"]),
             _s(d["write_s"]),
             _s(d["meta_s"]), _s(d["total_s"]), fmt_interval(*iv) if iv else "-",
             d["dominant"] + (f" [{d['write_bound']}]" if d.get("write_bound") else "")]
        if validated:
            e = d.get("error_pct")
            r += [_s(d.get("measured_s")), f"{e:+.1f} %" if e is not None else "-",
                  f"{d['noise_pct']:.1f} %" if d.get("noise_pct") is not None else "-"]
        rows.append(r)
    env = result["envelope"]
    said = CELL_RATE_SAID.get(env.get("cell_rate"))
    lines = [f"envelope: {env['name']} ({env['origin']})" + (f", {said}" if said else "")]
    if result.get("validated_runs"):
        lines.append(f"validated against: {', '.join(printable(r, 80) for r in result['validated_runs'])}")
    lines.append(_grid(header, rows))
    if any(d.get("interval") for d in result["predictions"]):
        lines.append(INTERVAL_SAID)
    if validated:
        lines.append("measured: per host, the tasks' traced I/O time / the host's slots, max over hosts")
    cal = result.get("calibration")
    if cal:
        lines.append(f"calibration: {cal.get('summary', '')}")
    if result.get("what_if"):
        lines.append("")
        lines.append("what-if (refined):")
        wr = [[r["what_if"], printable(r["stage"], 40), r["N"], r["C"], f"{r['alpha']:.2f}", _s(r["read_s"]),
               _s(r["write_s"]), _s(r["meta_s"]), _s(r["total_s"]), r["dominant"]] for r in result["what_if"]]
        lines.append(_grid(["what-if", "stage", "N", "C", "α", "read", "write", "meta", "total", "bound"], wr))
    return "\n".join(lines)
