"""The figures of a prediction report (matplotlib; report.py writes them and the page around them).

Every axis says its unit and has numbers a reader can use: file sizes labelled (1K, 128K, 1M, 16M) at every size the
envelope measured where the labels have room (a tick mark at the others), and at 16K, 128M, 1G where none is near;
concurrency and node counts as integers, bandwidth in MiB/s, rates as plain numbers.  Each stage has one shape and
colour with a dark edge on every map, stages at one point are set side by side, and one legend names them (never
text beside a mark, where names of near stages print over each other); maps use perceptual colormaps (viridis,
cividis) that read in grey and for colour-blind readers.  Each function returns (file name, figure) or None.
"""
from __future__ import annotations

import math

import numpy as np

from mtcio.db.store import readable

from . import heatmap
from .surface import SIZELESS, fmt_size

MiB = float(1 << 20)
CLASS_METRIC = (("write (1 create per round)", "TL"), ("1-to-1 read, local", "T1L"), ("1-to-1 read, remote", "T1R"),
                ("N-to-1 read", "TN"))
# one shape per stage (up to 10 stages marked; more share the last shapes)
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
# categorical colours that colour-blind readers tell apart (Okabe and Ito)
CATEGORICAL = ("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#999999")


def pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams["text.usetex"] = False
    # titles at the top of their axes (where matplotlib's automatic placement put them, no axes having ticks on
    # top), without measuring every tick label at each draw to find out
    plt.rcParams["axes.titley"] = 1.0
    return plt


def label(s: str) -> str:
    """Stage names as plain text in matplotlib (a $ would start mathtext; an undecodable byte as \\xNN)."""
    return readable(s).replace("$", r"\$")


# ---- axes ---------------------------------------------------------------------------------------------------------

STANDARD_SIZES = [float(1 << e) for e in (10, 20, 24, 17, 14, 30, 27, 34)]   # 1K 1M 16M 128K 16K 1G 128M 16G
LABEL_PX = 36           # room a size label needs on the axis (4 characters at 10 pt and a gap), in pixels at 100 dpi


def size_ticks(lo: float, hi: float, measured=(), width_px: float = 1e9) -> tuple[list[float], list[float]]:
    """(labelled, unlabelled) ticks of a file-size axis over [lo, hi] drawn `width_px` wide: the measured sizes
    first (1K, 1M, 16M, 128K, 16K of them before the others), then 1K, 1M, 16M, 128K, 16K, 1G, 128M where none
    is near, each labelled only where its label has room beside those before it; a measured size left without a
    label still gets a tick mark."""
    def inside(v):
        return lo * 0.999 <= v <= hi * 1.001
    meas = sorted({float(v) for v in measured if inside(v)})
    order = ([v for v in STANDARD_SIZES if v in meas] + [v for v in meas if v not in STANDARD_SIZES]
             + [v for v in STANDARD_SIZES if inside(v) and v not in meas])
    gap = LABEL_PX * math.log(max(hi / lo, 1.0001)) / max(width_px, 1.0)      # in log units
    kept: list = []
    for v in order:
        if all(abs(math.log(v / k)) >= gap for k in kept):
            kept.append(v)
    return sorted(kept), [v for v in meas if v not in kept]


def _size_locator(lo, hi, measured, axis, minor):
    """Ticks of size_ticks for the axes as drawn: computed at draw time from its width in pixels, so that labels
    have room whatever the layout (colour bars, legends) left of the figure."""
    from matplotlib.ticker import Locator

    class SizeLocator(Locator):
        def __call__(self):
            ax = self.axis.axes
            box = ax.get_window_extent()
            dpi = ax.get_figure().dpi
            length = (box.width if axis == "x" else box.height) * 100 / dpi
            major, rest = size_ticks(lo, hi, measured, length)
            return rest if minor else major

    return SizeLocator()


