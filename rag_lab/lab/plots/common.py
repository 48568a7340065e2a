"""What every view shares: one palette, the Figure class with a PNG rich display (built on first
use, so importing the views does not import matplotlib), PNG bytes, the height cap and labels."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

    from rag_lab.lab.frames.rerank import RerankRow
    from rag_lab.types.params import PipelineParams

#: one palette for every view
C_MODEL, C_BASE, C_SOURCE, C_BOOST = "#4C72B0", "#DD8452", "#55A868", "#C44E52"
C_VECTOR, C_KEYWORD = "#4C72B0", "#DD8452"
C_KEPT, C_DROPPED, C_MUTED = "#55A868", "#C44E52", "#BBBBBB"
DEFAULT_LAMBDAS = (0.0, 0.3, 0.5, 0.7, 0.9, 1.0)


def _figure(width: float, height: float) -> Figure:
    return cast("Figure", _figure_class()(figsize=(width, height), layout="constrained"))


_LAB_FIGURE: type | None = None


def _figure_class() -> type:
    """:class:`matplotlib.figure.Figure` with a PNG rich display (built once, on first use, so
    importing this module does not import matplotlib)."""
    global _LAB_FIGURE
    if _LAB_FIGURE is None:
        from matplotlib.figure import Figure

        class LabFigure(Figure):
            """A Figure that displays itself in Jupyter (IPython's ``_repr_png_`` protocol) without
            pyplot: a bare Figure shows as ``<Figure size … with 2 Axes>`` unless pyplot's inline
            backend was activated, which the workbench never does."""

            def _repr_png_(self) -> bytes:
                return figure_png(self)

        _LAB_FIGURE = LabFigure
    return _LAB_FIGURE


#: the tallest figure a view draws, in inches (at 100 dpi: pixels / 100); long candidate lists
#: are cut to their top rows rather than drawn as a poster
MAX_FIGURE_HEIGHT = 11.0


def figure_png(fig: Figure, dpi: int = 100) -> bytes:
    """PNG bytes of a figure (Agg canvas, so no GUI backend is touched)."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def _row_height(n: int) -> float:
    """Inches per bar row: roomy for a handful, tighter for long lists (font 7-8 still fits)."""
    return 0.45 if n <= 12 else 0.27


def _clip_label(text: str, width: int = 30) -> str:
    """Shorten a label in the middle (the chunk suffix ``#c3`` stays visible)."""
    if len(text) <= width:
        return text
    tail = width // 2
    return text[: width - tail - 1] + "…" + text[-tail:]


def _run_params(run: object) -> PipelineParams:
    from rag_lab.types.params import PipelineParams

    return getattr(run, "params", None) or PipelineParams()


def composite_parts(row: RerankRow) -> list[tuple[str, float, str]]:
    """The weighted parts a rerank candidate's composite score stacks, first to last, as
    ``(part, value, colour)`` (a part with no score counts 0)."""
    return [
        ("model", float(row["model_part"] or 0.0), C_MODEL),
        ("base", float(row["base_part"] or 0.0), C_BASE),
        ("source", float(row["source_part"] or 0.0), C_SOURCE),
    ]


def candidate_fate(row: Mapping[str, object], alive: bool) -> str:
    """What became of a rerank candidate, for its bar's note: kept by another rule, filtered by
    the ladder, or its MMR pick order (empty when none applies)."""
    if row["kept_by"]:
        return f"  kept by {row['kept_by']}"
    if not alive:
        return "  filtered"
    if row["mmr_order"] is not None:
        return f"  MMR #{row['mmr_order']}"
    return ""
