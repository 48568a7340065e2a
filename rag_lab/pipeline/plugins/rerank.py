"""CHUNK_RERANK body: model scores → threshold ladder → composite score → FAQ boost → MMR.

Spec §4.6.1 with the seed's refinements (model passage = title + heading + body, at most
``rerank_max_candidates`` candidates by search score, 60 s model timeout — for a remote model only,
see :func:`rerank_call` —, graph hits use the model score as base, FAQ boost not capped). Each
decision is written once, on arrays, and shared with the tuning evaluator: the ladder in
:mod:`rag_lab.reranking.ladder`, the scores in :mod:`rag_lab.reranking.scored`, MMR in
:mod:`rag_lab.reranking.mmr`. Every decision is written to ``state.diagnostics["rerank"]`` for the
workbench's composite-score and MMR views.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from rag_lab.models.base import Reranker, RerankScore
from rag_lab.models.timeouts import call_with_timeout, is_in_process
from rag_lab.pipeline.contracts import StageContract
from rag_lab.pipeline.plugin import ErrGetRerankModel, ErrSearchNothing, NextFn, PluginError
from rag_lab.pipeline.plugins.base import StagePlugin
from rag_lab.reranking.composite import format_score
from rag_lab.reranking.image import IMAGE_VECTOR, pictorial_indices, score_images_with_vision
from rag_lab.reranking.ladder import model_arrays, run_threshold_ladder
from rag_lab.reranking.mmr import select_mmr_ids_deferred
from rag_lab.reranking.passage import passages_of_results
from rag_lab.reranking.scored import (
    CandidateColumns,
    KeptScores,
    RerankRowsInput,
    faq_boost_of,
    image_kept,
    model_score_of,
    rank_kept,
)
from rag_lab.searchutil.tokens import token_cache
from rag_lab.types.chat_manage import ChatManage, has_recall_threshold_override
from rag_lab.types.diagnostics import Deferred, RerankDiagnostics
from rag_lab.types.events import EventType
from rag_lab.types.intent import needs_retrieval
from rag_lab.types.search_result import SearchResult

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.reranking.mmr import MMRStep

log = logging.getLogger(__name__)


async def rerank_call(model: Reranker, query: str, passages: list[str], timeout_s: float) -> list[RerankScore]:
    """The model's scores: a remote model under ``rerank_timeout_s`` (running out raises
    :class:`~rag_lab.models.timeouts.ModelTimeout` naming the stage, the param and the seconds,
    and the stage keeps the search order, §4.6.1 6.2); an in-process model (the embedding
    re-scorer over ONNX MiniLM) without any limit, so a loaded machine never turns rerank off.
    Shared by the stage and the fast evaluator's capture (:mod:`rag_lab.tuning.inputs`)."""
    return list(
        await call_with_timeout(
            model.rerank(query, passages),
            in_process=is_in_process(model),
            stage="rerank",
            param="rerank_timeout_s",
            seconds=timeout_s,
        )
    )


def candidate_passages(results: list[SearchResult], limit: int) -> tuple[list[SearchResult], list[str], list[str]]:
    """The candidates (results with a non-blank model passage; the ``limit`` best by search score,
    order kept), each with its model passage and enriched passage (the MMR token source)."""
    built = passages_of_results(results)
    keep = [i for i, (_, passage) in enumerate(built) if passage.strip()]
    if len(keep) > limit:
        best = {id(results[i]) for i in sorted(keep, key=lambda i: -results[i].score)[:limit]}
        keep = [i for i in keep if id(results[i]) in best]
    return [results[i] for i in keep], [built[i][0] for i in keep], [built[i][1] for i in keep]


def annotate_reranked(r: SearchResult, model: float, base: float, composite: float, final: float, faq: bool) -> None:
    """Write a kept item's score (``final``) and its metadata (base, model, composite; the score
    before the FAQ boost when ``faq``), as the rerank stage leaves them."""
    r.metadata = r.metadata or {}
    r.metadata["base_score"] = format_score(base)
    r.metadata["model_score"] = format_score(model)
    r.score = final
    r.metadata["composite_score"] = format_score(composite)
    if faq:
        r.metadata["faq_original_score"] = format_score(composite)
        r.metadata["faq_boosted"] = "true"


def mmr_picks(
    scores: np.ndarray, enriched: list[str], k: int, lam: float
) -> tuple[list[int], Callable[[], list[MMRStep]]]:
    """The MMR picks over the ranked items (token sets of their enriched passages) and a function
    giving the trace of them with 3 runner-ups (computed on its first call)."""
    ids = token_cache.ids
    return select_mmr_ids_deferred(scores, [ids(t) for t in enriched] if k > 1 else [], k, lam, trace_width=3)


