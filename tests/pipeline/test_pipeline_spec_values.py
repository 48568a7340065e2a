"""The spec's constants and formulas as concrete values (issue 23): RRF k (§5.12, §1.10), the rerank
threshold ladder (§4.6.1, seed), FILTER_TOP_K with results kept outside the top-K (§4.9, seed).

Each test pins a value a plausible edit would change (``k > 0`` → ``k > 1``, ``max`` → ``min``,
the kept-by results dropped), where the fast paths that import the same function cannot."""

from __future__ import annotations

import asyncio

import pytest

from rag_lab.models.base import RerankScore
from rag_lab.pipeline.container import Services
from rag_lab.pipeline.plugins.filter_top_k import PluginFilterTopK, filter_top_k
from rag_lab.pipeline.plugins.rerank import PluginRerank
from rag_lab.reranking.ladder import apply_threshold_ladder, degraded_threshold, model_arrays
from rag_lab.retrieval.base import IndexWithScore
from rag_lab.retrieval.fusion import fuse_hits, resolve_rrf_k
from rag_lab.types import ChatManage, EventType, PipelineParams, PipelineRequest, SearchResult

P = PipelineParams()


# --------------------------------------------------------------------------- RRF k (§1.10, §5.12)


def test_rrf_k_is_the_configured_value_when_positive_else_60() -> None:
    assert [resolve_rrf_k(k) for k in (1, 2, 60, 500)] == [1, 2, 60, 500]
    assert resolve_rrf_k(0.5) == 0.5  # any k > 0, not only k >= 1
    assert [resolve_rrf_k(k) for k in (0, -1, -60)] == [60, 60, 60]


def test_rrf_with_k_1_gives_the_formula_s_values() -> None:
    """k = 1: ``a`` (vector rank 1, keyword rank 2) = 0.7/2 + 0.3/3, ``b`` (vector rank 2, keyword
    rank 1) = 0.7/3 + 0.3/2; normalised by the best attainable 0.7/2 + 0.3/2 = 0.5."""

    def hit(cid: str, score: float, mt: int) -> IndexWithScore:
        return IndexWithScore(cid, "", cid, "doc", "kb", score, mt)

    fused = fuse_hits(
        [hit("a", 0.9, 0), hit("b", 0.8, 0)], [hit("b", 5.0, 1), hit("a", 4.0, 1)], resolve_rrf_k(1), 0.7, 0.3
    )
    assert [h.chunk_id for h in fused] == ["a", "b"]
    assert fused[0].score == pytest.approx((0.35 + 0.1) / 0.5)
    assert fused[1].score == pytest.approx((0.7 / 3 + 0.15) / 0.5)


# --------------------------------------------------------------------------- threshold ladder (§4.6.1)


@pytest.mark.parametrize(
    ("threshold", "retry"),
    [(1.0, 0.7), (0.9, 0.63), (0.5, 0.35), (0.45, 0.315), (0.4, 0.3), (0.35, 0.3), (0.3, None), (0.1, None)],
)
def test_degraded_threshold_is_max_of_threshold_times_0_7_and_the_0_3_floor(
    threshold: float, retry: float | None
) -> None:
    """Spec §4.6.1 / seed: retry once when the threshold is above 0.3, at ``max(t × 0.7, 0.3)``."""
    got = degraded_threshold(threshold, P)
    assert got == (None if retry is None else pytest.approx(retry))


def test_degraded_threshold_follows_the_factor_and_floor_params() -> None:
    p = PipelineParams(rerank_degrade_factor=0.5, rerank_degrade_floor=0.2)
    assert degraded_threshold(0.6, p) == pytest.approx(0.3)  # 0.6 × 0.5 above the floor
    assert degraded_threshold(0.3, p) == pytest.approx(0.2)  # 0.15 below the floor → the floor
    assert degraded_threshold(0.2, p) is None  # not above the floor: no retry


LOW = PipelineParams(rerank_degrade_factor=0.2, rerank_degrade_floor=0.05)  # a retry that can keep


