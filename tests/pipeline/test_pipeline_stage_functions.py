"""Pure pieces of the stages, with the spec's concrete rules."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_lab.pipeline.plugins.filter_top_k import sort_search_results_deterministically
from rag_lab.pipeline.plugins.memory_affinity import affinity_factor
from rag_lab.pipeline.plugins.merge import inject_history_references, merge_ordered, merge_sequential_chunks
from rag_lab.pipeline.plugins.query_expansion import expansion_tokens, generate_expansion_variants
from rag_lab.pipeline.plugins.query_understand import parse_query_understanding
from rag_lab.reranking.ladder import filter_by_threshold, model_arrays
from rag_lab.reranking.scored import CandidateColumns, faq_boost_of, score_kept
from rag_lab.types import History, MatchType, PipelineParams, SearchResult

P = PipelineParams()


def test_deterministic_sort_keys_and_nulls_last():
    rs = [
        SearchResult(id="b", knowledge_id="k1", score=0.5),
        None,
        SearchResult(id="a", knowledge_id="k1", score=0.5),
        SearchResult(id="z", knowledge_id="k0", score=0.5, chunk_index=3),
        SearchResult(id="y", knowledge_id="k0", score=0.9),
    ]
    out = sort_search_results_deterministically(rs)
    assert [r.id if r else None for r in out] == ["y", "z", "a", "b", None]


@given(
    st.lists(st.tuples(st.floats(0, 1), st.sampled_from("ab"), st.integers(0, 3), st.sampled_from("xyz")), max_size=12)
)
def test_deterministic_sort_is_order_independent(rows):
    rs = [SearchResult(id=i, knowledge_id=k, score=s, chunk_index=c) for s, k, c, i in rows]
    a = sort_search_results_deterministically(list(rs))
    b = sort_search_results_deterministically(list(reversed(rs)))
    key = lambda r: (r.score, r.knowledge_id, r.chunk_index, r.id)  # noqa: E731
    assert [key(r) for r in a] == [key(r) for r in b]


def _chunk(i, text, start, score=0.5, kid="d"):
    return SearchResult(
        id=f"c{i}", knowledge_id=kid, chunk_index=i, content=text, start_at=start, end_at=start + len(text), score=score
    )


def test_sequential_merge_extend_subsume_separate():
    doc = "0123456789abcdefghij" * 3
    a = _chunk(0, doc[0:20], 0, 0.4)
    b = _chunk(1, doc[15:35], 15, 0.9)  # overlaps a by 5 runes → extend
    c = _chunk(5, doc[50:60], 50, 0.1)  # position gap → separate
    log: list = []
    out = merge_sequential_chunks([c, b, a], P, log)
    assert [r.id for r in out] == ["c0", "c5"]
    assert out[0].content == doc[0:35] and out[0].end_at == 35 and out[0].score == 0.9
    assert out[0].sub_chunk_id == ["c1"]
    assert [x["action"] for x in log] == ["extend"]


def test_untrusted_neighbours_are_joined_as_text():
    a = SearchResult(
        id="a", knowledge_id="d", chunk_index=0, content="First part of the story.", content_rewritten=True
    )
    b = SearchResult(id="b", knowledge_id="d", chunk_index=1, content="Second part follows here.")
    far = SearchResult(id="f", knowledge_id="d", chunk_index=9, content="Unrelated far chunk.")
    log: list = []
    out = merge_sequential_chunks([a, b, far], P, log)
    assert out[0].content == "First part of the story.\n\nSecond part follows here."
    assert [x["action"] for x in log] == ["join_text"] and {r.id for r in out} == {"a", "f"}


def test_merge_ordered_caps_at_expansion_max_len():
    p = P.with_changes(expansion_max_len=10)
    assert merge_ordered("prev", "base", "next", p) == "prev\n\nbase"[:10]


def test_history_references_seed_overlap_rule():
    old = [
        SearchResult(id="h1", content="lighthouse built by Mara Quill in 1874", score=0.8),
        SearchResult(id="h2", content="sourdough starter feeding schedule", score=0.9),
        SearchResult(id="cur", content="already present", score=0.5),
    ]
    hist = [
        History(query="q0", answer="a0", knowledge_references=[SearchResult(id="old")]),
        History(query="q1", answer="a1", knowledge_references=old),
    ]
    log: list = []
    got = inject_history_references([SearchResult(id="cur")], hist, "who built the lighthouse", P, log)
    assert [r.id for r in got] == ["h1"]
    assert got[0].match_type == MatchType.HISTORY and got[0].score == pytest.approx(0.8 * 0.6)
    assert old[0].score == 0.8  # the history entry itself is not rescored
    # query tokens {who, built, the, lighthouse} are the smaller set; 2 of 4 are in the content
    assert got[0].metadata["history_overlap"] == "0.5"


def test_history_overlap_at_exactly_the_threshold_is_kept():
    """The seed's rule is ``overlap >= 0.3``: 3 of the query's 10 tokens in the reference is exactly
    0.3 (kept); 2 of 10 is 0.2 (dropped)."""
    query = "alpha bravo charlie delta echo foxtrot golf hotel india juliet"
    refs = [
        SearchResult(
            id="three", content="alpha bravo charlie kilo lima mike november oscar papa quebec romeo", score=1.0
        ),
        SearchResult(id="two", content="alpha bravo sierra kilo lima mike november oscar papa quebec romeo", score=1.0),
    ]
    hist = [History(query="q", answer="a", knowledge_references=refs)]
    log: list = []
    got = inject_history_references([], hist, query, P, log)
    assert P.history_overlap_threshold == 0.3 and [r.id for r in got] == ["three"]
    assert [(e["id"], e["action"], e["overlap"]) for e in log] == [("three", "injected", 0.3), ("two", "dropped", 0.2)]


def test_affinity_factor():
    assert affinity_factor(1, P) == 1.0
    assert affinity_factor(2, P) == pytest.approx(1 + 0.15 * math.log(3) / math.log(9))
    assert affinity_factor(8, P) == pytest.approx(1.15) and affinity_factor(100, P) == pytest.approx(1.15)


def test_threshold_ladder():
    index, score = model_arrays([(0, 0.1), (1, 0.5), (2, 0.35), (7, 0.99)])
    kept, outcome = filter_by_threshold(index, score, 3, 0.3, 0.15)
    assert index[kept].tolist() == [1, 2] and outcome == "ok"
    kept, outcome = filter_by_threshold(index, score, 3, 0.6, 0.15)
    assert index[kept].tolist() == [1] and outcome == "fallback_top1"  # best valid, not index 7
    kept, outcome = filter_by_threshold(index, score, 3, 0.6, 0.55)
    assert kept.tolist() == [] and outcome == "all_below_threshold"
    kept, outcome = filter_by_threshold(*model_arrays([]), 3, 0.3, 0.0)
    assert (kept.tolist(), outcome) == ([], "all_below_threshold")
    # ties: the first maximum in the model's order is the fallback
    index, score = model_arrays([(2, 0.2), (0, 0.2), (1, 0.1)])
    assert filter_by_threshold(index, score, 3, 0.5, 0.15)[0].tolist() == [0]
    # a NaN never passes and is never the fallback; an index outside the candidates never is either
    index, score = model_arrays([(1, 0.2), (0, float("nan"))])
    kept, outcome = filter_by_threshold(index, score, 1, 0.0, 0.15)
    assert (kept.tolist(), outcome) == ([], "all_below_threshold")
    index, score = model_arrays([(0, float("nan")), (1, 0.2)])
    kept, outcome = filter_by_threshold(index, score, 2, 0.5, 0.15)
    assert (kept.tolist(), outcome) == ([1], "fallback_top1")


def test_composite_scores_and_uncapped_faq_boost():
    cands = [
        SearchResult(id="a", score=0.5),
        SearchResult(id="f", score=1.0, chunk_type="faq"),
        SearchResult(id="w", score=0.6, knowledge_source="web_search"),
        SearchResult(id="g", score=0.0, match_type=MatchType.GRAPH),
    ]
    index, model = model_arrays([(0, 0.8), (1, 1.0), (2, 0.5), (3, 0.7)])
    got = score_kept(CandidateColumns.of(cands), index, model, P, faq_boost_of(True, 1.2))
    assert got.index.tolist() == [0, 1, 2, 3]
    assert got.final[0] == 0.6 * 0.8 + 0.3 * 0.5 + 0.1 * 1.0 and got.base[0] == 0.5
    assert got.composite[1] == 0.9999999999999999 and got.final[1] == 0.9999999999999999 * 1.2 > 1.0  # not capped
    assert got.faq.tolist() == [False, True, False, False]
    assert got.final[2] == 0.6 * 0.5 + 0.3 * 0.6 + 0.1 * 0.95  # web source weight
    assert got.base[3] == 0.7  # graph hits use the model score as base
    off = score_kept(CandidateColumns.of(cands), index, model, P, faq_boost_of(False, 1.2))
    assert off.final[1] == 0.9999999999999999 and not off.faq.any()  # FAQ priority off: no boost


def test_expansion_variants():
    v = generate_expansion_variants('What is the "Queen\'s Gambit" opening, and who played it?', "", 5)
    # spec stop words and 1-rune tokens ("s") dropped; "and"/"it" are not in the list
    assert v[0] == "Queen Gambit opening and played it"
    # the phrase pattern treats ' as a quote too, so the quoted phrase stops at the apostrophe
    assert v[1] == "Queen"
    assert v[2:] == ["\"Queen's", 'Gambit"', "opening"]  # whitespace segments longer than 5 bytes
    assert len(v) <= 5 and len({x.lower() for x in v}) == len(v)
    zh = generate_expansion_variants("什么是长城的历史", "", 5)
    assert "长城的历史" in zh
    assert generate_expansion_variants("   ", "", 5) == []
    assert expansion_tokens("长城abc12 x")[-2:] == ["abc12", "x"]


def test_parse_query_understanding_is_tolerant():
    assert parse_query_understanding("") is None and parse_query_understanding("no json here") is None
    got = parse_query_understanding(
        'Sure!\n```json\n{"rewritten_query": " Who built it? ", "intent": "KB-Search"}\n```'
    )
    assert got == {"rewrite_query": "Who built it?", "intent": "KB-Search", "image_description": ""}
    got = parse_query_understanding('{"query": 3, "question": "q", "intent": 5, "image_desc": "a cat", "ocr": "MEOW"}')
    assert got == {"rewrite_query": "q", "intent": "", "image_description": "a cat\n\n[OCR]\nMEOW"}
    got = parse_query_understanding('{"image_description": "sign says STOP here", "ocr_text": "STOP"}')
    assert got["image_description"] == "sign says STOP here"
