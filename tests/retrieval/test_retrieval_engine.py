from __future__ import annotations

import pytest

from rag_lab.knowledge.kb_rows import KbRows
from rag_lab.knowledge.workspace import KnowledgeBaseNotFound
from rag_lab.retrieval.base import SearchScope
from rag_lab.retrieval.engine import ENGINE_TYPE, LocalEngine


def test_vector_and_keyword_hits(small_kb):
    ws, kb, emb = small_kb
    eng = ws.engine()
    assert isinstance(eng, LocalEngine) and eng.engine_type == ENGINE_TYPE == "faiss+bm25s"
    v = eng.vector_search(emb.embed(["molten magma lava"])[0], SearchScope([kb.id], 3, 0.0))
    assert v[0].knowledge_id == "volcano" and v[0].match_type == 0 and len(v) == 3
    assert v[0].chunk_id == f"{kb.id}:volcano#c0" and v[0].content.startswith("Volcanoes erupt")
    assert [h.score for h in v] == sorted((h.score for h in v), reverse=True)
    k = eng.keyword_search("magma crust", SearchScope([kb.id], 5, 0.0))
    assert [h.knowledge_id for h in k] == ["volcano"] and k[0].match_type == 1 and k[0].tag_id == "science"


def test_keyword_threshold_is_not_applied(small_kb):
    ws, kb, _ = small_kb
    hits = ws.engine().keyword_search("magma", SearchScope([kb.id], 5, threshold=1e9))
    assert [h.knowledge_id for h in hits] == ["volcano"]


def test_vector_threshold_is_applied(small_kb):
    ws, kb, emb = small_kb
    q = emb.embed(["molten magma lava"])[0]
    all_hits = ws.engine().vector_search(q, SearchScope([kb.id], 10, 0.0))
    cut = all_hits[1].score
    above = ws.engine().vector_search(q, SearchScope([kb.id], 10, cut))
    assert [h.chunk_id for h in above] == [h.chunk_id for h in all_hits if h.score >= cut]


def test_filters_and_disabled_chunks(small_kb):
    ws, kb, emb = small_kb
    eng = ws.engine()
    q = emb.embed(["plants sunlight tides moon"])[0]
    only = eng.vector_search(q, SearchScope([kb.id], 10, 0.0, knowledge_ids=["tides", "chess"]))
    assert {h.knowledge_id for h in only} == {"tides", "chess"}
    tagged = eng.vector_search(q, SearchScope([kb.id], 10, 0.0, tag_ids=["science"]))
    assert {h.knowledge_id for h in tagged} == {"photo", "volcano", "tides"}
    both = eng.vector_search(q, SearchScope([kb.id], 10, 0.0, knowledge_ids=["tides", "chess"], tag_ids=["science"]))
    assert [h.knowledge_id for h in both] == ["tides"]  # AND
    assert (
        eng.keyword_search("moon chess", SearchScope([kb.id], 10, 0, knowledge_ids=["chess"]))[0].knowledge_id
        == "chess"
    )

    ws.store.set_chunks_enabled([f"{kb.id}:volcano#c0"], False)
    assert "volcano" not in {h.knowledge_id for h in eng.vector_search(q, SearchScope([kb.id], 10, 0.0))}
    assert eng.keyword_search("magma", SearchScope([kb.id], 10, 0)) == []


def test_several_kbs_merge_by_score_and_parents_never_returned(small_kb):
    ws, kb, emb = small_kb
    kb2 = ws.create_kb("second", emb, chunk_size=40, chunk_overlap=0, parent_chunk_size=120)
    ws.ingest_documents(
        kb2,
        [
            {
                "id": "lava",
                "title": "Lava",
                "text": "Lava flows from the volcano. Molten magma cools into basalt rock.",
            },
            {"id": "misc", "title": "Misc", "text": "Unrelated words about gardening and tomatoes in summer."},
            {"id": "misc2", "title": "Misc 2", "text": "Recipes for bread need flour, water and salt."},
        ],
        emb,
        progress=False,
    )
    eng = ws.engine()
    q = emb.embed(["molten magma lava volcano"])[0]
    hits = eng.vector_search(q, SearchScope([kb.id, kb2.id], 4, 0.0))
    assert len(hits) == 4 and {h.knowledge_base_id for h in hits} == {kb.id, kb2.id}
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    kw = eng.keyword_search("magma basalt", SearchScope([kb.id, kb2.id], 10, 0))
    assert kw[0].knowledge_id == "lava"
    for h in hits + kw:
        assert "#p" not in h.chunk_id  # parent_text chunks are never indexed
    with pytest.raises(KnowledgeBaseNotFound, match="'missing'"):
        eng.vector_search(q, SearchScope([kb.id, "missing"], 3, 0.0))


