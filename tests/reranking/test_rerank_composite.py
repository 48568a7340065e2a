"""reranking.composite: source weight, composite score, score formatting (§4.6.2, §0)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rag_lab.reranking.composite import composite_score, format_score, source_weight
from rag_lab.types import PipelineParams, SearchResult

_KB = SearchResult(id="kb", knowledge_source="file")
_WEB = SearchResult(id="web", knowledge_source="web_search")


def test_source_weight() -> None:
    assert source_weight(_KB) == 1.0
    assert source_weight(_WEB) == 0.95
    assert source_weight(SearchResult(knowledge_source="WEB_Search")) == 0.95
    assert source_weight(_WEB, PipelineParams(web_source_weight=0.5)) == 0.5


def test_composite_score_ieee_values() -> None:
    # §0: 0.6*1 + 0.3*1 + 0.1*1 is 0.9999999999999999, not 1.0.
    assert composite_score(_KB, 1.0, 1.0) == 0.9999999999999999
    assert composite_score(_WEB, 1.0, 1.0) == 0.9949999999999999
    assert composite_score(_KB, 0.5, 0.2) == 0.45999999999999996


def test_composite_score_clamps() -> None:
    assert composite_score(_KB, 2.0, 1.0) == 1.0
    assert composite_score(_KB, -1.0, -1.0) == 0.0


def test_composite_score_weights_come_from_params() -> None:
    params = PipelineParams(composite_model_weight=1.0, composite_base_weight=0.0, composite_source_weight=0.0)
    assert composite_score(_KB, 0.37, 0.9, params) == 0.37


@given(st.floats(-5, 5), st.floats(-5, 5), st.booleans())
def test_composite_score_in_unit_interval(model: float, base: float, web: bool) -> None:
    assert 0.0 <= composite_score(_WEB if web else _KB, model, base) <= 1.0


def test_format_score() -> None:
    assert format_score(0.12345) == "0.1235"
    assert format_score(1) == "1.0000"
    assert format_score(0.9999999999999999) == "1.0000"
    assert format_score(0.0) == "0.0000"
