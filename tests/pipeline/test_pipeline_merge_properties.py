"""Merge-stage properties (issue 4): no result's text is lost, overlap removal is idempotent,
image hits folded into their description are marked."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.pipeline.plugins.merge import group_and_merge, mark_image_vector_matches
from rag_lab.searchutil.dedup import remove_partial_overlaps
from rag_lab.types import PipelineParams, SearchResult

P = PipelineParams()
WORDS = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"]


@st.composite
def documents(draw):
    text = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=20, max_size=60)))
    n = draw(st.integers(1, 5))
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), min_size=n * 2, max_size=n * 2)))
    out = []
    for i in range(n):
        a, b = cuts[2 * i], cuts[2 * i + 1]
        if b > a:
            out.append(
                SearchResult(
                    id=f"c{i}",
                    knowledge_id="d",
                    chunk_index=i,
                    content=text[a:b],
                    start_at=a,
                    end_at=b,
                    score=draw(st.floats(0, 1)),
                )
            )
    return out


@settings(max_examples=150)
@given(documents())
def test_merge_never_loses_a_results_text(results):
    texts = [r.content for r in results]
    merged = group_and_merge([r.copy() for r in results], P, [])
    joined = "\n".join(r.content for r in merged)
    for t in texts:
        assert t in joined


@settings(max_examples=150)
@given(st.lists(st.tuples(st.lists(st.sampled_from(WORDS), min_size=1, max_size=8), st.floats(0, 1)), max_size=8))
def test_overlap_removal_is_idempotent(rows):
    results = [SearchResult(id=str(i), content=" ".join(ws), score=s) for i, (ws, s) in enumerate(rows)]
    once = remove_partial_overlaps(results, P.overlap_threshold)
    twice = remove_partial_overlaps(once, P.overlap_threshold)
    assert [r.id for r in twice] == [r.id for r in once]


def test_image_hit_folded_into_description_is_marked():
    info = json.dumps([{"url": "https://img/1.png", "caption": "bridge"}])
    hit = SearchResult(id="img", knowledge_id="d", chunk_type="image_vector", content="A red bridge", image_info=info)
    desc = SearchResult(id="txt", knowledge_id="d", content="Photo: a red bridge over the river")
    log: list = []
    mark_image_vector_matches([hit], [desc], log)
    assert desc.metadata["image_vector_match"] == "true" and "https://img/1.png" in desc.image_info
    assert log == [{"step": "image_vector_match", "id": "txt", "image_hit": "img"}]
