"""reranking.vectorized: the numpy post-retrieval functions pick and order exactly as the reference
functions do (threshold ladder, composite, FAQ / wiki boosts, MMR, FILTER_TOP_K), ties included."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_lab.models.base import RerankScore
from rag_lab.pipeline.plugins.filter_top_k import sort_search_results_deterministically
from rag_lab.pipeline.plugins.rerank import apply_threshold_ladder, degraded_threshold
from rag_lab.reranking.composite import composite_score
from rag_lab.reranking.mmr import mmr_trace, select_mmr
from rag_lab.reranking.vectorized import (
    boost_and_sort,
    composite_scores,
    faq_boost,
    select_mmr_ids,
    select_mmr_ids_deferred,
    select_mmr_jaccard,
    select_mmr_overlap,
    stable_desc_order,
    threshold_ladder,
    tiebreak_ranks,
    top_k_order,
)
from rag_lab.searchutil.tokens import TokenSetCache, intersection_counts, intersection_row_counter
from rag_lab.types import PipelineParams, SearchResult

# few distinct values, so that ties are common
_SCORE = st.sampled_from([0.0, 0.1, 0.15, 0.2, 0.3, 0.3, 0.45, 0.5, 0.7, 0.9, 1.0])
_WORDS = st.sampled_from(["aa", "bb", "cc", "dd", "ee", "ff", "gg", "hh"])
_TOKENS = st.frozensets(_WORDS, max_size=6)


def _ids(sets: list[frozenset[str]]) -> list[np.ndarray]:
    cache = TokenSetCache()
    vocab = cache.vocabulary
    return [np.array(sorted(vocab.setdefault(t, len(vocab)) for t in s), dtype=np.int32) for s in sets]


# --- threshold ladder ------------------------------------------------------------------------


@settings(max_examples=300)
@given(
    st.lists(st.tuples(st.integers(-1, 8), _SCORE), max_size=10),
    st.integers(0, 8),
    _SCORE,
    st.sampled_from([0.0, 0.15, 0.5]),
    st.sampled_from([0.3, 0.1, 0.6]),
    st.sampled_from([0.7, 0.5]),
)
def test_threshold_ladder_matches_the_reference(
    model: list[tuple[int, float]], n: int, threshold: float, fallback_min: float, floor: float, factor: float
) -> None:
    p = PipelineParams(rerank_degrade_floor=floor, rerank_degrade_factor=factor)
    scores = [RerankScore(i, s) for i, s in model]
    kept, outcome, used = apply_threshold_ladder(scores, n, threshold, fallback_min, p)
    index = np.array([i for i, _ in model], dtype=np.intp)
    rel = np.array([s for _, s in model], dtype=np.float64)
    got = threshold_ladder(index, rel, n, threshold, fallback_min, degraded_threshold(threshold, p))
    assert [scores[j] for j in got.positions] == kept  # same items, same (model) order
    assert (got.outcome, got.threshold_used) == (outcome, used)


def test_threshold_ladder_worked_example() -> None:
    index, rel = np.array([2, 0, 1]), np.array([0.25, 0.22, 0.1])
    got = threshold_ladder(index, rel, 3, 0.5, 0.15, degraded_threshold(0.5, PipelineParams()))
    # nothing >= 0.5; the best alone (0.25 >= 0.15) is kept before any retry
    assert (got.positions.tolist(), got.outcome, got.threshold_used) == ([0], "fallback_top1", 0.5)
    got = threshold_ladder(index, rel, 3, 0.5, 0.3, 0.35)
    assert (got.positions.tolist(), got.outcome) == ([], "all_below_threshold")
    got = threshold_ladder(index, rel, 3, 0.5, 0.3, 0.2)
    assert (got.positions.tolist(), got.outcome, got.threshold_used) == ([0, 1], "threshold_degraded", 0.2)


# --- composite and boosts ----------------------------------------------------------------------


@settings(max_examples=200)
@given(
    st.lists(st.tuples(_SCORE, _SCORE, st.booleans()), min_size=1, max_size=8),
    st.floats(0, 1),
    st.floats(0, 1),
    st.floats(0, 1),
)
def test_composite_scores_match_composite_score(
    rows: list[tuple[float, float, bool]], wm: float, wb: float, ws: float
) -> None:
    p = PipelineParams(composite_model_weight=wm, composite_base_weight=wb, composite_source_weight=ws)
    results = [
        SearchResult(id=str(i), knowledge_source="web_search" if web else "") for i, (_, _, web) in enumerate(rows)
    ]
    ref = [composite_score(r, m, b, p) for r, (m, b, _) in zip(results, rows)]
    sw = np.array([p.web_source_weight if web else 1.0 for _, _, web in rows])
    got = composite_scores(np.array([m for m, _, _ in rows]), np.array([b for _, b, _ in rows]), sw, wm, wb, ws)
    assert got.tolist() == ref  # bit for bit
    assert composite_scores(np.array([1.0]), np.array([1.0]), np.array([1.0]), 0.6, 0.3, 0.1)[0] == 0.9999999999999999


@settings(max_examples=200)
@given(st.lists(st.tuples(_SCORE, st.booleans()), max_size=10), st.sampled_from([1.0, 1.2, 1.3, 2.0]))
def test_boosts_and_stable_sort_match_the_reference(rows: list[tuple[float, bool]], factor: float) -> None:
    # reference: the wiki boost stage (scores × factor for flagged items, then sort(key=-score), stable)
    items = [[s, flag, i] for i, (s, flag) in enumerate(rows)]
    for it in items:
        if it[1] and factor > 1.0:
            it[0] *= factor
    moved = any(flag for _, flag in rows) and factor > 1.0
    if moved:
        items.sort(key=lambda it: -it[0])
    scores = np.array([s for s, _ in rows], dtype=np.float64)
    factors = np.array([factor if flag else 1.0 for _, flag in rows])
    boosted, order = boost_and_sort(scores, factors)
    assert order.tolist() == [it[2] for it in items]
    assert boosted.tolist() == [it[0] for it in items]
    faq = faq_boost(scores, np.array([flag for _, flag in rows], dtype=bool), True, factor)
    assert faq.tolist() == [s * factor if flag and factor > 1.0 else s for s, flag in rows]
    assert stable_desc_order(scores).tolist() == sorted(range(len(rows)), key=lambda i: -rows[i][0])


# --- MMR -----------------------------------------------------------------------------------------


@settings(max_examples=400)
@given(
    st.lists(st.tuples(_SCORE, _TOKENS), max_size=12),
    st.integers(0, 14),
    st.sampled_from([0.0, 0.3, 0.5, 0.7, 1.0]),
)
def test_vectorised_mmr_picks_and_traces_like_the_reference(
    rows: list[tuple[float, frozenset[str]]], k: int, lam: float
) -> None:
    scores = [s for s, _ in rows]
    sets = [t for _, t in rows]
    ref = select_mmr(scores, k, lam, sets if k > 1 else None)
    ids = _ids(sets)
    counts = intersection_counts(ids)
    sizes = np.array([len(t) for t in sets])
    picks, steps = select_mmr_overlap(np.array(scores), counts, sizes, k, lam, trace_width=3)
    assert picks == ref
    from rag_lab.tuning.inputs import jaccard_matrix

    assert select_mmr_jaccard(np.array(scores), jaccard_matrix(ids), k, lam)[0] == ref
    picks_ids, steps_ids = select_mmr_ids(np.array(scores), ids, k, lam, trace_width=3)
    assert picks_ids == ref
    ref_trace = [s.to_dict() for s in mmr_trace(scores, k, lam, sets if k > 1 else None)]
    assert [s.to_dict() for s in steps] == ref_trace
    assert [s.to_dict() for s in steps_ids] == ref_trace


@settings(max_examples=300)
@given(
    st.lists(st.tuples(_SCORE, _TOKENS), min_size=1, max_size=12),
    st.lists(st.integers(1, 14), min_size=1, max_size=4),
    st.sampled_from([0.0, 0.3, 0.5, 0.7, 1.0]),
)
def test_the_fast_evaluators_mmr_memo_reads_prefixes_of_one_greedy_run(
    rows: list[tuple[float, frozenset[str]]], ks: list[int], lam: float
) -> None:
    """Greedy MMR's first k picks do not depend on how many follow (ties included), which the fast
    evaluator's memo relies on: whatever order top-Ks come in, each equals the reference."""
    from rag_lab.tuning.evaluator import _Ranked
    from rag_lab.tuning.inputs import jaccard_matrix

    scores = [s for s, _ in rows]
    sets = [t for _, t in rows]
    jac = jaccard_matrix(_ids(sets))
    final = np.array(scores)
    ranked = _Ranked(None, final, np.arange(len(rows)), final, final, jac, ([], [], [], [], [], []), {})
    for k in ks:
        k = min(k, len(rows))
        assert ranked.mmr_picks(k, lam, jac) == select_mmr(scores, k, lam, sets if k > 1 else None)


