"""Composite score (§4.6.2) and MMR (§6.8) details that mutation testing found untested
(``scripts/mutation.py run composite mmr``)."""

from __future__ import annotations

import pytest

from rag_lab.reranking.composite import composite_score, source_weight
from rag_lab.reranking.mmr import apply_mmr, mmr_trace, select_mmr
from rag_lab.types import PipelineParams, SearchResult


def test_composite_defaults_without_params_and_custom_web_weight() -> None:
    web = SearchResult(id="w", knowledge_source="web_search")
    assert composite_score(SearchResult(id="a"), 0.8, 0.5) == pytest.approx(0.73)  # 0.48 + 0.15 + 0.1
    assert source_weight(web) == 0.95
    p = PipelineParams(web_source_weight=0.5)
    assert source_weight(web, p) == 0.5
    assert composite_score(web, 0.8, 0.5, p) == pytest.approx(0.48 + 0.15 + 0.05)  # the params' weight


def _r(id_: str, score: float, content: str) -> SearchResult:
    return SearchResult(id=id_, score=score, content=content)


def test_mmr_lambda_is_passed_through_and_k_0_or_no_items_pick_nothing() -> None:
    """λ = 0.2 makes redundancy dominate: the near-copy of the best is passed over (λ = 0.9 keeps it)."""
    rs = [_r("a", 0.9, "red bridge river"), _r("b", 0.85, "red bridge river"), _r("c", 0.5, "blue sky")]
    assert [r.id for r in apply_mmr(rs, 2, 0.9)] == ["a", "b"]
    assert [r.id for r in apply_mmr(rs, 2, 0.2)] == ["a", "c"]
    assert select_mmr(rs, 0, 0.7) == [] and select_mmr([], 3, 0.7) == []


def test_mmr_trace_steps_serialise_with_their_runner_ups() -> None:
    rs = [_r("a", 0.9, "red bridge"), _r("b", 0.8, "red river"), _r("c", 0.5, "blue sky")]
    steps = mmr_trace(rs, 2, 0.7, runner_ups=0)
    assert [s.index for s in steps] == [0, 1]  # b: 0.7·0.8 - 0.3·(1/3) = 0.46 > c: 0.35
    assert all(not s.to_dict()["runner_ups"] for s in steps)  # none asked for
    step = mmr_trace(rs, 2, 0.7, runner_ups=2)[1].to_dict()
    assert set(step) >= {"step", "index", "relevance", "redundancy", "mmr", "runner_ups"}
    assert step["runner_ups"] and set(step["runner_ups"][0]) == {"index", "relevance", "redundancy", "mmr"}


def test_mmr_trace_of_plain_scores_uses_the_given_token_sets() -> None:
    steps = mmr_trace([0.9, 0.85, 0.5], 2, 0.7, token_sets=[{"red", "bridge"}, {"red", "bridge"}, {"tide"}])
    assert [s.index for s in steps] == [0, 2]