def test_hit_rows_come_from_one_scan_per_store_state(small_kb, monkeypatch):
    """A KB's chunk rows are read in one scan on its first search under a store state; later
    searches read none; a write empties them (a disabled chunk is gone at once); a KB over the
    rows' budget reads its hits' rows by id, with the same hits."""
    ws, kb, emb = small_kb
    calls: list[object] = []
    whole, by_id = ws.store.kb_table_rows, ws.store.get_chunk_rows

    def spy_whole(table, kb_id):
        calls.append(f"whole {table}")
        return whole(table, kb_id)

    def spy_by_id(ids):
        ids = list(ids)
        calls.append(len(ids))
        return by_id(ids)

    monkeypatch.setattr(ws.store, "kb_table_rows", spy_whole)
    monkeypatch.setattr(ws.store, "get_chunk_rows", spy_by_id)
    eng = LocalEngine(ws)
    q = emb.embed(["molten magma lava"])[0]
    first = eng.vector_search(q, SearchScope([kb.id], 6, 0.0))
    eng.keyword_search("moon chess", SearchScope([kb.id], 5, 0.0))
    assert eng.vector_search(emb.embed(["tides moon"])[0], SearchScope([kb.id], 6, 0.0))
    assert calls == ["whole chunks"]
    assert first[0].chunk_id == f"{kb.id}:volcano#c0" and first[0].content.startswith("Volcanoes erupt")

    ws.store.set_chunks_enabled([f"{kb.id}:volcano#c0"], False)
    after = eng.vector_search(q, SearchScope([kb.id], 6, 0.0))
    assert calls == ["whole chunks", "whole chunks"]
    assert [h.chunk_id for h in after] == [h.chunk_id for h in first if h.knowledge_id != "volcano"][:6]

    budget = KbRows(ws.store)
    budget.max_rows = 2  # the KB does not fit: no scan, the hits' rows only
    monkeypatch.setattr(ws.store, "kb_rows", budget)
    small = LocalEngine(ws)
    assert small.vector_search(q, SearchScope([kb.id], 6, 0.0)) == after
    assert small.keyword_search("moon chess", SearchScope([kb.id], 5, 0.0)) == eng.keyword_search(
        "moon chess", SearchScope([kb.id], 5, 0.0)
    )
    assert calls[2:] and all(isinstance(c, int) for c in calls[2:])


def test_every_hit_field_is_filled(small_kb):
    """Hits are built positionally: each field holds its own value."""
    from dataclasses import asdict

    ws, kb, emb = small_kb
    (hit,) = LocalEngine(ws).keyword_search("magma crust", SearchScope([kb.id], 1, 0.0))
    assert asdict(hit) == {
        "id": f"{kb.id}:volcano#c0",
        "content": hit.content,
        "chunk_id": f"{kb.id}:volcano#c0",
        "knowledge_id": "volcano",
        "knowledge_base_id": kb.id,
        "score": hit.score,
        "match_type": 1,
        "source_id": f"{kb.id}:volcano#c0",
        "source_type": "chunk",
        "tag_id": "science",
        "is_enabled": True,
    }
    assert hit.content.startswith("Volcanoes erupt") and hit.score > 0


def test_searches_run_in_the_callers_thread_when_small_or_already_parallel(small_kb):
    """runs_inline: by size (at most inline_max_vectors vectors), or when the KB's vectors are
    scanned through the 8-bit copy in parallel parts (up to inline_max_parallel_vectors); a flat
    scan above the size goes to worker threads. Decided once per store state."""
    from rag_lab.retrieval.vector_index import IndexPolicy

    ws, kb, _ = small_kb
    index = ws.vector_index(kb)
    assert index is not None and len(index) > 1
    eng = LocalEngine(ws)
    assert eng.runs_inline([kb.id])  # small
    eng.inline_max_vectors = 0
    eng._inline.clear()
    assert not eng.runs_inline([kb.id])  # flat, above the size
    index.policy = IndexPolicy(quantized_min_vectors=1, quantized_shards=2)
    assert index.scans_in_parallel()
    eng._inline.clear()
    assert eng.runs_inline([kb.id])  # the scan runs on two threads already
    eng.inline_max_parallel_vectors = 1
    eng._inline.clear()
    assert not eng.runs_inline([kb.id])
    index.policy = IndexPolicy(quantized_min_vectors=1, quantized_shards=1)
    assert not index.scans_in_parallel()
