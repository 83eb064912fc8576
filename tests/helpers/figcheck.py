"""Readability checks of a matplotlib figure, as its renderer draws it: text labels that print over each other,
axes without tick labels."""
from __future__ import annotations


def _tick_labels(axis):
    """The tick labels drawn: visible, with text, at a tick inside the view (matplotlib keeps others unused)."""
    lo, hi = sorted(axis.get_view_interval())
    eps = 1e-9 * max(abs(lo), abs(hi), 1e-300)
    return [t for t, v in zip(axis.get_ticklabels(), axis.get_ticklocs())
            if t.get_visible() and t.get_text().strip() and lo - eps <= v <= hi + eps]


def drawn_texts(fig):
    """Every text the figure shows: titles, axis labels, tick labels, texts and annotations, legends."""
    out = list(fig.texts)
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        out += [ax.title, ax._left_title, ax._right_title] + list(ax.texts)
        if ax.axison:
            out += [ax.xaxis.label, ax.yaxis.label] + _tick_labels(ax.xaxis) + _tick_labels(ax.yaxis)
        leg = ax.get_legend()
        if leg is not None and leg.get_visible():
            out += list(leg.get_texts()) + [leg.get_title()]
    return [t for t in out if t.get_visible() and t.get_text().strip()]


def overlapping_labels(fig, tol: float = 1.0) -> list[tuple[str, str]]:
    """Pairs of text labels whose drawn boxes overlap by more than `tol` pixels both ways."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer=r)) for t in drawn_texts(fig)]
    bad = []
    for i, (s1, b1) in enumerate(boxes):
        for s2, b2 in boxes[i + 1:]:
            w = min(b1.x1, b2.x1) - max(b1.x0, b2.x0)
            h = min(b1.y1, b2.y1) - max(b1.y0, b2.y0)
            if w > tol and h > tol:
                bad.append((s1, s2))
    return bad


def axes_without_tick_labels(fig, minimum: int = 2) -> list[str]:
    """Axes (and colour bars) shown, whose x or y axis has fewer than `minimum` tick labels."""
    fig.canvas.draw()
    bad = []
    for ax in fig.axes:
        if not ax.axison or not ax.get_visible():
            continue
        pos = ax.get_position()
        colorbar = hasattr(ax, "_colorbar")
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            if colorbar and name == ("x" if pos.height > pos.width else "y"):
                continue                        # a colour bar has numbers along its length only
            shown = _tick_labels(axis)
            if len(shown) < minimum:
                bad.append(f"{ax.get_title() or ax.get_label() or 'axes'}: {name} axis shows "
                           f"{[t.get_text() for t in shown]}")
    return bad


def texts_outside(fig, tol: float = 1.0) -> list[str]:
    """Text labels (and colour bars, legends) that the figure's edges cut: a fixed layout has room for them only
    if it was given enough."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    W, H = fig.bbox.width, fig.bbox.height
    items = [(t.get_text(), t.get_window_extent(renderer=r)) for t in drawn_texts(fig)]
    items += [(f"legend {i}", leg.get_window_extent(r)) for i, leg in enumerate(
        list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None])]
    items += [(ax.get_label() or "axes", ax.get_window_extent(r)) for ax in fig.axes if ax.get_visible()]
    return [s for s, b in items if b.x0 < -tol or b.y0 < -tol or b.x1 > W + tol or b.y1 > H + tol]
