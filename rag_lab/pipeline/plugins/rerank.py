"""CHUNK_RERANK body: model scores → threshold ladder → composite score → FAQ boost → MMR.

Spec §4.6.1 with the seed's refinements (model passage = title + heading + body, at most
``rerank_max_candidates`` candidates by search score, 60 s model timeout — for a remote model only,
see :func:`rerank_call` —, graph hits use the model score as base, FAQ boost not capped). Every decision is written to ``state.diagnostics["rerank"]``
for the workbench's composite-score and MMR views.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Generator
from typing import Any

import numpy as np

from rag_lab.models.base import RerankScore
from rag_lab.models.timeouts import call_with_timeout, is_in_process
from rag_lab.pipeline.contracts import StageContract
from rag_lab.pipeline.plugin import ErrGetRerankModel, ErrSearchNothing, NextFn, PluginError
from rag_lab.pipeline.plugins.base import StagePlugin
from rag_lab.reranking.composite import composite_score, format_score
from rag_lab.reranking.image import IMAGE_VECTOR, keep_rejected_images, pictorial_indices, score_images_with_vision
from rag_lab.reranking.mmr import mmr_trace
from rag_lab.reranking.passage import passages_of_results
from rag_lab.reranking.scored import RerankRowsInput, faq_boost_of, score_kept
from rag_lab.reranking.vectorized import select_mmr_ids, select_mmr_ids_deferred
from rag_lab.searchutil.tokens import cached_token_ids, cached_token_set, token_cache
from rag_lab.types.chat_manage import ChatManage, has_recall_threshold_override
from rag_lab.types.diagnostics import Deferred, RerankDiagnostics
from rag_lab.types.events import EventType
from rag_lab.types.intent import needs_retrieval
from rag_lab.types.params import PipelineParams
from rag_lab.types.search_result import MatchType, SearchResult

log = logging.getLogger(__name__)


async def rerank_call(model: Any, query: str, passages: list[str], timeout_s: float) -> list[RerankScore]:
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


def filter_by_threshold(
    scores: list[RerankScore], n: int, threshold: float, fallback_min: float
) -> tuple[list[RerankScore], str]:
    """Items with a valid index and score >= threshold, in the model's order; when none pass,
    the best item alone if it reaches ``fallback_min`` (outcome ``fallback_top1``)."""
    passing = [s for s in scores if 0 <= s.index < n and s.relevance_score >= threshold]
    if passing:
        return passing, "ok"
    valid = [s for s in scores if 0 <= s.index < n]
    if valid:
        best = max(valid, key=lambda s: s.relevance_score)  # first max wins ties
        if best.relevance_score >= fallback_min:
            return [best], "fallback_top1"
    return [], "all_below_threshold"


def degraded_threshold(threshold: float, params: PipelineParams) -> float | None:
    """The retry threshold of the ladder, ``max(threshold × factor, floor)``, or ``None`` when the
    threshold is not above the floor (no retry)."""
    if threshold > params.rerank_degrade_floor:
        return max(threshold * params.rerank_degrade_factor, params.rerank_degrade_floor)
    return None


#: what the threshold ladder decides: (kept, outcome, threshold used)
LadderResult = tuple[list[RerankScore], str, float]


def threshold_ladder_steps(
    n: int, threshold: float, fallback_min: float, params: PipelineParams
) -> Generator[float, list[RerankScore], LadderResult]:
    """The threshold ladder (spec §4.6.1, seed), the one place that decides it: yields the
    threshold of each model call, is sent that call's scores, and returns (kept, outcome,
    threshold used). :func:`filter_by_threshold` at ``threshold``; when that keeps nothing and
    :func:`degraded_threshold` gives a retry, one more call filtered at it (outcome
    ``threshold_degraded`` when it keeps something). Driven by :func:`apply_threshold_ladder` and
    :func:`run_threshold_ladder` (the stage, which calls the model again for the retry)."""
    scores = yield threshold
    kept, outcome = filter_by_threshold(scores, n, threshold, fallback_min)
    retry = degraded_threshold(threshold, params) if not kept else None
    if retry is None:
        return kept, outcome, threshold
    scores = yield retry
    kept, outcome = filter_by_threshold(scores, n, retry, fallback_min)
    return kept, ("threshold_degraded" if kept else outcome), retry


def apply_threshold_ladder(
    scores: list[RerankScore],
    n: int,
    threshold: float,
    fallback_min: float,
    params: PipelineParams,
    retry_scores: Callable[[float], list[RerankScore]] | None = None,
) -> LadderResult:
    """:func:`threshold_ladder_steps` on the first call's ``scores``; the retry is scored by
    ``retry_scores(threshold)`` when given, else reuses ``scores`` (a deterministic model gives
    these same scores again)."""
    steps = threshold_ladder_steps(n, threshold, fallback_min, params)
    at, answer = next(steps), scores
    while True:
        try:
            at = steps.send(answer)
        except StopIteration as done:
            result: LadderResult = done.value
            return result
        answer = scores if retry_scores is None else retry_scores(at)


async def run_threshold_ladder(
    score_at: Callable[[float], Awaitable[list[RerankScore]]],
    n: int,
    threshold: float,
    fallback_min: float,
    params: PipelineParams,
) -> tuple[LadderResult, list[RerankScore]]:
    """:func:`threshold_ladder_steps` with each call's scores from ``await score_at(threshold)``
    (the model called again for the retry); returns the ladder's result and the last call's
    scores. The model's errors propagate."""
    steps = threshold_ladder_steps(n, threshold, fallback_min, params)
    at = next(steps)
    while True:
        scores = await score_at(at)
        try:
            at = steps.send(scores)
        except StopIteration as done:
            return done.value, scores