@pytest.mark.parametrize(
    ("scores", "threshold", "fallback_min", "params", "want"),
    [
        # passing items, in the model's order
        ([(1, 0.9), (0, 0.2), (2, 0.6)], 0.5, 0.15, P, ([1, 2], "ok", 0.5)),
        # none passes: the best alone when it reaches fallback_min
        ([(0, 0.2), (1, 0.4)], 0.5, 0.15, P, ([1], "fallback_top1", 0.5)),
        # none reaches fallback_min: retry at max(0.5 × 0.7, 0.3) = 0.35, keeps nothing either
        ([(0, 0.1), (1, 0.12)], 0.5, 0.15, P, ([], "all_below_threshold", 0.35)),
        # the retry at max(0.5 × 0.2, 0.05) = 0.1 keeps 0.12
        ([(0, 0.05), (1, 0.12)], 0.5, 0.15, LOW, ([1], "threshold_degraded", 0.1)),
        # threshold at the floor: no retry
        ([(0, 0.1)], 0.3, 0.15, P, ([], "all_below_threshold", 0.3)),
        # indices outside the candidates are never kept
        ([(7, 0.99), (0, 0.1)], 0.5, 0.0, P, ([0], "fallback_top1", 0.5)),
    ],
)
def test_threshold_ladder_outcomes_and_threshold_used(
    scores: list[tuple[int, float]],
    threshold: float,
    fallback_min: float,
    params: PipelineParams,
    want: tuple[list[int], str, float],
) -> None:
    index, score = model_arrays(scores)
    lad = apply_threshold_ladder(index, score, 3, threshold, fallback_min, params)
    assert (index[lad.positions].tolist(), lad.outcome) == want[:2]
    assert lad.threshold_used == pytest.approx(want[2])


def test_the_retry_uses_the_scores_of_the_second_call() -> None:
    """``apply_threshold_ladder`` with ``retry``: the live stage's path, one model call more
    (and only) when the first call keeps nothing."""
    calls: list[float] = []

    def again(at: float) -> tuple:
        calls.append(at)
        return model_arrays([(0, 0.36), (1, 0.1)])

    first = model_arrays([(0, 0.1), (1, 0.05)])
    lad = apply_threshold_ladder(*first, 2, 0.5, 0.15, P, retry=again)
    got = (calls, lad.positions.tolist(), lad.outcome, lad.threshold_used)
    assert got == ([pytest.approx(0.35)], [0], "threshold_degraded", 0.35)
    calls.clear()
    lad = apply_threshold_ladder(*model_arrays([(0, 0.6)]), 1, 0.5, 0.15, P, retry=again)
    assert (calls, lad.outcome) == ([], "ok")  # kept on the first call: no second call


class _TwoCalls:
    """A reranker whose second call scores higher (a non-deterministic provider)."""

    model_id = "two-calls"

    def __init__(self, first: list[float], second: list[float]) -> None:
        self.answers = [first, second]
        self.calls = 0

    async def rerank(self, query: str, passages: list[str]) -> list[RerankScore]:
        scores = self.answers[min(self.calls, 1)]
        self.calls += 1
        return [RerankScore(i, s) for i, s in enumerate(scores)]


def _rerank_chat(threshold: float) -> ChatManage:
    req = PipelineRequest.from_params(P, query="q", rerank_model_id="m", rerank_threshold=threshold, rerank_top_k=5)
    chat = ChatManage(request=req)
    chat.state.rewrite_query = "q"
    chat.state.search_result = [
        SearchResult(id=f"c{i}", knowledge_id=f"d{i}", content=f"passage {i}", score=0.5) for i in range(3)
    ]
    return chat


@pytest.mark.parametrize(
    ("first", "second", "outcome", "used", "calls", "kept"),
    [
        ([0.1, 0.05, 0.0], [0.36, 0.1, 0.0], "threshold_degraded", 0.35, 2, ["c0"]),
        ([0.1, 0.05, 0.0], [0.12, 0.1, 0.0], "all_below_threshold", 0.35, 2, []),
        ([0.1, 0.2, 0.0], [0.9, 0.9, 0.9], "fallback_top1", 0.5, 1, ["c1"]),
        ([0.6, 0.2, 0.7], [0.0, 0.0, 0.0], "ok", 0.5, 1, ["c2", "c0"]),
    ],
)
def test_rerank_stage_ladder_calls_the_model_again_for_the_retry(
    first: list[float], second: list[float], outcome: str, used: float, calls: int, kept: list[str]
) -> None:
    chat, model = _rerank_chat(0.5), _TwoCalls(first, second)

    async def nxt() -> None:
        return None

    asyncio.run(PluginRerank(Services(rerank_models={"m": model})).on_event(EventType.CHUNK_RERANK, chat, nxt))
    diag = chat.state.diagnostics["rerank"].to_dict()
    assert (diag["outcome"], model.calls) == (outcome, calls)
    assert diag["threshold"] == 0.5 and diag["threshold_used"] == pytest.approx(used)
    assert [r.id for r in chat.state.rerank_result] == kept