class PluginRerank(StagePlugin):
    events = (EventType.CHUNK_RERANK,)
    contract = StageContract(
        reads=(
            "request.faq_priority_enabled",
            "request.faq_score_boost",
            "request.query",
            "request.rerank_model_id",
            "request.rerank_threshold",
            "request.rerank_top_k",
            "request.search_targets",
            "request.vector_threshold",
            "state.intent",
            "state.rerank_result",
            "state.rewrite_query",
            "state.search_result",
        ),
        writes=("state.diagnostics.rerank", "state.rerank_result", "state.search_result"),
        params=(
            "composite_base_weight",
            "composite_model_weight",
            "composite_source_weight",
            "image_keep_min_score",
            "image_max_kept",
            "mmr_lambda",
            "rerank_degrade_factor",
            "rerank_degrade_floor",
            "rerank_fallback_min_score",
            "rerank_max_candidates",
            "rerank_timeout_s",
            "web_source_weight",
        ),
        kb=(),
    )

    async def on_event(self, event: EventType, chat: ChatManage, next: NextFn) -> PluginError | None:
        req, state, p = chat.request, chat.state, chat.request.params
        if not needs_retrieval(chat) or not state.search_result or not req.rerank_model_id:
            return await next()
        try:
            model = self.services.get_rerank_model(req.rerank_model_id)
        except Exception as exc:
            return ErrGetRerankModel.with_error(exc)

        candidates, enriched, passages = candidate_passages(state.search_result, p.rerank_max_candidates)
        diag = RerankDiagnostics(model_id=req.rerank_model_id, candidates=len(candidates))
        state.diagnostics["rerank"] = diag
        if not candidates:
            diag.update(outcome="no_candidates")
            return await next()
        query = state.rewrite_query or req.query
        fallback_min = 0.0 if has_recall_threshold_override(req.search_targets) else p.rerank_fallback_min_score
        pictorial = pictorial_indices(candidates, p)
        images_scored = 0

        async def rerank_once(threshold: float) -> tuple[np.ndarray, np.ndarray]:
            nonlocal images_scored
            scores = list(await rerank_call(model, query, passages, p.rerank_timeout_s))
            scores, images_scored = await score_images_with_vision(model, query, candidates, pictorial, scores)
            return model_arrays(scores)

        n = len(candidates)
        try:
            ladder, (m_index, m_score) = await run_threshold_ladder(
                rerank_once, n, req.rerank_threshold, fallback_min, p
            )
        except Exception as exc:  # model error or timeout: raw search results go on (§4.6.1 6.2)
            log.warning("rerank failed, keeping search order: %s", exc)
            diag.update(outcome="model_error", error=f"{type(exc).__name__}: {exc}")
            state.search_result = candidates
            return await next()

        cols = CandidateColumns.of(candidates)
        boost = faq_boost_of(req.faq_priority_enabled, req.faq_score_boost)
        ranked = rank_kept(cols, m_index, m_score, ladder, p, boost)
        images = KeptScores.none()
        if pictorial:  # pictorial image hits the text model rejected but whose vector score is high (seed)
            passed = set(m_index[ladder.positions].tolist())
            model_scores = model_score_of(m_index, m_score, n)
            images = image_kept(cols, candidates, pictorial, passed, req.vector_threshold, model_scores, p, boost)
        k = min(ranked.index.size, max(1, req.rerank_top_k))
        ranked_at = ranked.index.tolist()
        picks, trace = mmr_picks(ranked.final, [enriched[i] for i in ranked_at], k, p.mmr_lambda)
        # the stage scores copies of what it keeps: its input (state.search_result) is never
        # changed in place (seed); candidates that MMR does not select need no copy, their scores
        # are in ``ranked`` (what the diagnostics rows show)
        copies: dict[int, SearchResult] = {}
        for scored, at in ((ranked, picks), (images, slice(None))):
            for i, values in zip(scored.index[at].tolist(), scored.values(at)):
                if i not in copies:
                    copies[i] = r = candidates[i].copy()
                    annotate_reranked(r, *values)
                    if scored is images:
                        r.metadata["kept_by"] = IMAGE_VECTOR
        image_at = images.index.tolist()
        state.rerank_result = [copies[ranked_at[j]] for j in picks] + [copies[i] for i in image_at]

        rows = RerankRowsInput.capture(candidates, m_index, m_score, ranked, images, set(copies))
        ranked_ids = rows.ids_of(ranked.index)
        diag.update(
            outcome=ladder.outcome,
            threshold=req.rerank_threshold,
            threshold_used=ladder.threshold_used,
            fallback_min=fallback_min,
            mmr_lambda=p.mmr_lambda,
            mmr_k=k,
            ranked_ids=Deferred(ranked_ids),
            images_scored=images_scored,
            images_kept=len(image_at),
            weights={
                "model": p.composite_model_weight,
                "base": p.composite_base_weight,
                "source": p.composite_source_weight,
                "web_source_weight": p.web_source_weight,
            },
            rows=Deferred(rows.build),
            mmr=Deferred(lambda: [step.to_dict() if hasattr(step, "to_dict") else step.__dict__ for step in trace()]),
        )
        if not state.rerank_result:
            return ErrSearchNothing
        return await next()
