"""The raw rerank-model scores an evaluation saw: per question the lowest and highest model score
of its rerank candidates (the rerank stage's rows), per suite their envelope.

Reports store it under ``meta["provenance"]["rerank_scores"]`` with the reranker's id
(``meta["provenance"]["models"]["reranker"]``), so that a threshold calibrated or a baseline made
on one score scale is not silently compared with another (a reranker swapped for one whose scores
are logits, or a model update that shifts its range): the gate and ``rag-lab calibrate --check``
warn by name (:func:`range_warning`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

__all__ = ["ScoreRange", "merge_ranges", "range_warning", "run_score_range"]


class ScoreRange(TypedDict):
    """The raw rerank-model scores seen over the questions that had them."""

    min: float
    max: float
    questions: int


def run_score_range(diagnostics: Mapping[str, object] | None) -> tuple[float, float] | None:
    """``(min, max)`` of the model scores in one run's rerank rows (None: no model score)."""
    from rag_lab.types.diagnostics import RerankDiagnostics

    raw = (diagnostics or {}).get(RerankDiagnostics.KEY)
    if raw is None:
        return None
    rows = RerankDiagnostics.from_dict(raw).rows or []
    vals = [float(r["model_score"]) for r in rows if isinstance(r.get("model_score"), (int, float))]
    vals = [v for v in vals if math.isfinite(v)]
    return (min(vals), max(vals)) if vals else None


def merge_ranges(ranges: Iterable[tuple[float, float] | None]) -> ScoreRange | None:
    """``{"min", "max", "questions"}`` over the questions that had model scores (None: none)."""
    got = [r for r in ranges if r is not None]
    if not got:
        return None
    return {"min": min(r[0] for r in got), "max": max(r[1] for r in got), "questions": len(got)}


def _span(r: Mapping[str, Any]) -> tuple[float, float]:
    return float(r["min"]), float(r["max"])


def range_warning(
    what: str, old: Mapping[str, object] | None, new: Mapping[str, object] | None, rel: float = 0.25
) -> str:
    """A warning when two observed score ranges clearly differ (``""`` otherwise): the ends move
    by more than ``rel`` of the older range's width, or the ranges do not overlap. Ranges seen on
    different questions differ a little by nature; a change of scale (0..1 vs logits) is what this
    catches. ``what`` names the two sides, e.g. ``"the baseline's"``."""
    if not old or not new:
        return ""
    (a0, a1), (b0, b1) = _span(old), _span(new)
    width = max(a1 - a0, 1e-9)
    if b0 > a1 or b1 < a0 or abs(b0 - a0) > rel * width or abs(b1 - a1) > rel * width:
        return (
            f"the reranker's raw scores span [{b0:.4g}, {b1:.4g}] now, [{a0:.4g}, {a1:.4g}] in {what}: "
            "another score scale, so thresholds (rerank_threshold, rerank_fallback_min_score) tuned on one "
            "do not mean the same on the other; calibrate again (rag-lab calibrate)"
        )
    return ""
