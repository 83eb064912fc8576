"""`mtcenvelope plot`: one PNG per metric (value over processes, one line per file size) and an index.html.

x = total processes (procs per host x hosts; log2 axis), y = the metric (ops/s, or MiB/s for
bandwidths), one line per file size, markers at the (harmonic) mean of the ok repeats (log y axis when the values span
more than 20x, as bandwidths of 1 KiB and 16 MiB files do), error bars from
min to max over the repeats; failed points are counted in the legend. A sweep over several
host counts draws one line per (size, hosts) pair.
"""
from __future__ import annotations

import html
import io
import math
import os

from mtcio.private import private_dir, write_private

from .export import load
from .stats import hmean

TITLES = {
    "Tm": ("Fig. 5", "create throughput (metadata)"),
    "Ts": ("", "stat throughput (metadata of existing files)"),
    "Tf": ("", "fstat throughput (files just re-opened after a read)"),
    "T1L": ("Fig. 6", "1-to-1 read throughput, local"),
    "B1L": ("Fig. 7", "1-to-1 read bandwidth, local"),
    "T1R": ("Fig. 8", "1-to-1 read throughput, remote"),
    "B1R": ("Fig. 9", "1-to-1 read bandwidth, remote"),
    "TN": ("Fig. 10", "N-to-1 read throughput"),
    "BN": ("Fig. 11", "N-to-1 read bandwidth"),
    "TL": ("Fig. 12", "write throughput (local)"),
    "BL": ("Fig. 13", "write bandwidth (local)"),
    # what some tools measure instead of a core metric (envelope/README.md, "Metrics")
    "Tmu": ("", "create throughput, one directory per process"),
    "TNp": ("", "N-to-1 partitioned read throughput (1/N slice per process)"),
    "BNp": ("", "N-to-1 partitioned read bandwidth (1/N slice per process)"),
}


def _size(n: int) -> str:
    if n == 0:
        return "empty files"
    for u, m in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= m and n % m == 0:
            return f"{n // m} {u}"
    return f"{n} B"


def plot(db: str, name: str | None, outdir: str) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    df = load(db, name)
    run = str(df["run"].iloc[0])
    private_dir(outdir)                 # 0700, and every file in it 0600, whatever the umask
    files = []
    entries = []
    for metric in [m for m in TITLES if m in set(df["metric"])]:
        d = df[df["metric"] == metric]
        bw = d["unit"].iloc[0] == "bytes/s"
        scale = 1 / (1 << 20) if bw else 1.0
        unit = "MiB/s" if bw else "ops/s"
        fig, ax = plt.subplots(figsize=(6.4, 4.4), dpi=110)
        multi_h = d["hosts"].nunique() > 1
        groups = d.groupby(["file_size", "hosts"] if multi_h else ["file_size"])
        xs_all = set()
        for key, g in groups:
            size = key[0] if isinstance(key, tuple) else key
            agg = []
            for n, x in g.groupby("nprocs"):
                v = x.loc[x["ok"], "value"] * scale
                nfail = int((~x["ok"]).sum())
                if len(v):
                    agg.append((n, hmean(list(v)), v.min(), v.max(), nfail))
                else:
                    agg.append((n, math.nan, math.nan, math.nan, nfail))
            agg.sort()
            xs = [a[0] for a in agg]
            xs_all.update(xs)
            mean = [a[1] for a in agg]
            lo = [a[1] - a[2] if not math.isnan(a[1]) else 0 for a in agg]
            hi = [a[3] - a[1] if not math.isnan(a[1]) else 0 for a in agg]
            fails = sum(a[4] for a in agg)
            label = ("any size" if metric == "Tf" else _size(int(size))) + (f", {key[1]} hosts" if multi_h else "")
            if fails:
                label += f" ({fails} failed)"
            ax.errorbar(xs, mean, yerr=[lo, hi], marker="o", ms=4, capsize=3, lw=1.4,
                        label=label)
        ax.set_xscale("log", base=2)
        xt = sorted(xs_all)
        ax.set_xticks(xt)
        ax.set_xticklabels([str(x) for x in xt])
        ax.set_xlabel("processes (procs per host x hosts)")
        ax.set_ylabel(f"{metric} [{unit}]")
        vals = d.loc[d["ok"] & (d["value"] > 0), "value"] * scale
        if len(vals) and vals.max() / vals.min() > 20:    # sizes 1 KiB..16 MiB: log y
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        _, title = TITLES[metric]
        hosts = sorted(set(d["hosts"]))
        ax.set_title(f"{metric}: {title}\n(run {run}, hosts {hosts}, "
                     f"bars = min..max of repeats)", fontsize=9)
        ax.legend(title="file size", fontsize=8, title_fontsize=8)
        fig.tight_layout()
        fn = f"{metric}.png"
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        write_private(os.path.join(outdir, fn), buf.getvalue())
        plt.close(fig)
        files.append(os.path.join(outdir, fn))
        entries.append((metric, fn, f"{metric}: {title}", len(d), int((~d["ok"]).sum())))
    idx = os.path.join(outdir, "index.html")
    parts = ["<!doctype html><meta charset=utf-8>"
             f"<title>MTC envelope {html.escape(run)}</title>"
             "<style>body{font-family:sans-serif;margin:1em}"
             "figure{display:inline-block;margin:.5em;vertical-align:top}"
             "img{max-width:640px;border:1px solid #ccc}</style>"
             f"<h1>MTC envelope: run {html.escape(run)}</h1>"
             f"<p>source {html.escape(os.path.abspath(db))}; {len(df)} points, "
             f"{int((~df['ok']).sum())} failed. x = processes, one line per file size, "
             "error bars = min..max over repeats.</p>\n"]
    for metric, fn, title, n, nf in entries:
        parts.append(f"<figure><img src='{fn}' alt='{html.escape(title)}'>"
                     f"<figcaption>{html.escape(title)} &mdash; {n} points"
                     f"{f', {nf} failed' if nf else ''}</figcaption></figure>\n")
    write_private(idx, "".join(parts))
    files.append(idx)
    return files
