"""CHUNK_RERANK scores the kept items as arrays, copies only what MMR selects and builds its
diagnostics rows and MMR trace on first read: everything it leaves (rerank_result, the search
result, the diagnostics as readers see them) equals what an eager form gives, one that copies and
annotates every kept item in place, item by item, and builds the rows and the trace at once
(written out below, in plain Python, as the test's oracle)."""

from __future__ import annotations

import asyncio
import copy
import json
import math
import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.models.base import RerankScore
from rag_lab.pipeline.container import Services
from rag_lab.pipeline.plugins.rerank import PluginRerank, annotate_reranked, candidate_passages
from rag_lab.reranking.composite import composite_score
from rag_lab.reranking.image import IMAGE_VECTOR, keep_rejected_images, pictorial_indices
from rag_lab.reranking.ladder import degraded_threshold, model_arrays
from rag_lab.reranking.mmr import mmr_trace
from rag_lab.reranking.scored import CandidateColumns, faq_boost_of, score_kept
from rag_lab.searchutil.tokens import cached_token_set
from rag_lab.types import ChatManage, EventType, PipelineParams, PipelineRequest, SearchResult
from rag_lab.types.chat_manage import has_recall_threshold_override
from rag_lab.types.search_result import MatchType

_WORDS = ["red", "bridge", "river", "dawn", "steel", "blue", "lamp", "tower"]
_SCORE = st.sampled_from([0.0, 0.2, 0.3, 0.3, 0.5, 0.5, 0.8, 0.9, 1.0])


@st.composite
def _candidate(draw: st.DrawFn, i: int) -> SearchResult:
    chunk_type = draw(st.sampled_from(["text", "text", "text", "faq", "image_vector", "wiki_page"]))
    metadata = draw(
        st.dictionaries(
            st.sampled_from(["faq_boosted", "kept_by", "retrieved_by", "context_header", "composite_score"]),
            st.sampled_from(["true", "false", IMAGE_VECTOR, "H1", "0.1"]),
            max_size=2,
        )
    )
    image = chunk_type == "image_vector" or metadata.get("retrieved_by") == IMAGE_VECTOR
    info = (
        json.dumps(
            [{"url": f"https://img/{i}.png", "caption": "a bridge", "ocr_text": draw(st.sampled_from(["", "x" * 40]))}]
        )
        if image
        else ""
    )
    return SearchResult(
        id=f"c{draw(st.integers(0, 9))}",
        knowledge_id=f"d{draw(st.integers(0, 3))}",
        content=" ".join(draw(st.lists(st.sampled_from(_WORDS), max_size=6))),
        knowledge_title=draw(st.sampled_from(["", "Bridges"])),
        chunk_type=chunk_type,
        score=draw(_SCORE),
        match_type=draw(st.sampled_from([MatchType.EMBEDDING, MatchType.EMBEDDING, MatchType.GRAPH])),
        knowledge_source=draw(st.sampled_from(["", "", "web_search", "WEB_Search"])),
        metadata=metadata,
        image_info=info,
    )


@st.composite
def _case(draw: st.DrawFn) -> tuple[list[SearchResult], list[tuple[int, float]], dict, PipelineParams]:
    n = draw(st.integers(1, 12))
    results = [draw(_candidate(i)) for i in range(n)]
    model = draw(st.lists(st.tuples(st.integers(-1, n), _SCORE | st.just(math.nan)), max_size=n + 3))
    if draw(st.booleans()):  # usually one score per candidate, best first
        firsts = dict(reversed(model))
        model = sorted(((i, s) for i, s in firsts.items() if s == s), key=lambda t: -t[1])
    request = {
        "rerank_threshold": draw(st.sampled_from([0.0, 0.3, 0.5, 0.95])),
        "rerank_top_k": draw(st.sampled_from([0, 1, 2, 3, 30])),
        "faq_priority_enabled": draw(st.booleans()),
        "faq_score_boost": draw(st.sampled_from([1.0, 1.5])),
        "vector_threshold": draw(st.sampled_from([0.0, 0.5])),
    }
    params = PipelineParams(
        mmr_lambda=draw(st.sampled_from([0.0, 0.5, 0.7, 1.0])), rerank_max_candidates=draw(st.sampled_from([4, 200]))
    )
    return results, model, request, params


