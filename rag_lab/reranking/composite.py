"""Composite rerank score (spec §4.6.2; weights are ``PipelineParams`` fields)."""

from __future__ import annotations

from typing import Any

from rag_lab.searchutil.text import go_lower
from rag_lab.types.params import PipelineParams

__all__ = ["source_weight", "composite_score", "format_score", "is_web_source"]

_DEFAULT_PARAMS: PipelineParams | None = None


def _params(params: PipelineParams | None) -> PipelineParams:
    global _DEFAULT_PARAMS
    if params is not None:
        return params
    if _DEFAULT_PARAMS is None:
        _DEFAULT_PARAMS = PipelineParams()
    return _DEFAULT_PARAMS


def source_weight(result: Any, params: PipelineParams | None = None) -> float:
    """``web_source_weight`` (0.95) for web results (``knowledge_source`` "web_search", any
    case), 1.0 otherwise."""
    p = _params(params)
    return p.web_source_weight if is_web_source(getattr(result, "knowledge_source", "") or "") else 1.0


def is_web_source(source: str) -> bool:
    """``knowledge_source`` names the web ("web_search", any case)."""
    return bool(source) and go_lower(source) == "web_search"


def composite_score(result: Any, model_score: float, base_score: float, params: PipelineParams | None = None) -> float:
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
    score = (
        p.composite_model_weight * model_score
        + p.composite_base_weight * base_score
        + p.composite_source_weight * source_weight(result, p)
    )
    if score < 0.0:
        return 0.0
    if score > 1.0:
        return 1.0
    return score


def format_score(x: float) -> str:
    """Metadata score string: ``"%.4f"``."""
    return f"{x:.4f}"