def size_axis(ax, lo, hi, measured=(), axis="x", text="file size"):
    from matplotlib.ticker import FuncFormatter, NullFormatter
    a = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    a.set_major_locator(_size_locator(lo, hi, measured, axis, False))
    a.set_major_formatter(FuncFormatter(lambda v, _: fmt_size(v, sep="", short=True) + ("" if v >= 1024 else " B")))
    a.set_minor_locator(_size_locator(lo, hi, measured, axis, True))
    a.set_minor_formatter(NullFormatter())
    (ax.set_xlabel if axis == "x" else ax.set_ylabel)(f"{text} (bytes)")


def nice_ticks(lo: float, hi: float) -> list[float]:
    """Ticks of a log axis over [lo, hi] on 1-2-5 steps (1-1.5-2-3-5-7 on a narrow one), at least 2 and at most
    about 8; a range too narrow for two of them gets its ends, rounded inwards to 2 digits."""
    lo, hi = min(lo, hi), max(lo, hi)
    if not (lo > 0 and math.isfinite(lo) and math.isfinite(hi)):
        return []
    ticks: list = []
    for steps in ((1,), (1, 3), (1, 2, 5), (1, 1.5, 2, 3, 5, 7)):
        ticks = [m * 10.0 ** e for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
                 for m in steps if lo * 0.999 <= m * 10.0 ** e <= hi * 1.001]
        if len(ticks) >= 3 and (len(ticks) <= 8 or len(steps) == 1):
            return ticks
    if len(ticks) >= 2:
        return ticks
    e = 10.0 ** (math.floor(math.log10(hi)) - 1)          # 2 digits
    ends = {math.ceil(lo / e) * e, math.floor(hi / e) * e}
    return sorted(ends | set(ticks))


def plain(v) -> str:
    """A tick number without powers of ten: 0.5, 20, 1,500, 12,000."""
    if v >= 1000:
        return f"{v:,.0f}"
    return f"{v:g}"


def log_value_axis(ax, values, axis="y", unit=""):
    """A log axis of rates (ops/s, MiB/s) with 2-8 plain-number ticks over the data's range."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
    v = np.asarray([x for x in np.ravel(values) if x is not None and np.isfinite(x) and x > 0], dtype=float)
    if not len(v):
        return
    lo, hi = float(v.min()), float(v.max())
    if hi / lo < 1.2:                       # a flat line: give the axis room and two ticks
        lo, hi = lo / 1.25, hi * 1.25
    a = ax.yaxis if axis == "y" else ax.xaxis
    (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
    (ax.set_ylim if axis == "y" else ax.set_xlim)(lo / 1.15, hi * 1.15)
    a.set_major_locator(FixedLocator(nice_ticks(lo / 1.15, hi * 1.15)))
    a.set_major_formatter(FuncFormatter(lambda x, _: plain(x)))
    a.set_minor_locator(NullLocator())
    if unit:
        (ax.set_ylabel if axis == "y" else ax.set_xlabel)(unit)


def int_axis(ax, values, axis="y", text="concurrency k (processes in I/O at once)"):
    """A log axis of counts labelled as integers: 1, 2, 4, 8, 16, 32 (and every value given)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
    lo, hi = min(values), max(values)
    ticks = sorted({float(2 ** e) for e in range(0, 12) if lo * 0.999 <= 2 ** e <= hi * 1.001})
    if len(ticks) < 2:
        ticks = sorted({float(lo), float(hi)})
    a = ax.yaxis if axis == "y" else ax.xaxis
    (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
    a.set_major_locator(FixedLocator(ticks))
    a.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0f}"))
    a.set_minor_locator(NullLocator())
    (ax.set_ylabel if axis == "y" else ax.set_xlabel)(text)


