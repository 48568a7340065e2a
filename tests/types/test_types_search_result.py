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


def _reference(**kw) -> SearchResult:
    return SearchResult(
        id="c1",
        content="The lighthouse was built in 1874.",
        knowledge_id="k1",
        score=0.8,
        match_type=MatchType.KEYWORDS,
        sub_chunk_id=["s1", "s2"],
        metadata={"base_score": 0.5, "nested": {"a": [1, 2]}},
        chunk_metadata={"rows": [[1, "x"]]},
        **kw,
    )


def test_to_dict_is_an_independent_deep_copy_of_the_persisted_fields():
    import copy

    r = _reference(content_revision=3, content_rewritten=True)
    d = r.to_dict()
    assert d == {
        "id": "c1",
        "content": "The lighthouse was built in 1874.",
        "knowledge_id": "k1",
        "chunk_index": 0,
        "knowledge_title": "",
        "start_at": 0,
        "end_at": 0,
        "seq": 0,
        "score": 0.8,
        "match_type": 1,
        "sub_chunk_id": ["s1", "s2"],
        "metadata": {"base_score": 0.5, "nested": {"a": [1, 2]}},
        "chunk_type": "text",
        "parent_chunk_id": "",
        "image_info": "",
        "knowledge_filename": "",
        "knowledge_source": "",
        "knowledge_channel": "",
        "chunk_metadata": {"rows": [[1, "x"]]},
    }
    assert list(d) == [k for k in json.loads(json.dumps(d))]  # declaration order kept
    assert type(d["match_type"]) is int
    d["metadata"]["nested"]["a"].append(3)
    d["sub_chunk_id"].append("s3")
    d["chunk_metadata"]["rows"][0].append("y")
    assert r.metadata == {"base_score": 0.5, "nested": {"a": [1, 2]}} and r.sub_chunk_id == ["s1", "s2"]
    assert r.chunk_metadata == {"rows": [[1, "x"]]}
    assert r.to_dict() == copy.deepcopy(r.to_dict())


def test_from_dict_does_not_share_the_input_values():
    data = _reference().to_dict()
    r = SearchResult.from_dict(data)
    assert r == _reference()
    data["metadata"]["nested"]["a"].append(9)
    data["chunk_metadata"]["rows"].clear()
    data["sub_chunk_id"].append("s9")
    assert r.metadata["nested"] == {"a": [1, 2]} and r.chunk_metadata == {"rows": [[1, "x"]]}
    assert r.sub_chunk_id == ["s1", "s2"]


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
        lambda kids: (
            st.lists(kids, max_size=3) | st.tuples(kids, kids) | st.dictionaries(st.text(max_size=3), kids, max_size=3)
        ),
        max_leaves=12,
    )
)
def test_copy_value_equals_deepcopy_and_shares_no_container(value):
    import copy

    from rag_lab.types.search_result import copy_value

    out = copy_value(value)
    assert out == copy.deepcopy(value)

    def containers(v):
        if isinstance(v, (list, dict)):
            yield v
        items = v.values() if isinstance(v, dict) else v if isinstance(v, (list, tuple)) else ()
        for x in items:
            yield from containers(x)

    mine = {id(c) for c in containers(value)}
    assert not mine & {id(c) for c in containers(out)}