class _Model:
    model_id = "m"

    def __init__(self, scores: list[tuple[int, float]]) -> None:
        self.scores = scores

    async def rerank(self, query: str, passages: list[str]) -> list[RerankScore]:
        return [RerankScore(i, s) for i, s in self.scores]


def _filter(scores: list[RerankScore], n: int, threshold: float, fallback_min: float) -> tuple[list, str]:
    """The ladder's filter written out: passing items in the model's order, else the best valid
    one (first on ties, never a NaN) if it reaches ``fallback_min``."""
    passing = [s for s in scores if 0 <= s.index < n and s.relevance_score >= threshold]
    if passing:
        return passing, "ok"
    valid = [s for s in scores if 0 <= s.index < n and s.relevance_score == s.relevance_score]
    if valid:
        best = max(valid, key=lambda s: s.relevance_score)
        if best.relevance_score >= fallback_min:
            return [best], "fallback_top1"
    return [], "all_below_threshold"


def _score_in_place(candidates: list, kept: list[RerankScore], p: PipelineParams, boost: float | None) -> list:
    """Composite score and FAQ boost written on each kept candidate in turn (a candidate listed
    twice is scored again from what its first entry wrote)."""
    out = []
    for s in kept:
        if not 0 <= s.index < len(candidates):
            continue
        r = candidates[s.index]
        base = s.relevance_score if r.match_type == MatchType.GRAPH else r.score
        comp = composite_score(r, s.relevance_score, base, p)
        faq = boost is not None and r.chunk_type == "faq"
        annotate_reranked(r, s.relevance_score, base, comp, comp * boost if faq else comp, faq)
        out.append(r)
    return out


def _eager_rerank(chat: ChatManage, model: _Model) -> None:
    """The stage after its model call, eagerly (no vision model: images keep their text score)."""
    req, state, p = chat.request, chat.state, chat.request.params
    candidates, enriched, passages = candidate_passages(state.search_result, p.rerank_max_candidates)
    diag: dict = {"model_id": req.rerank_model_id, "candidates": len(candidates)}
    state.diagnostics["rerank"] = diag
    if not candidates:
        diag["outcome"] = "no_candidates"
        return
    base_scores = [r.score for r in candidates]
    fallback_min = 0.0 if has_recall_threshold_override(req.search_targets) else p.rerank_fallback_min_score
    pictorial = pictorial_indices(candidates, p)
    threshold = req.rerank_threshold
    scores = asyncio.run(model.rerank("q", passages))
    kept, outcome = _filter(scores, len(candidates), threshold, fallback_min)
    retry = degraded_threshold(threshold, p) if not kept else None
    if retry is not None:
        threshold = retry
        kept, outcome = _filter(scores, len(candidates), threshold, fallback_min)
        if kept:
            outcome = "threshold_degraded"
    model_scores = {s.index: s.relevance_score for s in scores if 0 <= s.index < len(candidates)}
    passed = {s.index for s in kept}
    image_keep = keep_rejected_images(candidates, pictorial, passed, req.vector_threshold, p)
    image_scores = [RerankScore(i, model_scores.get(i, 0.0)) for i in image_keep]
    candidates = list(candidates)
    for i in passed.union(image_keep):
        candidates[i] = candidates[i].copy()
    boost = faq_boost_of(req.faq_priority_enabled, req.faq_score_boost)
    reranked = _score_in_place(candidates, kept, p, boost)
    reranked.sort(key=lambda r: -r.score)
    kept_images = _score_in_place(candidates, image_scores, p, boost)
    for r in kept_images:
        r.metadata["kept_by"] = IMAGE_VECTOR
    k = min(len(reranked), max(1, req.rerank_top_k))
    enriched_of = {id(r): e for r, e in zip(candidates, enriched)}
    tokens = [cached_token_set(enriched_of[id(r)]) for r in reranked] if k > 1 else None
    trace = mmr_trace([r.score for r in reranked], k, p.mmr_lambda, tokens) if reranked else []
    state.rerank_result = [reranked[step.index] for step in trace] + kept_images
    kept_ids = {id(r) for r in reranked} | {id(r) for r in kept_images}
    selected_ids = {id(r) for r in state.rerank_result}
    diag.update(
        outcome=outcome,
        threshold=req.rerank_threshold,
        threshold_used=threshold,
        fallback_min=fallback_min,
        mmr_lambda=p.mmr_lambda,
        mmr_k=k,
        ranked_ids=[r.id for r in reranked],
        images_scored=0,
        images_kept=len(kept_images),
        weights=dict(
            model=p.composite_model_weight,
            base=p.composite_base_weight,
            source=p.composite_source_weight,
            web_source_weight=p.web_source_weight,
        ),
        rows=[
            {
                "id": r.id,
                "knowledge_id": r.knowledge_id,
                "chunk_type": r.chunk_type,
                "knowledge_source": r.knowledge_source,
                "base_score": base_scores[i],
                "model_score": model_scores.get(i),
                "composite_score": float(r.metadata["composite_score"]) if id(r) in kept_ids else None,
                "final_score": r.score if id(r) in kept_ids else None,
                "faq_boosted": r.metadata.get("faq_boosted") == "true",
                "passed_threshold": id(r) in kept_ids and r.metadata.get("kept_by") != IMAGE_VECTOR,
                "kept_by": r.metadata.get("kept_by", ""),
                "selected": id(r) in selected_ids,
            }
            for i, r in enumerate(candidates)
        ],
        mmr=[step.to_dict() for step in trace],
    )