def candidate_passages(results: list[SearchResult], limit: int) -> tuple[list[SearchResult], list[str], list[str]]:
    """:func:`select_candidates` with each candidate's model passage and enriched passage (the MMR
    token source), each built once."""
    built = passages_of_results(results)
    keep = [i for i, (_, passage) in enumerate(built) if passage.strip()]
    if len(keep) > limit:
        best = {id(results[i]) for i in sorted(keep, key=lambda i: -results[i].score)[:limit]}
        keep = [i for i in keep if id(results[i]) in best]
    return [results[i] for i in keep], [built[i][0] for i in keep], [built[i][1] for i in keep]


def select_candidates(results: list[SearchResult], limit: int) -> list[SearchResult]:
    """Results with a non-blank model passage; the ``limit`` best by search score, order kept."""
    return candidate_passages(results, limit)[0]


def mmr_steps(scores: list[float], enriched: list[str], k: int, lam: float) -> list[Any]:
    """``mmr_trace(scores, k, lam, token sets of the enriched passages)`` (3 runner-ups), computed
    with the vectorised MMR over cached token ids when the scores are finite."""
    if not scores:
        return []
    if k > 1 and all(math.isfinite(x) for x in scores):
        _, steps = select_mmr_ids(np.array(scores), [cached_token_ids(t) for t in enriched], k, lam, trace_width=3)
        return steps
    tokens = [cached_token_set(t) for t in enriched] if k > 1 else None
    return mmr_trace(scores, k, lam, tokens)


def score_reranked(
    candidates: list[SearchResult],
    kept: list[RerankScore],
    params: PipelineParams,
    faq_priority: bool,
    faq_boost: float,
) -> list[SearchResult]:
    """Composite score (and FAQ boost) for each kept item, in place; returns them in kept order."""
    out: list[SearchResult] = []
    boost = faq_boost_of(faq_priority, faq_boost)
    for s in kept:
        if not 0 <= s.index < len(candidates):
            continue
        r = candidates[s.index]
        base = s.relevance_score if r.match_type == MatchType.GRAPH else r.score
        annotate_reranked(r, s.relevance_score, base, composite_score(r, s.relevance_score, base, params), boost)
        out.append(r)
    return out


