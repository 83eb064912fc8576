"""Ablation: which refinements of the refined model earn their place, on kept held-out runs.

For each folder `tests/bench/scale_predict.py --keep DIR` left, each target is predicted again from the model its
pass instantiated with the target's graph (model-at.yaml) and the envelopes that pass measured: with the default
refinements, then with the default less each one in turn. Per configuration: median and p90 of |error| over its
stages against the mean of its two runs. With --synthetic, the folder is one `tests/bench/predict_bench.py --keep`
left: each trace run predicted from the other's model, one configuration per access kind and direction. The
decision follows docs/experiments/ablation-rule.md.

    python tests/bench/ablation.py KEPT [KEPT ...] [--synthetic] [--units a,b,...] [--json OUT]
"""
import argparse
import contextlib
import io
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import scale_predict as sp  # noqa: E402

from mtcio.predictor import cli as pcli  # noqa: E402
from mtcio.predictor import model as pmodel  # noqa: E402


def predict(model_at, db, refine, env_args=None):
    """Refined seconds per stage: mtcpredict in this process (one import of its libraries for every call)."""
    out = io.StringIO()
    argv = [model_at, *(env_args or sp.envelope_args(db)), "--variant", "refined", "--bootstrap", "0", "--json",
            f"--refine={refine}"]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        rc = pcli.main(argv)
    if rc:
        raise SystemExit(f"mtcpredict {' '.join(argv)}: exit {rc}")
    return {p["stage"]: p["total_s"] for p in json.loads(out.getvalue())["predictions"] if p["variant"] == "refined"}


def metrics(pred, meas):
    """(median, p90) of |error| % against each reference: the runs' mean, run 1 alone, run 2 alone."""
    out = {}
    for ref in ("mean", *range(len(meas))):
        errs = []
        for st, p in pred.items():
            m = [x.get(st) for x in meas]
            if None in m:
                continue
            y = sum(m) / len(m) if ref == "mean" else m[ref]
            if y:
                errs.append(abs(100 * (p - y) / y))
        out[ref] = (statistics.median(errs), sp.p90(errs))
    return out


class Config:
    """One scored configuration: a model, its envelopes, the measured runs it is scored on, the stages it covers
    and its noise group (two figures of one group differ only by which run of the same stages is the target)."""

    def __init__(self, name, model, db, meas, env_args=None, stage_filter=None, group=None):
        self.name, self.model, self.db, self.meas, self.env_args = name, model, db, meas, env_args
        self.stage_filter, self.group = stage_filter, group

    def score(self, refine):
        pred = predict(self.model, self.db, refine, self.env_args)
        if self.stage_filter:
            pred = {st: v for st, v in pred.items() if self.stage_filter(st)}
        return metrics(pred, self.meas)


def configurations(kept):
    for work in kept:
        state = json.load(open(os.path.join(work, "state.json")))
        db = state["db"] if os.path.exists(state["db"]) else os.path.join(work, os.path.basename(state["db"]))
        for tgt in state["targets"]:
            model_at = os.path.join(work, tgt["graph"], "model-at.yaml")
            meas = [sp.measured(db, r, model_at) for r in tgt["runs"]]
            yield Config(f"{os.path.basename(os.path.normpath(work))}:{tgt['tiles']}x{tgt['hosts']}", model_at, db,
                         meas)


def stage_kind(stage):
    """predict_bench's stage names are KIND-SIZEk-CxP."""
    return stage.rsplit("-", 2)[0]


def synthetic_configurations(work, runs=("r1", "r2")):
    db = os.path.join(work, "bench.db")
    for i, run in enumerate(runs):
        other = os.path.join(work, f"{runs[(i + 1) % len(runs)]}.yaml")
        meas = [sp.measured(db, run, other)]
        for kind in sorted({stage_kind(st) for st in meas[0]}):
            yield Config(f"{kind}:{run}", other, db, meas, ["--envelope", f"{db}:env"],
                         lambda st, k=kind: stage_kind(st) == k, group=kind)


