"""The post-retrieval decisions on arrays, each written once (threshold ladder, composite, FAQ /
wiki boosts, MMR): worked examples, and properties against the formulas written out in plain
Python here, ties, duplicates and non-finite scores included."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_lab.reranking.composite import boosted_order, composite_score, composite_scores, faq_boost, stable_desc_order
from rag_lab.reranking.ladder import apply_threshold_ladder, degraded_threshold, model_arrays
from rag_lab.reranking.mmr import mmr_trace, select_mmr, select_mmr_ids, select_mmr_ids_deferred, select_mmr_jaccard
from rag_lab.searchutil.tokens import TokenSetCache, intersection_counts, intersection_row_counter
from rag_lab.types import PipelineParams, SearchResult
from tests.reranking.test_rerank_mmr import naive_mmr

# few distinct values, so that ties are common
_SCORE = st.sampled_from([0.0, 0.1, 0.15, 0.2, 0.3, 0.3, 0.45, 0.5, 0.7, 0.9, 1.0])
_ODD = st.sampled_from([math.nan, math.inf, -math.inf])
_WORDS = st.sampled_from(["aa", "bb", "cc", "dd", "ee", "ff", "gg", "hh"])
_TOKENS = st.frozensets(_WORDS, max_size=6)


def _ids(sets: list[frozenset[str]]) -> list[np.ndarray]:
    cache = TokenSetCache()
    vocab = cache.vocabulary
    return [np.array(sorted(vocab.setdefault(t, len(vocab)) for t in s), dtype=np.int32) for s in sets]


# --- threshold ladder ------------------------------------------------------------------------


def _ladder_oracle(model: list[tuple[int, float]], n: int, t: float, fmin: float, p: PipelineParams) -> tuple:
    def filt(at: float) -> tuple[list[int], str]:
        passing = [j for j, (i, s) in enumerate(model) if 0 <= i < n and s >= at]
        if passing:
            return passing, "ok"
        valid = [j for j, (i, s) in enumerate(model) if 0 <= i < n and not math.isnan(s)]
        if valid:
            best = valid[0]
            for j in valid:
                if model[j][1] > model[best][1]:
                    best = j
            if model[best][1] >= fmin:
                return [best], "fallback_top1"
        return [], "all_below_threshold"

    kept, outcome = filt(t)
    if kept or t <= p.rerank_degrade_floor:
        return kept, outcome, t
    retry = max(t * p.rerank_degrade_factor, p.rerank_degrade_floor)
    kept, outcome = filt(retry)
    return kept, "threshold_degraded" if kept else outcome, retry


@settings(max_examples=300)
@given(
    st.lists(st.tuples(st.integers(-1, 8), _SCORE | _ODD), max_size=10),
    st.integers(0, 8),
    _SCORE,
    st.sampled_from([0.0, 0.15, 0.5]),
    st.sampled_from([0.3, 0.1, 0.6]),
    st.sampled_from([0.7, 0.5]),
)
def test_threshold_ladder_is_the_spec_ladder(
    model: list[tuple[int, float]], n: int, threshold: float, fallback_min: float, floor: float, factor: float
) -> None:
    p = PipelineParams(rerank_degrade_floor=floor, rerank_degrade_factor=factor)
    got = apply_threshold_ladder(*model_arrays(model), n, threshold, fallback_min, p)
    assert (got.positions.tolist(), got.outcome, got.threshold_used) == _ladder_oracle(
        model, n, threshold, fallback_min, p
    )


def test_threshold_ladder_worked_example() -> None:
    index, rel = np.array([2, 0, 1]), np.array([0.25, 0.22, 0.1])
    got = apply_threshold_ladder(index, rel, 3, 0.5, 0.15, PipelineParams())
    # nothing >= 0.5; the best alone (0.25 >= 0.15) is kept before any retry
    assert (got.positions.tolist(), got.outcome, got.threshold_used) == ([0], "fallback_top1", 0.5)
    # nothing reaches 0.3 either: retry at max(0.5 × 0.7, 0.3) = 0.35 keeps nothing
    got = apply_threshold_ladder(index, rel, 3, 0.5, 0.3, PipelineParams())
    assert (got.positions.tolist(), got.outcome) == ([], "all_below_threshold")
    assert degraded_threshold(0.5, PipelineParams()) == 0.35
    low = PipelineParams(rerank_degrade_factor=0.4, rerank_degrade_floor=0.2)  # retry at max(0.2, 0.2)
    got = apply_threshold_ladder(index, rel, 3, 0.5, 0.3, low)
    assert (got.positions.tolist(), got.outcome, got.threshold_used) == ([0, 1], "threshold_degraded", 0.2)


# --- composite and boosts ----------------------------------------------------------------------


@settings(max_examples=200)
@given(
    st.lists(st.tuples(_SCORE, _SCORE, st.booleans()), min_size=1, max_size=8),
    st.floats(0, 1),
    st.floats(0, 1),
    st.floats(0, 1),
)
def test_composite_scores_are_the_spec_formula_in_doubles(
    rows: list[tuple[float, float, bool]], wm: float, wb: float, ws: float
) -> None:
    p = PipelineParams(composite_model_weight=wm, composite_base_weight=wb, composite_source_weight=ws)
    sw = [p.web_source_weight if web else 1.0 for _, _, web in rows]
    want = [min(max(wm * m + wb * b + ws * w, 0.0), 1.0) for (m, b, _), w in zip(rows, sw)]
    got = composite_scores(
        np.array([m for m, _, _ in rows]), np.array([b for _, b, _ in rows]), np.array(sw), wm, wb, ws
    )
    assert got.tolist() == want  # bit for bit, left to right
    results = [
        SearchResult(id=str(i), knowledge_source="web_search" if web else "") for i, (_, _, web) in enumerate(rows)
    ]
    assert [composite_score(r, m, b, p) for r, (m, b, _) in zip(results, rows)] == want
    assert composite_scores(np.array([1.0]), np.array([1.0]), np.array([1.0]), 0.6, 0.3, 0.1)[0] == 0.9999999999999999
    assert composite_scores(
        np.array([2.0, -1.0]), np.array([1.0, 0.0]), np.array([1.0, 1.0]), 0.6, 0.3, 0.1
    ).tolist() == [
        1.0,
        0.0,
    ]  # clamped to [0, 1]


@settings(max_examples=200)
@given(st.lists(st.tuples(_SCORE | _ODD, st.booleans()), max_size=10), st.sampled_from([1.0, 1.2, 1.3, 2.0]))
def test_boosts_and_the_stable_sort_are_pythons_sort(rows: list[tuple[float, bool]], factor: float) -> None:
    # the wiki boost stage as written in the spec: scores × factor for flagged items, then
    # sort(key=-score), stable
    items = [[s * factor if flag else s, i] for i, (s, flag) in enumerate(rows)]
    items.sort(key=lambda it: -it[0])
    scores = [s for s, _ in rows]
    boosted, order = boosted_order(scores, [factor if flag else 1.0 for _, flag in rows])
    assert order == [it[1] for it in items]
    assert str([boosted[i] for i in order]) == str([it[0] for it in items])  # NaN == NaN as text
    assert stable_desc_order(np.array(scores)).tolist() == sorted(range(len(rows)), key=lambda i: -rows[i][0])
    flags = np.array([flag for _, flag in rows], dtype=bool)
    faq = faq_boost(np.array(scores, dtype=np.float64), flags, factor if factor > 1.0 else None)
    want = [s * factor if flag and factor > 1.0 else s for s, flag in rows]
    assert str(faq.tolist()) == str(want)


# --- MMR -----------------------------------------------------------------------------------------


@settings(max_examples=400)
@given(
    st.lists(st.tuples(_SCORE | _ODD, _TOKENS), max_size=12),
    st.integers(0, 14),
    st.sampled_from([0.0, 0.3, 0.5, 0.7, 1.0]),
)
def test_mmr_from_sets_ids_and_a_matrix_is_the_spec_mmr(
    rows: list[tuple[float, frozenset[str]]], k: int, lam: float
) -> None:
    from rag_lab.tuning.inputs import jaccard_matrix

    scores = [s for s, _ in rows]
    sets = [t for _, t in rows]
    want = naive_mmr(scores, sets, k, lam)
    assert select_mmr(scores, k, lam, sets if k > 1 else None) == want
    ids = _ids(sets)
    assert select_mmr_jaccard(np.array(scores), jaccard_matrix(ids), k, lam) == want
    picks, steps = select_mmr_ids(np.array(scores), ids, k, lam, trace_width=3)
    assert picks == want
    trace = mmr_trace(scores, k, lam, sets if k > 1 else None)
    assert [s.index for s in steps] == [s.index for s in trace] == want
    assert str([s.to_dict() for s in steps]) == str([s.to_dict() for s in trace])


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
    evaluator's memo relies on: whatever order top-Ks come in, each equals the spec's picks."""
    from rag_lab.reranking.scored import KeptScores
    from rag_lab.tuning.evaluator import _Ranked
    from rag_lab.tuning.inputs import jaccard_matrix

    scores = [s for s, _ in rows]
    sets = [t for _, t in rows]
    final = np.array(scores)
    n = len(rows)
    kept = KeptScores(np.arange(n), final, final, final, final, np.zeros(n, dtype=bool))
    ranked = _Ranked(None, kept, jaccard_matrix(_ids(sets)), ([], [], [], [], [], []), {})  # type: ignore[arg-type]
    for k in ks:
        k = min(k, n)
        assert ranked.mmr_picks(k, lam) == naive_mmr(scores, sets, k, lam)