def colorbar(fig, mappable, cax, text, values):
    """A colour bar in the axes `cax` with plain-number ticks on 1-2-5 steps over the values shown."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    ticks = nice_ticks(float(v.min()), float(v.max())) if len(v) else []
    if ticks:      # nice_ticks may take a tick a hair outside the values (100 for 100.07): the bar reaches it
        mappable.set_clim(min(float(v.min()), ticks[0]), max(float(v.max()), ticks[-1]))
    cb = fig.colorbar(mappable, cax=cax)
    cb.set_label(text)
    if ticks:
        cb.ax.yaxis.set_major_locator(FixedLocator(ticks))
        cb.ax.yaxis.set_major_formatter(FuncFormatter(lambda x, _: plain(x)))
        cb.ax.yaxis.set_minor_locator(NullLocator())
    return cb


# ---- layout -------------------------------------------------------------------------------------------------------
# Axes are placed at fixed distances in inches from the figure's edges and from each other, room measured once for
# the labels these figures draw (10-point tick labels of at most 5 characters, one axis label, a title).  Constrained
# layout found the same places by measuring every text of a figure in an extra draw: about a sixth of
# `mtcpredict --out`'s CPU time.  tests/test_predictor_figures.py checks that no text leaves the figure or covers
# another.

CBAR = (0.12, 0.18, 0.85)       # colour bar: gap to its map, its width, room for its tick labels and label (inches)


def fixed_grid(fig, rows, cols, *, left, right, bottom, top, wgap=0.0, hgap=0.0, cbar=False):
    """A rows x cols grid of axes `left`..`top` inches from the figure's edges, `wgap`/`hgap` inches apart, each
    with a colour bar axes to its right when `cbar`: (axes [rows][cols], colour bar axes [rows][cols] or None)."""
    W, H = fig.get_size_inches()
    pad, cw, room = CBAR if cbar else (0.0, 0.0, 0.0)
    aw = (W - left - right - (cols - 1) * wgap) / cols - (pad + cw + room)
    ah = (H - top - bottom - (rows - 1) * hgap) / rows
    axs, caxs = [], []
    for r in range(rows):
        y = H - top - (r + 1) * ah - r * hgap
        axs.append([])
        caxs.append([])
        for c in range(cols):
            x = left + c * (aw + pad + cw + room + wgap)
            axs[-1].append(fig.add_axes((x / W, y / H, aw / W, ah / H)))
            caxs[-1].append(fig.add_axes(((x + aw + pad) / W, y / H, cw / W, ah / H)) if cbar else None)
    return axs, caxs


def room_right(fig, ax, legend, gap=0.1):
    """Narrow `ax` so that `legend`, anchored at (1.01, 1) of it, ends `gap` inches inside the figure: the one text
    of unknown width (stage names) beside an axes, measured alone."""
    W, H = fig.get_size_inches()
    width = legend.get_window_extent(fig.canvas.get_renderer()).width / fig.dpi
    x0, y0, w, h = (v * d for v, d in zip(ax.get_position().bounds, (W, H, W, H)))
    w = min(w, (W - gap - width - x0) / 1.01)
    ax.set_position((x0 / W, y0 / H, w / W, h / H))


def stage_styles(stages) -> dict:
    """One marker and fill per stage, the same on every map: {name: (marker, face colour)}."""
    return {st.name: (MARKERS[i % len(MARKERS)], CATEGORICAL[i % len(CATEGORICAL)]) for i, st in enumerate(stages)}


MARK_PT = 15            # a stage marker's width and the gap between two set side by side, in points


def mark_stages(ax, points, styles):
    """Mark each stage at its (x, y) with its own marker, a dark edge; markers that would touch (stages at or near
    one point) are set side by side, a marker's width apart, centred on where they sit."""
    from matplotlib.transforms import offset_copy
    fig = ax.get_figure()
    px = fig.dpi / 72 * MARK_PT
    at = [(name, x, y, *ax.transData.transform((x, y))) for name, x, y in points]
    at.sort(key=lambda p: (round(p[4] / px), p[3]))          # rows of one concurrency, left to right
    clusters: list = []
    for p in at:
        c = clusters[-1] if clusters else None
        if c and abs(c[-1][4] - p[4]) < px and p[3] - c[-1][3] < px:
            c.append(p)
        else:
            clusters.append([p])
    for c in clusters:
        mid = sum(p[3] for p in c) / len(c)
        for i, (name, x, y, X, _) in enumerate(c):
            dx = (mid + (i - (len(c) - 1) / 2) * px - X) * 72 / fig.dpi        # points
            m, face = styles[name]
            ax.plot([x], [y], m, mfc=face, mec="black", mew=1.2, ms=9, linestyle="none", clip_on=False,
                    transform=offset_copy(ax.transData, fig=fig, x=dx, y=0, units="points"))