def noise_of(configs, figures):
    """(N_median, N_p90): half the gap between the two figures of each noise group, averaged over the groups.
    A scale configuration is its own group (scored against run 1, then run 2); a synthetic kind's group is its
    two directions."""
    groups = {}
    for c, f in zip(configs, figures):
        if c.group is None:
            groups[c.name] = (f[0], f[1])
        else:
            groups.setdefault(c.group, []).append(f["mean"])
    pairs = list(groups.values())
    return [sum(abs(a[j] - b[j]) / 2 for a, b in pairs) / len(pairs) for j in (0, 1)]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("kept", nargs="+", help="folders scale_predict.py --keep left (predict_bench.py's with --synthetic)")
    p.add_argument("--synthetic", action="store_true", help="KEPT is one folder predict_bench.py --keep left")
    p.add_argument("--units", help="refinements to ablate, comma-separated (default: every default one)")
    p.add_argument("--json", help="write every figure here")
    a = p.parse_args()
    units = a.units.split(",") if a.units else list(pmodel.DEFAULT)
    if a.synthetic and len(a.kept) != 1:
        p.error("--synthetic takes one folder")
    configs = list(synthetic_configurations(a.kept[0]) if a.synthetic else configurations(a.kept))
    res = {"configs": [c.name for c in configs], "default": [], "off": {u: [] for u in units}}
    for i, c in enumerate(configs):
        base = c.score("default")
        res["default"].append(base)
        print(f"[{i + 1}/{len(configs)}] {c.name}: default median {base['mean'][0]:.1f} % p90 {base['mean'][1]:.1f} %",
              file=sys.stderr, flush=True)
        for u in units:
            res["off"][u].append(c.score(f"-{u}"))
    n = len(configs)
    noise = noise_of(configs, res["default"])
    mean_default = [sum(d["mean"][j] for d in res["default"]) / n for j in (0, 1)]
    print(f"\n{n} configurations ({', '.join(res['configs'])})")
    print(f"default: mean median {mean_default[0]:.2f} %, mean p90 {mean_default[1]:.2f} %; "
          f"noise N_median {noise[0]:.2f}, N_p90 {noise[1]:.2f} points")
    print(f"{'refinement off':22s} {'d median':>9s} {'d p90':>8s}  verdict")
    rows, verdicts = [], {}
    for u in units:
        d = [sum(o["mean"][j] - b["mean"][j] for o, b in zip(res["off"][u], res["default"])) / n for j in (0, 1)]
        keep = d[0] > noise[0] or d[1] > noise[1]
        hurts = d[0] < -noise[0] or d[1] < -noise[1]
        rows.append((u, d, keep))
        verdict = ("earns" if keep else "hurts" if hurts else "within noise") if a.synthetic else \
            ("stays" if keep else "goes")
        verdicts[u] = verdict
        print(f"{u:22s} {d[0]:+9.2f} {d[1]:+8.2f}  {verdict}")
    if a.synthetic:     # this data set reports; it removes nothing (docs/experiments/ablation-rule.md)
        rows = [(u, d, True) for u, d, _ in rows]
    # the check of the whole: every failing refinement off together; put back, largest delta first, while the
    # reduced model is worse than the default by more than the noise
    goes = sorted((r for r in rows if not r[2]), key=lambda r: (r[1][0], r[1][1]), reverse=True)
    put_back = []
    while goes:
        off = ",".join(f"-{u}" for u, _, _ in goes)
        got = [c.score(off)["mean"] for c in configs]
        whole = [sum(g[j] for g in got) / n for j in (0, 1)]
        print(f"without {', '.join(u for u, _, _ in goes)}: mean median {whole[0]:.2f} %, mean p90 {whole[1]:.2f} %")
        if whole[0] - mean_default[0] <= noise[0] and whole[1] - mean_default[1] <= noise[1]:
            res["reduced"] = {"off": [u for u, _, _ in goes], "median": whole[0], "p90": whole[1]}
            break
        put_back.append(goes.pop(0)[0])
        print(f"  put back: {put_back[-1]}")
    res["put_back"] = put_back
    res["summary"] = {"noise": noise, "default": mean_default,
                      "delta": {u: d for u, d, _ in rows}, "verdict": verdicts}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1, default=str)


if __name__ == "__main__":
    main()
