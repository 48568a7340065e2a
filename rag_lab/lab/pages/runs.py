"""Runs side by side as an HTML page (``runs.html.j2``): the means of every run, the params that
differ and, for two runs, the gate's paired comparison (:class:`rag_lab.eval.runs.Comparison`)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from rag_lab.lab.pages.render import render_page

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.runs import Comparison

__all__ = ["runs_html"]


def runs_html(cmp: Comparison) -> str:
    """The page ``rag-lab runs compare --out DIR`` writes (``runs_compare.html``)."""
    return render_page(
        "runs.html.j2",
        runs=cmp.runs,
        rows=[(s, m, [f"{v:.4f}" if math.isfinite(v) else "—" for v in vals]) for s, m, vals in cmp.rows],
        params=[(k, [repr(x) for x in v]) for k, v in cmp.params.items()],
        gate_table=cmp.gate.table() if cmp.gate is not None else None,
    )