LEGEND_COLS = 7


def legend_height(rows: int) -> float:
    """Inches the stage legend takes under a figure: its title and `rows` rows of markers, its frame."""
    return 0.35 + 0.25 * rows if rows else 0.0


def stage_legend(fig, styles, names):
    """One legend for the whole figure, under it: each stage's marker."""
    from matplotlib.lines import Line2D
    handles = [Line2D([], [], marker=styles[n][0], mfc=styles[n][1], mec="black", mew=1.2, ms=9, linestyle="none",
                      label=label(n)) for n in names]
    if handles:
        fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.05 / fig.get_size_inches()[1]),
                   ncol=min(len(handles), LEGEND_COLS), fontsize=9,
                   title="stages (each where its tasks' files and concurrency put it)", title_fontsize=9)


def concurrency_limits(ax, ks):
    """Room above and below the measured concurrencies for the stages marked at the edges (k = 1, the largest)."""
    ax.set_ylim(min(ks) / 1.25, max(ks) * 1.25)
    ax.set_facecolor("#e8e8e8")


def stage_point(st, metric):
    """Where a stage sits on a map of one access class: (its file size, its concurrency), or None."""
    d = st.write.file_size if metric == "TL" else st.read.file_size
    if metric == "TN" and st.shared.files:
        x = st.shared.bytes / st.shared.files
    elif d and d.mean > 0 and metric != "TN":
        x = d.mean
    else:
        return None
    return x, st.hosts * (st.procs_per_host or 1)


def measured_sizes(surface):
    return sorted({s for (m, _), g in surface.grids.items() if m not in SIZELESS for s in g.sizes})


# ---- the figures --------------------------------------------------------------------------------------------------

