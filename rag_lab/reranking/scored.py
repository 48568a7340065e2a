"""The rerank stage's kept items as arrays, and its diagnostics rows built on first read.

:func:`score_kept` scores what the threshold kept as :func:`rag_lab.pipeline.plugins.rerank.score_reranked`
does (composite, FAQ boost) but into arrays, without copying or writing to a candidate: the stage
copies and annotates only what MMR selects. :class:`RerankRowsInput` captures what the
diagnostics rows read when the stage ends and builds the rows when someone reads them.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rag_lab.models.base import RerankScore
from rag_lab.reranking.composite import composite_score, format_score, is_web_source
from rag_lab.reranking.image import IMAGE_VECTOR
from rag_lab.reranking.vectorized import composite_scores, stable_desc_order
from rag_lab.reranking.vectorized import faq_boost as vector_faq_boost
from rag_lab.types.params import PipelineParams
from rag_lab.types.search_result import MatchType, SearchResult

__all__ = ["KeptScores", "RerankRowsInput", "faq_boost_of", "score_kept"]


def faq_boost_of(faq_priority: bool, faq_boost: float) -> float | None:
    """The FAQ boost factor the rerank applies, ``None`` when off (priority off or boost <= 1)."""
    return faq_boost if faq_priority and faq_boost > 1.0 else None


@dataclass(frozen=True, slots=True)
class KeptScores:
    """The kept model items scored as :func:`score_reranked` scores them, one entry per kept item
    with a valid index (model order): its candidate ``index`` and the ``model``, ``base``,
    ``composite`` and ``final`` scores :func:`annotate_reranked` leaves on that candidate, and
    whether it applied the FAQ boost (``faq``: ``metadata["faq_boosted"]`` written). A
    candidate the model listed twice is scored twice in a row (the second time from the first
    result, as the reference does on the one object): each of its entries carries the last."""

    index: np.ndarray
    model: np.ndarray
    base: np.ndarray
    composite: np.ndarray
    final: np.ndarray
    faq: np.ndarray

    def values(self, e: int) -> tuple[float, float, float]:
        """``(model, base, composite)`` of entry ``e``, as :func:`annotate_reranked` takes them."""
        return float(self.model[e]), float(self.base[e]), float(self.composite[e])

    def order(self) -> np.ndarray:
        """Entries by final score, descending, ties in entry order (``list.sort(key=-score)``)."""
        if np.isfinite(self.final).all():
            return stable_desc_order(self.final)
        final = self.final.tolist()  # NaN: Python's sort is the reference
        return np.array(sorted(range(len(final)), key=lambda e: -final[e]), dtype=np.intp)


def score_kept(
    candidates: Sequence[SearchResult], kept: Sequence[RerankScore], params: PipelineParams, faq_boost: float | None
) -> KeptScores:
    """:func:`score_reranked` as arrays, without writing to the candidates (``faq_boost`` as
    :func:`faq_boost_of` gives it): one vector composite over the kept items."""
    n = len(candidates)
    valid = [s for s in kept if 0 <= s.index < n]
    index = [s.index for s in valid]
    if not index:  # e.g. no pictorial image kept: the common case of the stage's second call
        none = np.zeros(0, dtype=np.float64)
        return KeptScores(np.zeros(0, dtype=np.intp), none, none, none, none, np.zeros(0, dtype=bool))
    if len(set(index)) < len(index):
        return _score_kept_sequentially(candidates, valid, params, faq_boost)
    m = len(valid)
    model = np.array([s.relevance_score for s in valid], dtype=np.float64)
    fields = [_SCORED_FIELDS(candidates[i]) for i in index]  # (score, match type, source, chunk type)
    search, match, source, ctype = zip(*fields) if fields else ((), (), (), ())
    base = np.array(search, dtype=np.float64)
    graph = np.array(match) == MatchType.GRAPH if m else np.zeros(0, dtype=bool)
    if graph.any():
        base = np.where(graph, model, base)
    weight = np.ones(m, dtype=np.float64)
    if any(source):
        web = params.web_source_weight
        of = {x: web if is_web_source(x) else 1.0 for x in set(source)}  # a few distinct sources
        weight = np.array([of[x] for x in source], dtype=np.float64)
    p = params
    composite = composite_scores(
        model, base, weight, p.composite_model_weight, p.composite_base_weight, p.composite_source_weight
    )
    final = composite
    faq = np.zeros(m, dtype=bool)
    if faq_boost is not None:
        faq = np.array([c == "faq" for c in ctype], dtype=bool)
        final = vector_faq_boost(composite, faq, True, faq_boost)
    return KeptScores(np.array(index, dtype=np.intp), model, base, composite, final, faq)


_SCORED_FIELDS = operator.attrgetter("score", "match_type", "knowledge_source", "chunk_type")


def _score_kept_sequentially(
    candidates: Sequence[SearchResult], kept: list[RerankScore], params: PipelineParams, faq_boost: float | None
) -> KeptScores:
    """:func:`score_kept` when an index repeats: the reference's order of writes, on scores only."""
    score = {s.index: candidates[s.index].score for s in kept}
    last: dict[int, tuple[float, float, float, float, bool]] = {}
    for s in kept:
        r = candidates[s.index]
        base = s.relevance_score if r.match_type == MatchType.GRAPH else score[s.index]
        composite = composite_score(r, s.relevance_score, base, params)
        faq = faq_boost is not None and r.chunk_type == "faq"
        final = composite * faq_boost if faq_boost is not None and faq else composite
        score[s.index] = final
        last[s.index] = (s.relevance_score, base, composite, final, faq)
    cols = [last[s.index] for s in kept]
    model, base, composite, final = (np.array([c[j] for c in cols], dtype=np.float64) for j in range(4))
    faq = np.array([c[4] for c in cols], dtype=bool)
    return KeptScores(np.array([s.index for s in kept], dtype=np.intp), model, base, composite, final, faq)


