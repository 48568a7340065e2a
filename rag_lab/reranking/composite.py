"""Composite rerank score (spec §4.6.2; weights are ``PipelineParams`` fields), the FAQ boost
and the re-sort of a boost stage, written once on arrays: :func:`composite_score` is
:func:`composite_scores` on one item."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rag_lab.searchutil.text import go_lower
from rag_lab.types.params import PipelineParams

__all__ = [
    "boosted_order",
    "composite_score",
    "composite_scores",
    "faq_boost",
    "format_score",
    "is_web_source",
    "source_weight",
    "stable_desc_order",
]

_DEFAULT_PARAMS: PipelineParams | None = None


def _params(params: PipelineParams | None) -> PipelineParams:
    global _DEFAULT_PARAMS
    if params is not None:
        return params
    if _DEFAULT_PARAMS is None:
        _DEFAULT_PARAMS = PipelineParams()
    return _DEFAULT_PARAMS


def source_weight(result: object, params: PipelineParams | None = None) -> float:
    """``web_source_weight`` (0.95) for web results (``knowledge_source`` "web_search", any
    case), 1.0 otherwise."""
    p = _params(params)
    return p.web_source_weight if is_web_source(getattr(result, "knowledge_source", "") or "") else 1.0


def is_web_source(source: str) -> bool:
    """``knowledge_source`` names the web ("web_search", any case)."""
    return bool(source) and go_lower(source) == "web_search"


def composite_score(
    result: object, model_score: float, base_score: float, params: PipelineParams | None = None
) -> float:
    """``clamp(w_model*model + w_base*base + w_source*source_weight, 0, 1)``.

    Evaluated left to right in IEEE doubles, so the defaults give
    ``0.6*1 + 0.3*1 + 0.1*1 == 0.9999999999999999`` (spec §0).

    >>> from rag_lab.types import SearchResult
    >>> composite_score(SearchResult(id="a"), model_score=0.8, base_score=0.5)  # 0.48 + 0.15 + 0.1
    0.73
    >>> round(composite_score(SearchResult(id="w", knowledge_source="web_search"), 0.8, 0.5), 4)  # source 0.95
    0.725
    """
    p = _params(params)
    one = composite_scores(
        np.array([model_score], dtype=np.float64),
        np.array([base_score], dtype=np.float64),
        np.array([source_weight(result, p)], dtype=np.float64),
        p.composite_model_weight,
        p.composite_base_weight,
        p.composite_source_weight,
    )
    return float(one[0])


def composite_scores(
    model: np.ndarray,
    base: np.ndarray,
    source_weight: np.ndarray,
    w_model: float,
    w_base: float,
    w_source: float,
) -> np.ndarray:
    """``clip(w_model*model + w_base*base + w_source*source_weight, 0, 1)`` per item, left to
    right in doubles (a NaN stays NaN)."""
    s = w_model * np.asarray(model, dtype=np.float64) + w_base * np.asarray(base, dtype=np.float64)
    s = s + w_source * np.asarray(source_weight, dtype=np.float64)
    return np.minimum(np.maximum(s, 0.0), 1.0)


def faq_boost(scores: np.ndarray, is_faq: np.ndarray, boost: float | None) -> np.ndarray:
    """Scores of FAQ items × ``boost`` (not capped); unchanged when ``boost`` is ``None`` (FAQ
    priority off or a boost of at most 1, see :func:`rag_lab.reranking.scored.faq_boost_of`)."""
    if boost is None or not is_faq.any():
        return scores
    return np.where(is_faq, scores * boost, scores)


def stable_desc_order(scores: np.ndarray | Sequence[float]) -> np.ndarray:
    """Positions by descending score, equal scores in their current order, as Python's
    ``sort(key=lambda r: -r.score)`` orders them (NaN scores included)."""
    a = np.asarray(scores, dtype=np.float64)
    if np.isfinite(a).all():
        return np.argsort(-a, kind="stable")
    values = a.tolist()
    return np.array(sorted(range(len(values)), key=lambda i: -values[i]), dtype=np.intp)


def boosted_order(scores: Sequence[float], factors: Sequence[float]) -> tuple[list[float], list[int]]:
    """A boost stage (wiki pages × ``wiki_boost_factor``, memory affinity): each score × its
    factor, and the positions re-sorted stably by the new scores (``sort(key=-score)``)."""
    boosted = [s * f for s, f in zip(scores, factors)]
    return boosted, stable_desc_order(boosted).tolist()


def format_score(x: float) -> str:
    """Metadata score string: ``"%.4f"``."""
    return f"{x:.4f}"