def test_mmr_worked_example_and_empty_sets() -> None:
    sets = [frozenset({"x", "y", "z"}), frozenset({"x", "y", "z"}), frozenset({"p", "q"}), frozenset()]
    ids = _ids(sets)
    scores = np.array([0.9, 0.85, 0.6, 0.1])
    # step 2: B = 0.7*0.85 - 0.3*1.0 = 0.295 < C = 0.42; the empty set never overlaps anything
    assert select_mmr_ids(scores, ids, 4, 0.7)[0] == [0, 2, 1, 3]
    counts = intersection_counts(ids)
    assert counts.tolist() == [[3, 3, 0, 0], [3, 3, 0, 0], [0, 0, 2, 0], [0, 0, 0, 0]]
    assert select_mmr_overlap(scores, counts, np.array([3, 3, 2, 0]), 2, 0.7)[0] == [0, 2]


@settings(max_examples=100)
@given(st.lists(_TOKENS, max_size=10))
def test_intersection_counts_are_set_intersections(sets: list[frozenset[str]]) -> None:
    counts = intersection_counts(_ids(sets))
    assert counts.tolist() == [[len(a & b) for b in sets] for a in sets]


_MANY = st.frozensets(st.integers(0, 150).map(lambda i: f"w{i}"), max_size=90)  # more than 64 shared tokens