@dataclass(frozen=True, slots=True)
class RerankRowsInput:
    """What the rerank diagnostics rows read, captured when the stage ends (strings, numbers and
    arrays nobody else holds), so that :meth:`build` gives the rows of that moment whenever it
    runs: later stages re-score the selected results in place (wiki boost, memory affinity)."""

    idents: list[tuple[str, str, str, str]]
    marks: list[tuple[Any, Any]]
    base_scores: list[float]
    model_scores: dict[int, float]
    ranked: KeptScores
    images: KeptScores
    selected: set[int]

    @classmethod
    def capture(
        cls,
        candidates: Sequence[SearchResult],
        model_scores: dict[int, float],
        ranked: KeptScores,
        images: KeptScores,
        selected: set[int],
    ) -> RerankRowsInput:
        metas = [r.metadata for r in candidates]
        return cls(
            list(map(_IDENTS, candidates)),
            [(m.get("faq_boosted"), m.get("kept_by", "")) for m in metas],
            [r.score for r in candidates],
            model_scores,
            ranked,
            images,
            selected,
        )

    def ids_of(self, index: np.ndarray) -> Callable[[], list[str]]:
        """A function giving the ids of the candidates at ``index`` (``ranked_ids``)."""
        idents = self.idents
        return lambda: [idents[i][0] for i in index.tolist()]

    def build(self) -> list[dict[str, Any]]:
        """One row per candidate, as the stage's diagnostics show it."""
        scored: dict[int, tuple[float, float, bool, bool]] = {}  # composite, final, faq boosted, image
        for ks, image in ((self.ranked, False), (self.images, True)):
            for i, c, f, b in zip(ks.index.tolist(), ks.composite.tolist(), ks.final.tolist(), ks.faq.tolist()):
                scored[i] = (c, f, b, image)
        rows: list[dict[str, Any]] = []
        for i, ((rid, kid, ctype, source), (boosted, kept_by)) in enumerate(zip(self.idents, self.marks)):
            hit = scored.get(i)
            composite = final = None
            faq = image = False
            if hit is not None:
                composite, final, faq, image = hit
            rows.append(
                {
                    "id": rid,
                    "knowledge_id": kid,
                    "chunk_type": ctype,
                    "knowledge_source": source,
                    "base_score": self.base_scores[i],
                    "model_score": self.model_scores.get(i),
                    "composite_score": float(format_score(composite)) if composite is not None else None,
                    "final_score": final,
                    "faq_boosted": boosted == "true" or faq,
                    "passed_threshold": hit is not None and not image and kept_by != IMAGE_VECTOR,
                    "kept_by": IMAGE_VECTOR if image else kept_by,
                    "selected": i in self.selected,
                }
            )
        return rows


_IDENTS = operator.attrgetter("id", "knowledge_id", "chunk_type", "knowledge_source")