def test_mmr_trace_worked_example() -> None:
    sets = [frozenset({"x", "y", "z"}), frozenset({"x", "y", "z"}), frozenset({"p", "q"})]
    first, second = mmr_trace([0.9, 0.85, 0.6], 2, 0.7, sets, runner_ups=2)
    # step 1: A = 0.63 beats B = 0.595 and C = 0.42; step 2: B = 0.595 - 0.3 = 0.295 < C = 0.42
    assert (first.index, [c.index for c in first.runner_ups]) == (0, [1, 2])
    assert (second.index, second.redundancy, [c.index for c in second.runner_ups]) == (2, 0.0, [1])
    assert second.runner_ups[0].redundancy == 1.0 and second.runner_ups[0].mmr == pytest.approx(0.295)
    # a NaN score counts as -inf: picked last, after a -inf one only by index
    assert select_mmr([math.nan, 0.2, -math.inf], 3, 0.7, [frozenset(), frozenset(), frozenset()]) == [1, 0, 2]


def test_mmr_worked_example_and_empty_sets() -> None:
    sets = [frozenset({"x", "y", "z"}), frozenset({"x", "y", "z"}), frozenset({"p", "q"}), frozenset()]
    ids = _ids(sets)
    scores = np.array([0.9, 0.85, 0.6, 0.1])
    # step 2: B = 0.7*0.85 - 0.3*1.0 = 0.295 < C = 0.42; the empty set never overlaps anything
    assert select_mmr_ids(scores, ids, 4, 0.7)[0] == [0, 2, 1, 3]
    counts = intersection_counts(ids)
    assert counts.tolist() == [[3, 3, 0, 0], [3, 3, 0, 0], [0, 0, 2, 0], [0, 0, 0, 0]]
    assert select_mmr_ids(scores, ids, 2, 0.7)[0] == [0, 2]