def _chat(results: list[SearchResult], request: dict, params: PipelineParams) -> ChatManage:
    req = PipelineRequest.from_params(params, query="q", rerank_model_id="m", **request)
    chat = ChatManage(request=req)
    chat.state.rewrite_query = "q"
    chat.state.search_result = [r.copy() for r in results]
    return chat


def _json(x: object) -> str:
    return json.dumps(x, default=repr)  # NaN scores compare as text


@settings(max_examples=250)
@given(_case())
def test_the_stage_leaves_what_the_eager_form_leaves(case) -> None:
    results, scores, request, params = case
    eager = _chat(results, request, params)
    _eager_rerank(eager, _Model(scores))
    live = _chat(results, request, params)

    async def later_layers() -> None:  # what the wiki boost / memory affinity do after the stage
        for r in live.state.rerank_result:
            r.score *= 1.3
            r.metadata["wiki_boosted"] = "true"

    async def run() -> None:
        async def nxt() -> None:
            await later_layers()

        await PluginRerank(Services(rerank_models={"m": _Model(scores)})).on_event(EventType.CHUNK_RERANK, live, nxt)

    asyncio.run(run())
    for r in eager.state.rerank_result:
        r.score *= 1.3
        r.metadata["wiki_boosted"] = "true"
    assert _json([r.to_dict() for r in live.state.rerank_result]) == _json(
        [r.to_dict() for r in eager.state.rerank_result]
    )
    assert [r.to_dict() for r in live.state.search_result] == [r.to_dict() for r in results]  # input untouched
    diag = live.state.diagnostics["rerank"]
    want = _json({"version": 1, **eager.state.diagnostics["rerank"]})
    for other in (copy.deepcopy(diag), pickle.loads(pickle.dumps(diag)), diag):
        assert _json(other.to_dict()) == want


@settings(max_examples=300)
@given(_case())
def test_score_kept_equals_the_scores_written_in_place(case) -> None:
    results, scores, request, params = case
    candidates = [r.copy() for r in results]
    kept = [RerankScore(i, s) for i, s in scores]
    boost = faq_boost_of(request["faq_priority_enabled"], request["faq_score_boost"])
    got = score_kept(CandidateColumns.of(results), *model_arrays(scores), params, boost)
    out = _score_in_place(candidates, kept, params, boost)
    assert [candidates[i] for i in got.index.tolist()] == out  # the same items, in kept order
    for e, i in enumerate(got.index.tolist()):
        r, fresh = candidates[i], results[i].copy()
        annotate_reranked(fresh, *got.values()[e])  # what the stage writes on its copy
        assert _json(fresh.to_dict()) == _json(r.to_dict())
        assert _json(float(got.final[e])) == _json(r.score)
        assert bool(got.faq[e]) == (boost is not None and r.chunk_type == "faq")
