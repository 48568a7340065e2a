"""The workbench's views as plain functions returning matplotlib Figures.

Each takes a :class:`~rag_lab.lab.Run` or a :class:`~rag_lab.lab.capture.Capture` (no model is
needed: everything comes from snapshots, diagnostics and stored extras) and returns a
``matplotlib.figure.Figure`` built without pyplot, so it works under any backend (Agg in tests and
reports), never opens a window and leaves no global figure behind. The figure carries a PNG rich
display (``_repr_png_``), so Jupyter shows it as a picture with no ``%matplotlib`` magic; elsewhere
call ``fig.savefig(path)``. Figures stay under :data:`MAX_FIGURE_HEIGHT` inches whatever the
number of candidates (bar views draw the top rows and say how many there are).

* :func:`plot_composite_scores`: the threshold on model scores and the stacked composite score
  (model / base / source parts, FAQ / wiki / memory boosts) per candidate.
* :func:`plot_mmr`: MMR's greedy steps (relevance, max redundancy, MMR value) and the picks at
  other λ, re-selected from the stored scores and token sets.
* :func:`plot_fusion`: vector vs keyword ranks and scores and the weighted RRF result.
* :func:`plot_merge`: which chunks were fused, expanded with neighbours or dropped as overlaps.
* :func:`plot_stage_timings`: the stages on a time line.

The package holds one module per kind of view (:mod:`.rerank`, :mod:`.fusion`, :mod:`.stages`)
over :mod:`.common` (palette, figure class, PNG).
"""

from __future__ import annotations

from rag_lab.lab.plots.common import MAX_FIGURE_HEIGHT, figure_png
from rag_lab.lab.plots.fusion import plot_fusion
from rag_lab.lab.plots.rerank import plot_composite_scores, plot_mmr
from rag_lab.lab.plots.stages import plot_merge, plot_stage_timings

__all__ = [
    "figure_png",
    "plot_composite_scores",
    "plot_fusion",
    "plot_merge",
    "plot_mmr",
    "plot_stage_timings",
    "MAX_FIGURE_HEIGHT",
]