# --------------------------------------------------------------------------- FILTER_TOP_K (§4.9, seed)


def _r(id_: str, score: float, kept_by: str = "") -> SearchResult:
    r = SearchResult(id=id_, knowledge_id="k", score=score)
    if kept_by:
        r.metadata["kept_by"] = kept_by
    return r


def test_filter_top_k_keeps_the_results_kept_outside_the_top_k_after_it() -> None:
    """Seed: results the rerank kept outside the top-K (``kept_by``, images) take no place and
    follow the ``k`` best."""
    rs = [_r("img1", 0.2, "image_vector"), _r("a", 0.9), _r("b", 0.8), _r("c", 0.7), _r("img0", 0.95, "image_vector")]
    out, before = filter_top_k(list(rs), 2)
    assert [r.id for r in out if r] == ["a", "b", "img0", "img1"]
    assert before == 3  # three competed for the two places; the images did not
    out, before = filter_top_k(list(rs), 5)  # nothing to cut: the images still follow
    assert [r.id for r in out if r] == ["a", "b", "c", "img0", "img1"] and before is None
    out, _ = filter_top_k(list(rs), 0)  # k <= 0: no cut
    assert [r.id for r in out if r] == ["a", "b", "c", "img0", "img1"]


@pytest.mark.parametrize("field", ["merge_result", "rerank_result", "search_result"])
def test_filter_top_k_stage_cuts_the_first_non_empty_list(field: str) -> None:
    req = PipelineRequest.from_params(P, query="q", rerank_top_k=1)
    chat = ChatManage(request=req)
    setattr(chat.state, field, [_r("b", 0.5), _r("a", 0.9), _r("i", 0.1, "image_vector")])

    async def nxt() -> None:
        return None

    asyncio.run(PluginFilterTopK(Services()).on_event(EventType.FILTER_TOP_K, chat, nxt))
    assert [r.id for r in getattr(chat.state, field)] == ["a", "i"]
    assert chat.state.diagnostics["filter_top_k"].to_dict()["field"] == field


def test_the_live_ladder_calls_the_model_at_each_threshold_in_turn() -> None:
    """``run_threshold_ladder``: the scorer is called with the request's threshold, then (nothing
    kept) with the degraded one; it returns the last call's scores with the ladder's result."""
    from rag_lab.reranking.ladder import run_threshold_ladder

    seen: list[float] = []
    answers = [model_arrays([(0, 0.1)]), model_arrays([(0, 0.4)])]

    async def score_at(threshold: float) -> tuple:
        seen.append(threshold)
        return answers[len(seen) - 1]

    lad, (index, score) = asyncio.run(run_threshold_ladder(score_at, 1, 0.5, 0.15, P))
    assert seen == [0.5, pytest.approx(0.35)] and (index.tolist(), score.tolist()) == ([0], [0.4])
    got = (index[lad.positions].tolist(), lad.outcome, lad.threshold_used)
    assert got == ([0], "threshold_degraded", pytest.approx(0.35))


def test_filter_top_k_diagnostics_say_how_many_competed_and_nothing_when_nothing_is_cut() -> None:
    req = PipelineRequest.from_params(P, query="q", rerank_top_k=2)
    chat = ChatManage(request=req)
    chat.state.rerank_result = [_r("a", 0.9), _r("b", 0.8), _r("c", 0.7), _r("i", 0.1, "image_vector")]

    async def nxt() -> None:
        return None

    asyncio.run(PluginFilterTopK(Services()).on_event(EventType.FILTER_TOP_K, chat, nxt))
    diag = chat.state.diagnostics["filter_top_k"].to_dict()
    assert (diag["field"], diag["before"], diag["after"]) == ("rerank_result", 3, 2)
    exactly, before = filter_top_k([_r("a", 0.9), _r("b", 0.8)], 2)  # k results: no cut
    assert before is None and [r.id for r in exactly if r] == ["a", "b"]
    chat = ChatManage(request=req)
    chat.state.rerank_result = [_r("a", 0.9), _r("b", 0.8)]
    asyncio.run(PluginFilterTopK(Services()).on_event(EventType.FILTER_TOP_K, chat, nxt))
    assert "filter_top_k" not in chat.state.diagnostics