def maps(plt, surface, wf, sizes, ks):
    from matplotlib.colors import LogNorm
    styles = stage_styles(wf.stages)
    shown = [m for _, m in CLASS_METRIC if m in surface.metrics()]
    marked = [st.name for st in wf.stages if any(stage_point(st, m) for m in shown)]
    rows = -(-len(marked) // LEGEND_COLS)          # the legend under the maps: a row per 7 stages
    fig = plt.figure(figsize=(12, 9.5 + 0.25 * max(rows - 1, 0)))
    axs, caxs = fixed_grid(fig, 2, 2, left=0.65, right=0.1, bottom=0.55 + legend_height(rows), top=0.3, wgap=0.75,
                           hgap=0.85, cbar=True)
    hosts = wf.stages[0].hosts
    measured = measured_sizes(surface)
    for ax, cax, (title, m) in zip(sum(axs, []), sum(caxs, []), CLASS_METRIC):
        if m not in surface.metrics():
            ax.set_title(f"{title}: not in the envelope")
            ax.axis("off")
            cax.axis("off")
            continue
        bw = heatmap.bandwidth(surface, m, sizes, ks, hosts, with_create=(m == "TL" and "Tm" in surface.metrics()))
        bw = bw / MiB
        pc = ax.pcolormesh(sizes, ks, bw, norm=LogNorm(), shading="auto", cmap="viridis")
        colorbar(fig, pc, cax, "predicted bandwidth (MiB/s)", bw)
        size_axis(ax, sizes[0], sizes[-1], measured)
        int_axis(ax, ks)
        concurrency_limits(ax, ks)
        ax.set_title(title)
        points = [(st.name, *p) for st in wf.stages if (p := stage_point(st, m))]
        mark_stages(ax, points, styles)
    stage_legend(fig, styles, marked)
    return "maps.png", fig


def stage_times(plt, surface, stages, sizes):
    from matplotlib.colors import LogNorm
    sel = stages[:4]
    fig = plt.figure(figsize=(5 * len(sel), 4.2))
    axs, caxs = fixed_grid(fig, 1, len(sel), left=0.55, right=0.1, bottom=0.55, top=0.3, wgap=0.6, cbar=True)
    sizes = sizes[::2]                   # a whole prediction per cell: half the columns of the other maps
    measured = measured_sizes(surface)
    for ax, cax, st in zip(axs[0], caxs[0], sel):
        nodes = np.array(sorted({1, 2, 4, 8, 16, 32, 64, st.hosts}))
        t = heatmap.stage_time(surface, st, sizes, nodes)
        pc = ax.pcolormesh(sizes, np.arange(len(nodes)), t, norm=LogNorm(), shading="nearest", cmap="cividis")
        colorbar(fig, pc, cax, "predicted I/O time (s)", t)
        size_axis(ax, sizes[0], sizes[-1], measured, text="task file size")
        ax.set_yticks(range(len(nodes)))
        ax.set_yticklabels([str(n) for n in nodes])
        ax.set_ylabel("nodes C")
        ax.set_title(f"{label(st.name)}: N={st.tasks}, {st.procs_per_host or 1} per node", fontsize=10)
        d = st.write.file_size or st.read.file_size
        if d and d.mean > 0:
            ax.plot([d.mean], [list(nodes).index(st.hosts)], "o", mfc="white", mec="black", mew=1.5, ms=10,
                    linestyle="none", label=f"as traced ({st.hosts} node{'s' if st.hosts != 1 else ''})")
            ax.legend(fontsize=8, loc="upper left", framealpha=0.9)
    return "stage_time.png", fig


def dominant(plt, surface, st, sizes, ks):
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch
    idx = heatmap.dominant(surface, st, sizes, ks, st.hosts)
    cmap = ListedColormap([CATEGORICAL[i] for i in (7, 4, 5, 6, 0)])
    fig = plt.figure(figsize=(8, 5.5))
    ((ax,),), _ = fixed_grid(fig, 1, 1, left=0.65, right=0.1, bottom=0.55, top=0.3)
    ax.pcolormesh(sizes, ks, idx, cmap=cmap, vmin=-0.5, vmax=4.5, shading="auto")
    size_axis(ax, sizes[0], sizes[-1], measured_sizes(surface),
              text="largest task file (every file of the task scaled with it)")
    int_axis(ax, ks)
    concurrency_limits(ax, ks)
    ax.set_title(f"dominant term for a task shaped like {label(st.name)}")
    present = sorted(set(np.unique(idx)))
    handles = [Patch(facecolor=cmap(i), edgecolor="black", label=heatmap.DOMINANT_LABELS[i]) for i in present]
    (mark,) = ax.plot([heatmap.reference_size(st)], [st.hosts * (st.procs_per_host or 1)], "o", mfc="white",
                      mec="black", mew=1.5, ms=10, linestyle="none", label=f"{label(st.name)} as traced")
    room_right(fig, ax, ax.legend(handles=handles + [mark], loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8))
    return "dominant.png", fig


def envelope(plt, surface):
    metrics = [m for m in ("Tm", "Ts", "Tf", "T1L", "B1L", "T1R", "B1R", "TN", "BN", "TL", "BL") if m in surface.metrics()]
    rows = -(-len(metrics) // 3)
    fig = plt.figure(figsize=(13, 3.8 * rows))
    axs, _ = fixed_grid(fig, rows, 3, left=0.7, right=0.1, bottom=0.55, top=0.3, wgap=0.75, hgap=0.85)
    axs = sum(axs, [])
    for ax, m in zip(axs, metrics):
        h, g = surface.grid_for(m, None)
        means = surface._means[(m, h)]
        scale, unit = (MiB, "MiB/s") if m.startswith("B") else (1.0, "ops/s")
        if m in SIZELESS:
            ks = g.ks
            vals = [means.get((g.sizes[0], k), np.nan) / scale for k in ks]
            ax.plot(ks, vals, "o-", mec="black")
            int_axis(ax, ks, axis="x", text="concurrency k (processes)")
        else:
            dense = np.exp(np.linspace(math.log(g.sizes[0]), math.log(g.sizes[-1]), 60))
            vals = []
            for i, k in enumerate(g.ks):
                line = heatmap.grid_values(surface, m, dense, np.array([float(k)]), h)[0] / scale
                p = ax.plot(dense, line, "-", lw=1, color=plt.cm.viridis(i / max(len(g.ks) - 1, 1) * 0.9))
                pts = [means.get((s, k), np.nan) / scale for s in g.sizes]
                ax.plot(g.sizes, pts, MARKERS[i % len(MARKERS)], color=p[0].get_color(), mec="black", mew=0.6,
                        label=f"k={k:g}")
                vals += list(line) + pts
            size_axis(ax, g.sizes[0], g.sizes[-1], g.sizes)
            ax.legend(fontsize=7, title="processes", title_fontsize=7)
        log_value_axis(ax, vals, unit=unit)
        ax.set_title(f"{m}, measured on {h} hosts", fontsize=10)
    for ax in axs[len(metrics):]:
        ax.axis("off")
    return "envelope.png", fig


def parity(plt, rows):
    """Left: predicted against measured stage time (log, the ±20 % band); right: each stage's error beside the
    spread of the runs it was validated against."""
    # log axes: a prediction of 0 s (a stage whose refined I/O is all absorbed) has no place on them; the tables
    # give it
    val = [d for d in rows if d.get("measured_s") and d["total_s"] > 0]
    if not val:
        return None
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 5), constrained_layout=True)
    for (v, mk), colour in zip((("faithful", "s"), ("refined", "o"), ("calibrated", "^")), CATEGORICAL[4:]):
        pts = [d for d in val if d["variant"] == v]
        if pts:
            a1.plot([d["measured_s"] for d in pts], [d["total_s"] for d in pts], mk, label=v, color=colour,
                    mec="black", ms=8, linestyle="none")
    lo = min(min(d["measured_s"], d["total_s"]) for d in val) / 1.5
    hi = max(max(d["measured_s"], d["total_s"]) for d in val) * 1.5
    a1.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    a1.fill_between([lo, hi], [lo / 1.2, hi / 1.2], [lo * 1.2, hi * 1.2], color="grey", alpha=0.15, label="±20 %")
    log_value_axis(a1, [lo, hi], axis="x", unit="measured I/O time (s)")
    log_value_axis(a1, [lo, hi], axis="y", unit="predicted I/O time (s)")
    a1.legend()
    a1.set_title("predicted against measured, per stage")
    ref = [d for d in val if d["variant"] == "calibrated"] or [d for d in val if d["variant"] == "refined"] or val
    y = np.arange(len(ref))
    err = [100 * (d["total_s"] / d["measured_s"] - 1) for d in ref]
    a2.barh(y, err, color=[CATEGORICAL[5] if e > 0 else CATEGORICAL[4] for e in err], edgecolor="black",
            label=f"{ref[0]['variant']} prediction's error")
    noise = [d.get("noise_pct") for d in ref]
    if any(n is not None for n in noise):
        # the bar is as wide as the spread, (slowest - fastest run) / mean, centred on 0
        a2.errorbar([0] * len(ref), y, xerr=[(n or 0) / 2 for n in noise], fmt="none", ecolor="black", capsize=4,
                    label="the runs' spread (its width)")
    a2.axvline(0, color="black", lw=0.8)
    a2.set_yticks(y)
    a2.set_yticklabels([label(d["stage"]) for d in ref])
    a2.invert_yaxis()
    a2.set_xlabel("error: predicted / measured − 1 (%)")
    a2.set_title("error per stage, beside the runs' spread")
    a2.legend(fontsize=8, loc="best")
    return "parity.png", fig


