"""The rerank stage's scoring, written once on arrays: what it reads of each candidate
(:class:`CandidateColumns`), the kept items' composite and final scores (:func:`score_kept`,
sorted by :func:`rank_kept`), the image hits kept by vector score (:func:`image_kept`), and the
diagnostics rows built on first read (:class:`RerankRowsInput`).

The live stage builds the columns from its candidates; the tuning evaluator captures them once
per question and calls the same functions for every config.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from rag_lab.reranking.composite import composite_scores, faq_boost, format_score, is_web_source, stable_desc_order
from rag_lab.reranking.image import IMAGE_VECTOR, keep_rejected_images
from rag_lab.reranking.ladder import LadderOutcome
from rag_lab.types.params import PipelineParams
from rag_lab.types.search_result import MatchType, SearchResult

__all__ = [
    "CandidateColumns",
    "KeptScores",
    "RerankRowsInput",
    "faq_boost_of",
    "image_kept",
    "model_score_of",
    "rank_kept",
    "score_kept",
]


def faq_boost_of(faq_priority: bool, faq_boost: float) -> float | None:
    """The FAQ boost factor the rerank applies, ``None`` when off (priority off or boost <= 1)."""
    return faq_boost if faq_priority and faq_boost > 1.0 else None


@dataclass(frozen=True, slots=True)
class CandidateColumns:
    """What the scores read of each candidate, in candidate order: the search score, whether it
    is a graph hit (its base score is the model's), a web result (source weight
    ``web_source_weight``), an FAQ entry, a wiki page."""

    search_score: np.ndarray
    is_graph: np.ndarray
    is_web: np.ndarray
    is_faq: np.ndarray
    is_wiki: np.ndarray

    @classmethod
    def of(cls, candidates: Sequence[SearchResult]) -> CandidateColumns:
        graph = MatchType.GRAPH
        # each distinct source is tested once: a question's candidates come from a few sources
        web = {x for x in {r.knowledge_source for r in candidates} if is_web_source(x or "")}
        is_web = [r.knowledge_source in web for r in candidates] if web else [False] * len(candidates)
        ctype = [r.chunk_type for r in candidates]
        return cls(
            np.array([r.score for r in candidates], dtype=np.float64),
            np.array([r.match_type == graph for r in candidates], dtype=bool),
            np.array(is_web, dtype=bool),
            np.array([c == "faq" for c in ctype], dtype=bool),
            np.array([c == "wiki_page" for c in ctype], dtype=bool),
        )


@dataclass(frozen=True, slots=True)
class KeptScores:
    """Kept items scored, one entry per kept item with a valid index: its candidate ``index`` and
    the ``model``, ``base``, ``composite`` and ``final`` scores the stage leaves on that
    candidate, and whether the FAQ boost applied (``faq``). A candidate the model listed twice is
    scored twice in a row, the second time from the first's final score (the stage's in-place
    writes, seed): each of its entries carries the last."""

    index: np.ndarray
    model: np.ndarray
    base: np.ndarray
    composite: np.ndarray
    final: np.ndarray
    faq: np.ndarray

    @classmethod
    def none(cls) -> KeptScores:
        """No entry."""
        return cls(*(np.zeros(0, dtype=t) for t in (np.intp, float, float, float, float, bool)))

    def values(self, at: Sequence[int] | slice = slice(None)) -> list[tuple[float, float, float, float, bool]]:
        """``(model, base, composite, final, faq)`` of the entries ``at`` (all by default), as
        ``annotate_reranked`` takes them."""
        model, base, composite, final, faq = (
            a[at].tolist() for a in (self.model, self.base, self.composite, self.final, self.faq)
        )
        return list(zip(model, base, composite, final, faq))

    def order(self) -> np.ndarray:
        """Entries by final score, descending, ties in entry order (``list.sort(key=-score)``)."""
        return stable_desc_order(self.final)

    def take(self, order: np.ndarray) -> KeptScores:
        """The entries at ``order``."""
        return KeptScores(
            *(a[order] for a in (self.index, self.model, self.base, self.composite, self.final, self.faq))
        )


def score_kept(
    cols: CandidateColumns, index: np.ndarray, model: np.ndarray, params: PipelineParams, boost: float | None
) -> KeptScores:
    """Scores of the kept model items (``index``, ``model`` in the model's order; invalid indices
    dropped): base = the model score for a graph hit, else the search score; composite (§4.6.2);
    final = composite × ``boost`` for an FAQ entry when the boost is on (:func:`faq_boost_of`)."""
    n = cols.search_score.size
    index = np.asarray(index, dtype=np.intp)
    model = np.asarray(model, dtype=np.float64)
    valid = (index >= 0) & (index < n)
    if not valid.all():
        index, model = index[valid], model[valid]
    if np.unique(index).size < index.size:
        return _score_in_sequence(cols, index, model, params, boost)
    return _score(cols, index, model, cols.search_score[index], params, boost)


def _score(
    cols: CandidateColumns,
    index: np.ndarray,
    model: np.ndarray,
    search: np.ndarray,
    params: PipelineParams,
    boost: float | None,
) -> KeptScores:
    p = params
    base = np.where(cols.is_graph[index], model, search)
    weight = np.where(cols.is_web[index], p.web_source_weight, 1.0)
    composite = composite_scores(
        model, base, weight, p.composite_model_weight, p.composite_base_weight, p.composite_source_weight
    )
    faq = cols.is_faq[index] if boost is not None else np.zeros(index.size, dtype=bool)
    return KeptScores(index, model, base, composite, faq_boost(composite, faq, boost), faq)


def _score_in_sequence(
    cols: CandidateColumns, index: np.ndarray, model: np.ndarray, params: PipelineParams, boost: float | None
) -> KeptScores:
    """:func:`score_kept` when an index repeats: entry by entry, a repeated candidate's search
    score being the final score its previous entry left."""
    score = cols.search_score.copy()
    parts = []
    for e in range(index.size):
        one = _score(cols, index[e : e + 1], model[e : e + 1], score[index[e : e + 1]], params, boost)
        score[index[e]] = one.final[0]
        parts.append(one)
    last = {int(i): part for i, part in zip(index.tolist(), parts)}
    rows = [last[int(i)] for i in index.tolist()]
    cat = [np.concatenate([getattr(r, f) for r in rows]) for f in ("model", "base", "composite", "final", "faq")]
    return KeptScores(index, *cat)


def rank_kept(
    cols: CandidateColumns,
    m_index: np.ndarray,
    m_score: np.ndarray,
    ladder: LadderOutcome,
    params: PipelineParams,
    boost: float | None,
) -> KeptScores:
    """What the ladder kept, scored (:func:`score_kept`) and sorted by final score (stable): the
    list MMR picks from."""
    kept = score_kept(cols, m_index[ladder.positions], m_score[ladder.positions], params, boost)
    return kept.take(kept.order())


def model_score_of(m_index: np.ndarray, m_score: np.ndarray, n: int) -> dict[int, float]:
    """Each valid candidate's model score (the last when listed twice)."""
    return {i: s for i, s in zip(m_index.tolist(), m_score.tolist()) if 0 <= i < n}