@settings(max_examples=100)
@given(st.lists(_TOKENS, max_size=10))
def test_intersection_counts_are_set_intersections(sets: list[frozenset[str]]) -> None:
    counts = intersection_counts(_ids(sets))
    assert counts.tolist() == [[len(a & b) for b in sets] for a in sets]


_MANY = st.frozensets(st.integers(0, 150).map(lambda i: f"w{i}"), max_size=90)  # more than 64 shared tokens


@pytest.mark.parametrize("offset", [0, 10**7], ids=["small ids", "ids of a large vocabulary (renumbered)"])
@pytest.mark.parametrize("pairwise_max", [0, 10**9], ids=["one row per text", "every pair at once"])
@pytest.mark.parametrize("table_max", [0, 10**9], ids=["rows from a mark", "rows from the table"])
@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_TOKENS | _MANY, max_size=9))
def test_both_ways_of_counting_intersections_agree_with_sets(
    monkeypatch: pytest.MonkeyPatch, pairwise_max: int, table_max: int, offset: int, sets: list[frozenset[str]]
) -> None:
    import rag_lab.searchutil.tokens as tokens

    monkeypatch.setattr(tokens, "_PAIRWISE_MAX", pairwise_max)
    monkeypatch.setattr(tokens, "_TABLE_MAX", table_max)
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