@pytest.mark.parametrize("offset", [0, 10**7], ids=["small ids", "ids of a large vocabulary (renumbered)"])
@pytest.mark.parametrize("pairwise_max", [0, 10**9], ids=["one row per text", "every pair at once"])
@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_TOKENS | _MANY, max_size=9))
def test_both_ways_of_counting_intersections_agree_with_sets(
    monkeypatch: pytest.MonkeyPatch, pairwise_max: int, offset: int, sets: list[frozenset[str]]
) -> None:
    import rag_lab.searchutil.tokens as tokens

    monkeypatch.setattr(tokens, "_PAIRWISE_MAX", pairwise_max)
    ids = [(a + offset).astype(np.int32) for a in _ids(sets)]
    assert intersection_counts(ids).tolist() == [[len(a & b) for b in sets] for a in sets]
    if sets:  # rows of the live MMR: texts with no shared token, or none at all, count 0
        row = intersection_row_counter(ids)
        for c, a in enumerate(sets):
            assert [x for i, x in enumerate(row(c).tolist()) if i != c] == [
                len(a & b) for i, b in enumerate(sets) if i != c
            ]


@settings(max_examples=200)
@given(
    st.lists(st.tuples(_SCORE, _TOKENS), max_size=12),
    st.integers(0, 14),
    st.sampled_from([0.0, 0.5, 0.7, 1.0]),
)
def test_deferred_mmr_trace_is_the_eager_one(rows: list[tuple[float, frozenset[str]]], k: int, lam: float) -> None:
    scores = np.array([s for s, _ in rows])
    ids = _ids([t for _, t in rows])
    picks, steps = select_mmr_ids(scores, ids, k, lam, trace_width=3)
    lazy_picks, trace = select_mmr_ids_deferred(scores, ids, k, lam, trace_width=3)
    scores[:] = 0.0  # the trace reads its own copy of the scores
    assert lazy_picks == picks
    assert [s.to_dict() for s in trace()] == [s.to_dict() for s in steps]
    assert trace() is trace()


# --- FILTER_TOP_K --------------------------------------------------------------------------------


@settings(max_examples=300)
@given(
    st.lists(
        st.tuples(
            _SCORE,
            st.sampled_from(["k1", "k2", "é"]),
            st.sampled_from(["text", "faq"]),
            st.integers(0, 3),
            st.sampled_from(["a", "b", "c"]),
        ),
        max_size=10,
    ),
    st.integers(0, 12),
)
def test_top_k_order_matches_the_deterministic_sort(rows: list[tuple], k: int) -> None:
    results = [
        SearchResult(id=cid, knowledge_id=kid, chunk_type=ct, chunk_index=ci, score=s, content=str(i))
        for i, (s, kid, ct, ci, cid) in enumerate(rows)
    ]
    ref = sort_search_results_deterministically(list(results))
    ref = ref[:k] if k > 0 else ref
    order = top_k_order(np.array([r.score for r in results]), tiebreak_ranks(results), k)
    assert [results[i].content for i in order] == [r.content for r in ref]  # equal keys keep input order