def image_kept(
    cols: CandidateColumns,
    candidates: Sequence[SearchResult],
    pictorial: list[int],
    passed: set[int],
    vector_threshold: float,
    model_scores: dict[int, float],
    params: PipelineParams,
    boost: float | None,
) -> KeptScores:
    """Pictorial hits the model rejected but whose vector score is high enough
    (:func:`~rag_lab.reranking.image.keep_rejected_images`), scored with their model score (0
    when the model gave none)."""
    keep = keep_rejected_images(candidates, pictorial, passed, vector_threshold, params)
    index = np.array(keep, dtype=np.intp)
    model = np.array([model_scores.get(i, 0.0) for i in keep], dtype=np.float64)
    return score_kept(cols, index, model, params, boost)


@dataclass(frozen=True, slots=True)
class RerankRowsInput:
    """What the rerank diagnostics rows read, captured when the stage ends (strings, numbers and
    arrays nobody else holds), so that :meth:`build` gives the rows of that moment whenever it
    runs: later stages re-score the selected results in place (wiki boost, memory affinity)."""

    idents: tuple[list[str], list[str], list[str], list[str]]  # ids, knowledge ids, chunk types, sources
    marks: dict[int, tuple[str | None, str]]  # the candidates with a "faq_boosted" or "kept_by" mark
    base_scores: list[float]
    model_index: np.ndarray  # the model's answer (the model scores are read when the rows are built)
    model_score: np.ndarray
    ranked: KeptScores
    images: KeptScores
    selected: set[int]

    @classmethod
    def capture(
        cls,
        candidates: Sequence[SearchResult],
        model_index: np.ndarray,
        model_score: np.ndarray,
        ranked: KeptScores,
        images: KeptScores,
        selected: set[int],
    ) -> RerankRowsInput:
        metas = [r.metadata for r in candidates]
        return cls(
            (
                [r.id for r in candidates],
                [r.knowledge_id for r in candidates],
                [r.chunk_type for r in candidates],
                [r.knowledge_source for r in candidates],
            ),
            {
                i: (m.get("faq_boosted"), m.get("kept_by", ""))
                for i, m in enumerate(metas)
                if "faq_boosted" in m or "kept_by" in m
            },
            [r.score for r in candidates],
            model_index,
            model_score,
            ranked,
            images,
            selected,
        )

    def ids_of(self, index: np.ndarray) -> Callable[[], list[str]]:
        """A function giving the ids of the candidates at ``index`` (``ranked_ids``)."""
        ids = self.idents[0]
        return lambda: [ids[i] for i in index.tolist()]

    def build(self) -> list[dict[str, object]]:
        """One row per candidate, as the stage's diagnostics show it."""
        scored: dict[int, tuple[float, float, bool, bool]] = {}  # composite, final, faq boosted, image
        for ks, image in ((self.ranked, False), (self.images, True)):
            for i, c, f, b in zip(ks.index.tolist(), ks.composite.tolist(), ks.final.tolist(), ks.faq.tolist()):
                scored[i] = (c, f, b, image)
        model_scores = model_score_of(self.model_index, self.model_score, len(self.base_scores))
        rows: list[dict[str, object]] = []
        for i, (rid, kid, ctype, source) in enumerate(zip(*self.idents)):
            boosted, kept_by = self.marks.get(i, _NO_MARK)
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
                    "model_score": model_scores.get(i),
                    "composite_score": float(format_score(composite)) if composite is not None else None,
                    "final_score": final,
                    "faq_boosted": boosted == "true" or faq,
                    "passed_threshold": hit is not None and not image and kept_by != IMAGE_VECTOR,
                    "kept_by": IMAGE_VECTOR if image else kept_by,
                    "selected": i in self.selected,
                }
            )
        return rows


_NO_MARK: tuple[str | None, str] = (None, "")
