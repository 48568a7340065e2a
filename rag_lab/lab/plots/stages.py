"""The merge view (what was fused, expanded with neighbours or dropped) and the stage time line."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rag_lab.lab.frames import (
    merge_rows,
    short_id,
)
from rag_lab.lab.plots.common import (
    C_DROPPED,
    C_KEPT,
    C_MODEL,
    MAX_FIGURE_HEIGHT,
    _figure,
)

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.text import Text

    from rag_lab.lab.frames.common import Viewed

_FATE_COLOR = {"kept": C_KEPT, "merged": C_MODEL}


def _fit_labels(fig: Figure, ax: Axes, labels: list[Text]) -> None:
    """Widen the x axis (from its start) until every label drawn right of its bar ends inside the
    axes: a label starting at data x, w pixels wide, fits when (x - start) / span <= 1 - w / W."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = fig.canvas
    renderer = FigureCanvasAgg(fig).get_renderer()  # type: ignore[no-untyped-call]  # measuring text needs a renderer
    fig.set_canvas(canvas)
    width = ax.get_window_extent(renderer).width
    lo, hi = ax.get_xlim()
    span = hi - lo
    for t in labels:
        w = t.get_window_extent(renderer).width
        if w < 0.9 * width:
            span = max(span, (t.get_position()[0] - lo) / (1 - w / width))
    if span > hi - lo:
        ax.set_xlim(lo, lo + span * 1.02)


def plot_merge(run: Viewed) -> Figure:
    """One row per chunk that entered the merge: its length before (light) and after (dark), the
    fate (kept, merged into another chunk, dropped as a partial overlap or duplicate) and what
    happened to it (chunks fused into it, neighbours added, parent chunk)."""
    rows = merge_rows(run)
    fig = _figure(11, min(MAX_FIGURE_HEIGHT, 1.4 + (0.5 if len(rows) <= 12 else 0.3) * max(3, len(rows))))
    ax = fig.subplots()
    ys = list(range(len(rows)))
    longest = 1
    labels = []
    for y, r in zip(ys, rows):
        color = _FATE_COLOR.get(r["fate"], C_DROPPED)
        lin = r["length_in"] or 0
        lout = r["length_out"] or 0
        longest = max(longest, lin, lout)
        ax.barh(y - 0.17, lin, height=0.32, color=color, alpha=0.35, label="length in" if y == 0 else None)
        if r["length_out"] is not None:
            ax.barh(y + 0.17, lout, height=0.32, color=color, label="length out" if y == 0 else None)
        notes = [
            r["fate"] if r["fate"] != "merged" else f"merged into {short_id(r['merged_into'])} ({r['merge_action']})"
        ]
        if r["absorbed"]:
            notes.append("fused ← " + ", ".join(short_id(x) for x in r["absorbed"]))
        if r["expanded_prev"] or r["expanded_next"]:
            notes.append(f"+{len(r['expanded_prev'])} before / +{len(r['expanded_next'])} after")
        if r["parent"]:
            notes.append(f"parent {short_id(r['parent'])}")
        if r["origin"] == "history":
            notes.append("from history")
        if len(r["absorbed"]) > 4:  # a long list would run off the figure
            notes[1] = "fused ← " + ", ".join(short_id(x) for x in r["absorbed"][:3]) + f" … +{len(r['absorbed']) - 3}"
        labels.append(ax.text(max(lin, lout), y, "  " + "; ".join(notes), va="center", fontsize=8))
    ax.set_yticks(ys, [short_id(r["id"]) for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, longest * 2.2)
    _fit_labels(fig, ax, labels)
    ax.set_xlabel("content length (characters): before the merge (light) / after (dark)")
    from matplotlib.patches import Patch

    handles = [
        Patch(color=C_KEPT, label="kept"),
        Patch(color=C_MODEL, label="merged into another"),
        Patch(color=C_DROPPED, label="dropped (overlap / duplicate)"),
    ]
    ax.legend(handles=handles, loc="lower right", fontsize=7)
    ax.set_title("Merge: fused, expanded and dropped chunks", fontsize=12)
    return fig


# -- timings ----------------------------------------------------------------------------------
def plot_stage_timings(run: Viewed) -> Figure:
    """The stages on a time line (ms from the first stage's start); failed stages in red."""
    timings = list(getattr(run, "timings", None) or [])
    if not timings:
        raise ValueError("this run has no stage timings")
    t0 = min(t.started_at for t in timings)
    fig = _figure(10, 1.2 + 0.38 * len(timings))
    ax = fig.subplots()
    ends = []
    for y, t in enumerate(timings):
        start = (t.started_at - t0) * 1000
        color = C_DROPPED if t.error else C_MODEL
        ax.barh(y, max(t.duration_ms, 0.01), left=start, color=color, height=0.6)
        ax.text(
            start + t.duration_ms,
            y,
            f" {t.duration_ms:.1f} ms" + (f"  {t.error_type or 'error'}" if t.error else ""),
            va="center",
            fontsize=8,
        )
        ends.append(start + t.duration_ms)
    ax.set_yticks(range(len(timings)), [t.event for t in timings], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(ends) * 1.25 + 1)
    ax.set_xlabel("ms since the first stage started")
    total = getattr(run, "total_ms", 0.0) or 0.0
    ax.set_title("Stage timings" + (f" (request total {total:.0f} ms)" if total else ""), fontsize=12)
    return fig
