"""reranking.mmr: SelectMMR with an inverted index (§6.8, seed, A.1)."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.reranking.mmr import MMRStep, apply_mmr, mmr_trace, select_mmr
from rag_lab.searchutil.text import jaccard
from rag_lab.types import SearchResult


def naive_mmr(scores: list[float], tokens: list[set[str]], k: int, lam: float) -> list[int]:
    """Reference O(n²k) greedy MMR, straight from §6.8 (best starts at −∞, as the seed does)."""
    if k <= 0 or not scores:
        return []
    selected: list[int] = []
    remaining = list(range(len(scores)))
    while len(selected) < k and remaining:
        best_i, best = remaining[0], -math.inf
        for i in remaining:
            red = max((jaccard(tokens[i], tokens[s]) for s in selected), default=0.0)
            value = lam * scores[i] - (1 - lam) * red
            if value > best:
                best_i, best = i, value
        selected.append(best_i)
        remaining.remove(best_i)
    return selected


_SCORES = [0.9, 0.85, 0.6]
_TOKENS = [{"x", "y", "z"}, {"x", "y", "z"}, {"p", "q"}]


def test_empty_and_non_positive_k() -> None:
    assert select_mmr([], 3) == []
    assert select_mmr([0.5], 0, token_sets=[set()]) == []
    assert select_mmr([0.5], -1) == []
    assert mmr_trace([], 2) == []


def test_worked_example_redundancy_demotes_a_duplicate() -> None:
    # Step 2: B = 0.7*0.85 - 0.3*1.0 = 0.295 < C = 0.7*0.6 = 0.42.
    assert select_mmr(_SCORES, 3, 0.7, _TOKENS) == [0, 2, 1]
    assert select_mmr(_SCORES, 2, 0.7, _TOKENS) == [0, 2]
    assert select_mmr(_SCORES, 3, 1.0, _TOKENS) == [0, 1, 2]  # relevance only


def test_k_one_is_relevance_only_and_does_not_tokenise() -> None:
    rows = [SimpleNamespace(score=s) for s in (0.5, 0.9, 0.9)]  # no content: tokenising would fail
    assert select_mmr(rows, 1) == [1]
    assert select_mmr([0.2, 0.2], 1) == [0]
    with pytest.raises(AttributeError):
        select_mmr(rows, 2)


def test_ties_go_to_the_earliest_index() -> None:
    tokens = [{"aa"}, {"bb"}, {"cc"}]
    assert select_mmr([0.5, 0.5, 0.5], 3, 0.7, tokens) == [0, 1, 2]
    assert select_mmr([0.1, 0.5, 0.5], 2, 0.7, tokens) == [1, 2]


def test_token_sets_validation() -> None:
    with pytest.raises(ValueError, match="need token_sets"):
        select_mmr([0.5, 0.4], 2)
    with pytest.raises(ValueError, match="token_sets has 1 entries for 2 items"):
        select_mmr([0.5, 0.4], 2, 0.7, [set()])


def test_trace_records_each_step() -> None:
    steps = mmr_trace(_SCORES, 3, 0.7, _TOKENS, runner_ups=2)
    assert [s.index for s in steps] == [0, 2, 1]
    assert isinstance(steps[0], MMRStep)
    first, second, third = steps
    assert (first.step, first.relevance, first.redundancy) == (0, 0.9, 0.0)
    assert first.mmr == pytest.approx(0.63)
    assert [c.index for c in first.runner_ups] == [1, 2]
    assert second.mmr == pytest.approx(0.42) and second.redundancy == 0.0
    assert len(second.runner_ups) == 1
    runner = second.runner_ups[0]
    assert (runner.index, runner.redundancy) == (1, 1.0)
    assert runner.mmr == pytest.approx(0.295)
    assert third.redundancy == 1.0 and third.runner_ups == []
    as_dict = second.to_dict()
    assert as_dict["index"] == 2 and as_dict["runner_ups"][0]["index"] == 1
    assert json.loads(json.dumps([s.to_dict() for s in steps]))[0]["step"] == 0


def test_apply_mmr_on_search_results() -> None:
    results = [
        SearchResult(id="a", content="alpha beta gamma delta", score=0.9),
        SearchResult(id="b", content="**alpha** beta gamma delta", score=0.88),  # same tokens once cleaned
        SearchResult(id="c", content="totally different words", score=0.5),
    ]
    assert [r.id for r in apply_mmr(results, 3, 0.7)] == ["a", "c", "b"]
    assert [r.id for r in apply_mmr(results, 1, 0.7)] == ["a"]
    assert [r.id for r in apply_mmr(results, 0, 0.7)] == []


def test_apply_mmr_chinese_passages() -> None:
    results = [
        SearchResult(id="a", content="北京大学是一所大学", score=0.9),
        SearchResult(id="b", content="北京大学是一所大学。", score=0.89),
        SearchResult(id="c", content="上海的天气很好", score=0.6),
    ]
    assert [r.id for r in apply_mmr(results, 2, 0.7)] == ["a", "c"]


# --- properties ----------------------------------------------------------------------------------------

_token_set = st.sets(st.sampled_from(["t0", "t1", "t2", "t3", "t4", "t5", "t6"]), max_size=5)
_case = st.integers(0, 12).flatmap(
    lambda n: st.tuples(
        st.lists(st.floats(0, 1, allow_nan=False), min_size=n, max_size=n),
        st.lists(_token_set, min_size=n, max_size=n),
        st.integers(-1, n + 2),
        st.sampled_from([0.0, 0.3, 0.5, 0.7, 1.0]) | st.floats(0, 1),
    )
)


@settings(max_examples=300)
@given(_case)
def test_inverted_index_equals_naive(case: tuple[list[float], list[set[str]], int, float]) -> None:
    scores, tokens, k, lam = case
    got = select_mmr(scores, k, lam, tokens)
    assert got == naive_mmr(scores, tokens, k, lam)
    assert len(got) == (min(k, len(scores)) if k > 0 else 0)
    assert len(set(got)) == len(got)
    assert [s.index for s in mmr_trace(scores, k, lam, tokens)] == got


@settings(max_examples=100)
@given(_case)
def test_lambda_one_sorts_by_score(case: tuple[list[float], list[set[str]], int, float]) -> None:
    scores, tokens, k, _ = case
    expected = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[: max(k, 0)]
    assert select_mmr(scores, k, 1.0, tokens) == expected


@settings(max_examples=200)
@given(_case)
def test_first_pick_is_the_most_relevant(case: tuple[list[float], list[set[str]], int, float]) -> None:
    scores, tokens, k, lam = case
    got = select_mmr(scores, k, lam, tokens)
    if got:
        # nothing is selected yet, so the first pick maximises λ·relevance (earliest index on ties)
        weighted = [lam * s for s in scores]
        assert got[0] == weighted.index(max(weighted))
