"""reranking.passage: enriched passage (§4.6.3 + A.1) and model passage (A.1 + seed)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.reranking.passage import (
    CONTEXT_HEADER_KEY,
    enriched_passage,
    generated_questions,
    model_passage,
    passages_of,
    passages_of_results,
)
from rag_lab.types import SearchResult

_QUESTIONS = {"generated_questions": [{"id": "q1", "question": "Q1?"}, {"id": "q2", "question": "Q2?"}]}


def test_enriched_passage_full() -> None:
    r = SearchResult(
        id="c1",
        content="**Body** text",
        image_info=json.dumps([{"url": "u", "caption": "Cap", "ocr_text": "OCR"}, {"url": "v", "caption": ""}]),
        chunk_metadata=_QUESTIONS,
    )
    assert enriched_passage(r) == "Body text\n\nCap\nOCR\nQ1?; Q2?"


def test_enriched_passage_plain_and_empty_body() -> None:
    assert enriched_passage(SearchResult(content="## Title\nbody")) == "Title\nbody"
    r = SearchResult(content="![img](u)", image_info=json.dumps([{"url": "u", "caption": "A cat"}]))
    assert enriched_passage(r) == "A cat"  # no "\n\n" before the enrichments when the text is empty


def test_image_text_equal_to_body_is_not_repeated() -> None:
    r = SearchResult(
        content="  OCR words \n",
        chunk_type="image_ocr",
        image_info=json.dumps([{"url": "u", "caption": "A chart", "ocr_text": "OCR words"}]),
    )
    assert enriched_passage(r) == "OCR words\n\nA chart"
    r.image_info = json.dumps([{"url": "u", "caption": " OCR words ", "ocr_text": "OCR words"}])
    assert enriched_passage(r) == "OCR words"


def test_invalid_enrichments_are_ignored() -> None:
    r = SearchResult(id="c", content="body", image_info="{broken", chunk_metadata="[not metadata]")
    assert enriched_passage(r) == "body"
    r = SearchResult(content="body", chunk_metadata=json.dumps(_QUESTIONS))  # JSON text works too
    assert enriched_passage(r) == "body\n\nQ1?; Q2?"


def test_generated_questions() -> None:
    assert generated_questions(_QUESTIONS) == ["Q1?", "Q2?"]
    assert generated_questions(b'{"generated_questions": [{"question": ""}, {"question": "b"}]}') == ["", "b"]
    assert generated_questions({}) == []
    assert generated_questions({"generated_questions": []}) == []
    assert generated_questions({**_QUESTIONS, "generated_questions_inactive": True}) == []
    assert generated_questions("{bad") is None
    assert generated_questions({"generated_questions": "no"}) is None
    assert generated_questions({"generated_questions": [{"question": 3}]}) is None
    r = SearchResult(content="body", chunk_metadata={**_QUESTIONS, "generated_questions_inactive": True})
    assert enriched_passage(r) == "body"


def test_model_passage_title_breadcrumb_body() -> None:
    r = SearchResult(
        content="7 天内可申请",
        knowledge_title="售后手册",
        metadata={"context_header": "退款政策 > 申请条件"},
        chunk_type="text",
    )
    assert model_passage(r) == "售后手册\n\n退款政策 > 申请条件\n\n7 天内可申请"


def test_model_passage_optional_parts() -> None:
    assert model_passage(SearchResult(content="body", knowledge_title="  Doc  ")) == "Doc\n\nbody"
    assert model_passage(SearchResult(content="body", metadata={"context_header": " A > B "})) == "A > B\n\nbody"
    assert model_passage(SearchResult(content="body", knowledge_title=" ", metadata={"context_header": ""})) == "body"


def test_model_passage_faq_and_blank() -> None:
    faq = SearchResult(content="Q: how?\nA: so.", knowledge_title="FAQ", chunk_type="faq")
    assert model_passage(faq) == "Q: how?\nA: so."
    blank = SearchResult(content="![x](u) https://a.b", knowledge_title="Title")
    assert model_passage(blank) == ""


@settings(max_examples=300)
@given(
    st.lists(
        st.builds(
            SearchResult,
            id=st.just("x"),
            content=st.sampled_from(["", "  ", "Body text", "<p>Body</p> text", "Q?"]),
            knowledge_title=st.sampled_from(["", " Title ", "Other"]),
            chunk_type=st.sampled_from(["text", "faq", "image_ocr"]),
            metadata=st.sampled_from([{}, {CONTEXT_HEADER_KEY: "A > B"}, {CONTEXT_HEADER_KEY: ""}, {"k": "v"}]),
            image_info=st.sampled_from(["", json.dumps([{"caption": "a cat", "ocr_text": "TEXT"}]), "not json"]),
            chunk_metadata=st.sampled_from([None, {"generated_questions": [{"question": "Why?"}]}, "{bad", ""]),
        ),
        max_size=8,
    )
)
def test_passages_of_results_is_passages_of_each(results: list[SearchResult]) -> None:
    assert passages_of_results(results) == [passages_of(r) for r in results]
    assert [p for p, _ in passages_of_results(results)] == [enriched_passage(r) for r in results]
