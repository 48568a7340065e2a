from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from rag_lab.types import ChunkType, MatchType, SearchResult


def test_match_type_values_are_fixed():
    assert [(m.name, int(m)) for m in MatchType] == [
        ("EMBEDDING", 0),
        ("KEYWORDS", 1),
        ("NEARBY_CHUNK", 2),
        ("HISTORY", 3),
        ("PARENT_CHUNK", 4),
        ("RELATION_CHUNK", 5),
        ("GRAPH", 6),
        ("WEB_SEARCH", 7),
        ("DIRECT_LOAD", 8),
        ("DATA_ANALYSIS", 9),
    ]


def test_chunk_types():
    assert {c.value for c in ChunkType} == {
        "text",
        "parent_text",
        "image_ocr",
        "image_caption",
        "summary",
        "entity",
        "relationship",
        "faq",
        "web_search",
        "table_summary",
        "table_column",
        "wiki_page",
    }


def test_json_names_omitempty_and_internal_fields():
    r = SearchResult(id="c1", content="x", match_type=MatchType.GRAPH, content_revision=3, content_rewritten=True)
    d = r.to_dict()
    assert d["match_type"] == 6 and "content_revision" not in d and "content_rewritten" not in d
    for name in (
        "chunk_metadata",
        "matched_content",
        "knowledge_description",
        "knowledge_custom_metadata",
        "knowledge_base_id",
    ):
        assert name not in d
    assert {
        "id",
        "content",
        "knowledge_id",
        "chunk_index",
        "knowledge_title",
        "start_at",
        "end_at",
        "seq",
        "score",
        "sub_chunk_id",
        "metadata",
        "chunk_type",
        "parent_chunk_id",
        "image_info",
        "knowledge_filename",
        "knowledge_source",
        "knowledge_channel",
    } <= set(d)
    back = SearchResult.from_dict(json.loads(json.dumps(d)))
    assert back.content_revision == 0 and back.content_rewritten is False and back.match_type == 6


@given(
    st.text(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(0, 9),
    st.dictionaries(st.text(), st.text()),
)
def test_round_trip(content, score, mt, meta):
    r = SearchResult(id="x", content=content, score=score, match_type=mt, metadata=meta, matched_content=content)
    assert SearchResult.from_dict(json.loads(json.dumps(r.to_dict()))) == r


def test_is_web():
    assert SearchResult(chunk_type="WEB_SEARCH").is_web()
    assert SearchResult(knowledge_source="web_search").is_web()
    assert not SearchResult(chunk_type="text").is_web()
