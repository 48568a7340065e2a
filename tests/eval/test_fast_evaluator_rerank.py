"""The fast evaluator's rerank replay on hand-made captured inputs, against spec values (§4.6):
the threshold ladder, the composite ``0.6·model + 0.3·base + 0.1·source`` clamped to [0, 1], the
stable order, MMR ``λ·rel − (1−λ)·max Jaccard``, and its memos (the same answer whatever order the
configs come in). Fast and model-free, so mutation testing can judge the evaluator with it."""

from __future__ import annotations

import numpy as np
import pytest

from rag_lab.tuning.evaluator import FastEvaluator
from rag_lab.tuning.inputs import CapturedRerank, QuestionInputs
from rag_lab.types import PipelineParams, SearchResult

MODEL = [0.9, 0.8, 0.2, 0.75, 0.1]  # the model's score per candidate
SEARCH = [0.5, 0.4, 0.9, 0.2, 0.3]  # the search score (the composite's base)
# candidates 0 and 1 are near copies; 3 shares nothing with them
JACCARD = np.array(
    [
        [1.0, 0.9, 0.1, 0.0, 0.0],
        [0.9, 1.0, 0.1, 0.0, 0.0],
        [0.1, 0.1, 1.0, 0.0, 0.0],
        [0.0, 0.0, 0.0, 1.0, 0.0],
        [0.0, 0.0, 0.0, 0.0, 1.0],
    ]
)


def _question(
    web: tuple[int, ...] = (), faq: tuple[int, ...] = (), wiki: tuple[int, ...] = (), recall_override: bool = False
) -> QuestionInputs:
    cands = [SearchResult(id=f"c{i}", content=f"text {i}", score=s, knowledge_id=f"d{i}") for i, s in enumerate(SEARCH)]
    cr = CapturedRerank(
        candidates=cands,
        model_index=np.array([3, 0, 1, 2, 4]),  # the model's own output order
        model_score=np.array([MODEL[i] for i in (3, 0, 1, 2, 4)]),
        search_score=np.array(SEARCH),
        is_graph=np.zeros(5, dtype=bool),
        is_web=np.array([i in web for i in range(5)]),
        is_faq=np.array([i in faq for i in range(5)]),
        is_wiki=np.array([i in wiki for i in range(5)]),
        jaccard=JACCARD,
        recall_override=recall_override,
    )
    return QuestionInputs("q", "who?", True, cands, [], cr, False, bool(wiki), 0.0, 30, None)


def _picks(fe: FastEvaluator, **cfg: float) -> list[tuple[int, float]]:
    q = fe.inputs[0]
    outcome, picks = fe.rerank(q, fe.params_for(cfg))
    return outcome, [(x.index, round(x.score, 6)) for x in picks or []]


def test_ladder_composite_and_mmr_give_the_spec_values() -> None:
    fe = FastEvaluator([_question()], PipelineParams())
    # threshold 0.5 keeps 0, 1, 3; composite = 0.6·m + 0.3·b + 0.1: 0.79, 0.70, 0.61
    assert _picks(fe, rerank_threshold=0.5, mmr_lambda=1.0, rerank_top_k=3) == (
        "ok",
        [(0, 0.79), (1, 0.7), (3, 0.61)],
    )
    # λ = 0.5: after 0, candidate 1 scores 0.5·0.70 − 0.5·0.9 = −0.10 < 3's 0.5·0.61 = 0.305
    assert _picks(fe, rerank_threshold=0.5, mmr_lambda=0.5, rerank_top_k=3) == (
        "ok",
        [(0, 0.79), (3, 0.61), (1, 0.7)],
    )
    assert _picks(fe, rerank_threshold=0.5, mmr_lambda=0.5, rerank_top_k=2) == ("ok", [(0, 0.79), (3, 0.61)])
    # nothing reaches 0.95 and the best (0.9) is under the fallback floor 0.95: the retry at
    # max(0.95·0.7, 0.3) = 0.665 keeps 0, 1, 3
    assert _picks(fe, rerank_threshold=0.95, rerank_fallback_min_score=0.95, mmr_lambda=1.0, rerank_top_k=5) == (
        "threshold_degraded",
        [(0, 0.79), (1, 0.7), (3, 0.61)],
    )
    # nothing reaches 0.95, the best reaches the default floor 0.15: the top-1 fallback
    assert _picks(fe, rerank_threshold=0.95, mmr_lambda=1.0) == ("fallback_top1", [(0, 0.79)])
    assert _picks(fe, rerank_threshold=0.3, mmr_lambda=1.0, rerank_top_k=5)[1] == [
        (0, 0.79),
        (1, 0.7),
        (3, 0.61),
    ]
    fb = FastEvaluator([_question()], PipelineParams())
    # a threshold not above the degrade floor has no retry
    assert _picks(fb, rerank_threshold=0.92, rerank_degrade_floor=0.95, mmr_lambda=1.0) == (
        "fallback_top1",
        [(0, 0.79)],
    )
    assert _picks(fb, rerank_threshold=0.95, rerank_degrade_floor=0.95, rerank_fallback_min_score=0.95) == (
        "all_below_threshold",
        [],
    )