def whatif(plt, rows):
    """Dominant term per (what-if, stage), the predicted total written in each cell."""
    if not rows:
        return None
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    from mtcio.units import fmt_s
    combos = list(dict.fromkeys(r["what_if"] for r in rows))
    stages = list(dict.fromkeys(r["stage"] for r in rows))
    kinds = list(dict.fromkeys(r["dominant"] for r in rows))
    grid = np.zeros((len(combos), len(stages)))
    fig, ax = plt.subplots(figsize=(3 + 1.6 * len(stages), 1.5 + 0.4 * len(combos)), constrained_layout=True)
    for r in rows:
        i, j = combos.index(r["what_if"]), stages.index(r["stage"])
        grid[i, j] = kinds.index(r["dominant"])
        ax.text(j, i, fmt_s(r["total_s"]), ha="center", va="center", fontsize=7)
    cmap = ListedColormap([CATEGORICAL[i % len(CATEGORICAL)] for i in range(max(1, len(kinds)))])
    ax.imshow(grid, cmap=cmap, vmin=-0.5, vmax=len(kinds) - 0.5, aspect="auto")
    ax.set_xticks(range(len(stages)))
    ax.set_xticklabels([label(s) for s in stages], rotation=30, ha="right")
    ax.set_yticks(range(len(combos)))
    ax.set_yticklabels(combos, fontsize=8)
    ax.legend(handles=[Patch(facecolor=cmap(i), edgecolor="black", label=k) for i, k in enumerate(kinds)],
              fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.set_title("what-if: dominant term and predicted I/O time (refined)")
    return "whatif.png", fig


# the figures of a prediction's result (measured times, what-ifs); the others need only the point predictions
LATE = ("parity", "whatif")


def plan(plt, result, wf, surface, preds):
    """Every figure of the report, in page order, not drawn yet: [(section, draw)], draw() -> (file name, figure)
    or None (parity without a validation and what-if without what-ifs left out).  The maps' values are computed
    when a figure is drawn, so report.py can draw them in two processes.  result None: the figures that need none
    (all but LATE), which a forked child draws while the intervals and what-ifs are computed."""
    sizes, ks = heatmap.axes(surface, wf.stages)
    refined = [p for p in preds if p.variant == "refined"] or preds
    main = max(refined, key=lambda p: p.total_s)
    order = sorted(wf.stages, key=lambda s: -max((p.total_s for p in refined if p.stage == s.name), default=0))
    figs = [("parity", lambda: parity(plt, result["predictions"])),
            ("maps", lambda: maps(plt, surface, wf, sizes, ks)),
            ("stage_time", lambda: stage_times(plt, surface, order, sizes)),
            ("dominant", lambda: dominant(plt, surface, wf.stage(main.stage), sizes, ks)),
            ("whatif", lambda: whatif(plt, result.get("what_if"))),
            ("envelope", lambda: envelope(plt, surface))]
    # the parity and what-if figures only with a validation and what-ifs: not dealt to a process for nothing
    if result is None:
        skip = set(LATE)
    else:
        skip = {"parity"} if not any(d.get("measured_s") for d in result["predictions"]) else set()
        skip |= set() if result.get("what_if") else {"whatif"}
    return [(k, f) for k, f in figs if k not in skip]


def build(plt, result, wf, surface, preds):
    """Every figure of the report, in page order, drawn: [(section, (file name, figure) or None)]."""
    return [(key, draw()) for key, draw in plan(plt, result, wf, surface, preds)]