def annotate_reranked(r: SearchResult, model: float, base: float, composite: float, faq_boost: float | None) -> None:
    """Write a kept item's score and its metadata (base, model, composite; FAQ boost when given and
    the item is an FAQ), as the rerank stage leaves them."""
    r.metadata = r.metadata or {}
    r.metadata["base_score"] = format_score(base)
    r.metadata["model_score"] = format_score(model)
    r.score = composite
    r.metadata["composite_score"] = format_score(composite)
    if faq_boost is not None and r.chunk_type == "faq":
        r.metadata["faq_original_score"] = format_score(composite)
        r.score = composite * faq_boost
        r.metadata["faq_boosted"] = "true"


def mmr_picks(scores: np.ndarray, enriched: list[str], k: int, lam: float) -> tuple[list[int], Callable[[], list[Any]]]:
    """The MMR picks over the ranked items and a function giving :func:`mmr_steps`' trace of them
    (computed on its first call; the vectorised MMR records what it needs as it picks)."""
    values = scores.tolist()
    if values and k > 1 and np.isfinite(scores).all():
        ids = token_cache.ids
        return select_mmr_ids_deferred(scores, [ids(t) for t in enriched], k, lam, trace_width=3)
    steps = mmr_steps(values, enriched, k, lam)
    return [step.index for step in steps], lambda: steps


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

        async def rerank_once(threshold: float) -> list[RerankScore]:
            nonlocal images_scored
            scores = list(await rerank_call(model, query, passages, p.rerank_timeout_s))
            scores, images_scored = await score_images_with_vision(model, query, candidates, pictorial, scores)
            return scores

        try:
            (kept, outcome, threshold), scores = await run_threshold_ladder(
                rerank_once, len(candidates), req.rerank_threshold, fallback_min, p
            )
        except Exception as exc:  # model error or timeout: raw search results go on (§4.6.1 6.2)
            log.warning("rerank failed, keeping search order: %s", exc)
            diag.update(outcome="model_error", error=f"{type(exc).__name__}: {exc}")
            state.search_result = candidates
            return await next()

        n = len(candidates)
        model_scores = {s.index: s.relevance_score for s in scores if 0 <= s.index < n}
        # pictorial image hits the text model rejected but whose vector score is high (seed)
        passed = {s.index for s in kept}
        image_keep = keep_rejected_images(candidates, pictorial, passed, req.vector_threshold, p)
        image_scores = [RerankScore(i, model_scores.get(i, 0.0)) for i in image_keep]
        boost = faq_boost_of(req.faq_priority_enabled, req.faq_score_boost)
        ranked = score_kept(candidates, kept, p, boost)
        images = score_kept(candidates, image_scores, p, boost)
        order = ranked.order()  # by final score, stable
        ranked_index = ranked.index[order]
        ranked_final = ranked.final[order]
        k = min(ranked_index.size, max(1, req.rerank_top_k))
        picks, trace = mmr_picks(ranked_final, [enriched[i] for i in ranked_index.tolist()], k, p.mmr_lambda)
        # the stage scores copies of what it keeps: its input (state.search_result) is never
        # changed in place (seed); candidates that MMR does not select need no copy, their scores
        # are in ``ranked`` (what the diagnostics rows show)
        copies: dict[int, SearchResult] = {}
        entries = order.tolist()
        for scored, at in [(ranked, [entries[j] for j in picks]), (images, range(images.index.size))]:
            for e in at:
                i = int(scored.index[e])
                if i not in copies:
                    copies[i] = r = candidates[i].copy()
                    annotate_reranked(r, *scored.values(e), boost)
                    if scored is images:
                        r.metadata["kept_by"] = IMAGE_VECTOR
        ranked_at = ranked_index.tolist()
        state.rerank_result = [copies[ranked_at[j]] for j in picks] + [copies[i] for i in image_keep]

        rows = RerankRowsInput.capture(candidates, model_scores, ranked, images, set(copies))
        ranked_ids = rows.ids_of(ranked_index)
        diag.update(
            outcome=outcome,
            threshold=req.rerank_threshold,
            threshold_used=threshold,
            fallback_min=fallback_min,
            mmr_lambda=p.mmr_lambda,
            mmr_k=k,
            ranked_ids=Deferred(ranked_ids),
            images_scored=images_scored,
            images_kept=len(image_keep),
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