def test_composite_weights_and_web_sources_move_the_order() -> None:
    fe = FastEvaluator([_question(web=(0,))], PipelineParams())
    # web source weight 0.95 on candidate 0: 0.6·0.9 + 0.3·0.5 + 0.1·0.95 = 0.785
    got = _picks(fe, rerank_threshold=0.5, mmr_lambda=1.0, rerank_top_k=3)[1]
    assert got[0] == (0, 0.785)
    # all weight on the search score: 0.5, 0.4, 0.2 (clamped sums; no source share)
    got = _picks(
        fe,
        rerank_threshold=0.5,
        mmr_lambda=1.0,
        rerank_top_k=3,
        composite_model_weight=0.0,
        composite_base_weight=1.0,
        composite_source_weight=0.0,
    )[1]
    assert got == [(0, 0.5), (1, 0.4), (3, 0.2)]


@pytest.mark.parametrize("order", [(0, 1, 2, 3), (3, 2, 1, 0), (1, 3, 0, 2)])
def test_memos_give_the_same_picks_in_any_order(order: tuple[int, ...]) -> None:
    configs = [
        {"rerank_threshold": 0.5, "mmr_lambda": 0.5, "rerank_top_k": 1},
        {"rerank_threshold": 0.5, "mmr_lambda": 0.5, "rerank_top_k": 3},
        {"rerank_threshold": 0.5, "mmr_lambda": 0.9, "rerank_top_k": 2},
        {"rerank_threshold": 0.7, "mmr_lambda": 0.5, "rerank_top_k": 3},
    ]
    fresh = [_picks(FastEvaluator([_question()], PipelineParams()), **c) for c in configs]
    shared = FastEvaluator([_question()], PipelineParams())
    got = {i: _picks(shared, **configs[i]) for i in order}
    assert [got[i] for i in range(len(configs))] == fresh
    assert fresh[0][1] == [(0, 0.79)] and fresh[3][1] == [(0, 0.79), (3, 0.61), (1, 0.7)]


def test_faq_and_wiki_boosts_and_the_recall_override() -> None:
    # FAQ priority on: candidate 3's composite 0.61 × 1.2 = 0.732 passes 1's 0.70
    fe = FastEvaluator([_question(faq=(3,))], PipelineParams())
    got = _picks(fe, rerank_threshold=0.5, mmr_lambda=1.0, rerank_top_k=3, faq_priority_enabled=True)
    assert got == ("ok", [(0, 0.79), (3, 0.732), (1, 0.7)])
    q = fe.inputs[0]
    _, picks = fe.rerank(q, fe.params_for({"rerank_threshold": 0.5, "faq_priority_enabled": True}))
    assert [x.faq_boosted for x in picks] == [False, True, False] and picks[1].composite == pytest.approx(0.61)
    # FAQ priority off (the default): no boost
    assert _picks(fe, rerank_threshold=0.5, mmr_lambda=1.0, rerank_top_k=3)[1][1] == (1, 0.7)
    # a wiki page in scope: × 1.3 after MMR, then re-sorted: 0.61 × 1.3 = 0.793 leads
    fw = FastEvaluator([_question(wiki=(3,))], PipelineParams())
    assert _picks(fw, rerank_threshold=0.5, mmr_lambda=1.0, rerank_top_k=3)[1] == [(3, 0.793), (0, 0.79), (1, 0.7)]
    # a recall override drops the top-1 fallback's floor: the best (0.9) alone even under a 0.95 floor
    fr = FastEvaluator([_question(recall_override=True)], PipelineParams())
    got = _picks(fr, rerank_threshold=0.95, rerank_fallback_min_score=0.95, rerank_degrade_floor=0.95)
    assert got == ("fallback_top1", [(0, 0.79)])


def test_pictorial_hits_the_model_rejects_are_kept_by_vector_score_after_the_picks() -> None:
    # candidates 2 and 4 are pictorial image hits: the model rejects both (0.2, 0.1 < 0.5); their
    # vector scores (0.9, 0.3) reach max(vector threshold 0, image_keep_min_score 0.25), so both
    # follow the picks, best first, with their composite: 0.6·0.2 + 0.3·0.9 + 0.1 and 0.6·0.1 + 0.3·0.3 + 0.1
    q = _question()
    assert q.rerank is not None
    q.rerank.pictorial = [2, 4]
    fe = FastEvaluator([q], PipelineParams())
    record: dict[str, object] = {}
    p = fe.params_for({"rerank_threshold": 0.5, "mmr_lambda": 1.0, "rerank_top_k": 3})
    outcome, picks = fe.rerank(q, p, record)
    got = [(x.index, round(x.model, 6), round(x.base, 6), round(x.score, 6), x.image) for x in picks or []]
    assert (outcome, got[3:]) == ("ok", [(2, 0.2, 0.9, 0.49, True), (4, 0.1, 0.3, 0.25, True)])
    assert [x[0] for x in got[:3]] == [0, 1, 3] and not any(x[4] for x in got[:3])
    assert record["images"].index.tolist() == [2, 4]  # type: ignore[attr-defined]
    # an image hit that is an FAQ entry takes the FAQ boost when FAQ priority is on: 0.49 × 1.2
    qf = _question(faq=(2,))
    assert qf.rerank is not None
    qf.rerank.pictorial = [2, 4]
    ff = FastEvaluator([qf], PipelineParams())
    _, picks = ff.rerank(qf, ff.params_for({"rerank_threshold": 0.5, "faq_priority_enabled": True}))
    assert [(x.index, round(x.score, 6), x.faq_boosted) for x in (picks or [])[-2:]] == [
        (2, 0.588, True),
        (4, 0.25, False),
    ]
