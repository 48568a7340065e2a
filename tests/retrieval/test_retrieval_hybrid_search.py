from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.knowledge.models import FAQEntry
from rag_lab.knowledge.workspace import KnowledgeBaseNotFound, MixedEmbeddingSpaces, Workspace
from rag_lab.retrieval.base import RetrieveResult, SearchParams, SearchScope
from rag_lab.retrieval.hybrid_search import (
    EmbeddingUnavailable,
    HybridSearcher,
    StoreGroup,
    VectorStoreUnavailable,
    fan_out,
    normalize_match_count,
    pool_size,
)
from rag_lab.types.params import PipelineParams

P = PipelineParams()


def sp(query: str, **kw) -> SearchParams:
    kw.setdefault("match_count", 3)
    kw.setdefault("vector_threshold", 0.0)
    return SearchParams(query_text=query, **kw)


# -- pool size -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "match_count, n_kbs, expected",
    [(10, 1, 50), (20, 1, 100), (20, 3, 300), (50, 3, 500), (0, 1, 250), (-4, 2, 500), (1, 2, 100)],
)
def test_pool_size_examples(match_count, n_kbs, expected):
    assert pool_size(match_count, n_kbs, P) == expected


def test_match_count_normalisation():
    assert normalize_match_count(0, P) == 50 and normalize_match_count(-1, P) == 50
    assert normalize_match_count(7, P) == 7
    assert normalize_match_count(0, P.with_changes(default_retrieval_top_k=12)) == 12


@settings(max_examples=200)
@given(
    mc=st.integers(-5, 1000),
    n=st.integers(1, 20),
    factor=st.integers(1, 10),
    lo=st.integers(1, 200),
    cap=st.integers(1, 5000),
)
def test_pool_size_properties(mc, n, factor, lo, cap):
    params = P.with_changes(over_recall_factor=factor, over_recall_min=lo, retrieval_pool_max=cap)
    p = pool_size(mc, n, params)
    assert 1 <= p <= cap
    assert p == min(max(normalize_match_count(mc, params) * factor, lo) * n, cap)
    assert pool_size(mc, n + 1, params) >= p
    assert pool_size(max(mc, 1) + 1, n, params) >= pool_size(max(mc, 1), n, params)


# -- the small KB: keyword-only, vector-only, hybrid ----------------------------------------
async def test_keyword_only_query(small_kb):
    ws, kb, emb = small_kb
    hs = HybridSearcher(ws, lambda k: emb)
    res, tr = await hs.search_with_trace(kb.id, sp("magma crust", disable_vector_match=True))
    assert tr.fusion == "dedup_keywords" and not tr.embedded
    assert [r.knowledge_id for r in res] == ["volcano"]
    assert res[0].match_type == 1 and res[0].score == pytest.approx(tr.keyword_hits[0].score)  # raw BM25


async def test_vector_only_query_finds_what_keywords_miss(small_kb):
    ws, kb, emb = small_kb
    hs = HybridSearcher(ws, lambda k: emb)
    # no token of the query occurs in the corpus ("chloroplasts", "photosynthesis" do)
    assert await hs.search(kb.id, sp("chloroplast photosynthesizing", disable_vector_match=True)) == []
    res, tr = await hs.search_with_trace(kb.id, sp("chloroplast photosynthesizing", disable_keywords_match=True))
    assert tr.fusion == "dedup_vector" and tr.embedded
    assert res[0].knowledge_id == "photo" and res[0].match_type == 0
    q = emb.embed(["chloroplast photosynthesizing"])[0]
    doc = emb.embed([ws.store.get_chunks([res[0].id])[res[0].id].content])[0]
    assert res[0].score == pytest.approx(float(q @ doc), abs=1e-5)  # raw cosine


async def test_hybrid_query_rrf_normalised(small_kb):
    ws, kb, emb = small_kb
    hs = HybridSearcher(ws, lambda k: emb)
    res, tr = await hs.search_with_trace(kb.id, sp("chloroplast photosynthesizing magma"))
    assert tr.fusion == "rrf"
    vec_rank = {h.knowledge_id: i for i, h in enumerate(tr.vector_hits, 1)}
    kw_rank = {h.knowledge_id: i for i, h in enumerate(tr.keyword_hits, 1)}
    assert vec_rank["photo"] == 1 and vec_rank["volcano"] == 2 and kw_rank == {"volcano": 1}
    # in both lists beats first in one list: volcano wins
    assert [r.knowledge_id for r in res] == ["volcano", "photo", "chess"]
    assert res[0].score == pytest.approx((0.7 / 62 + 0.3 / 61) / (1 / 61), abs=1e-12)
    assert res[1].score == pytest.approx((0.7 / 61) / (1 / 61), abs=1e-12)
    assert res[0].match_type == 0  # the representative is the vector hit

    res2 = await hs.search(kb.id, sp("长城 防御工程"))
    assert res2[0].knowledge_id == "wall" and res2[0].score == pytest.approx(1.0, abs=1e-12)


async def test_hydrated_fields(small_kb):
    ws, kb, emb = small_kb
    hs = HybridSearcher(ws, lambda k: emb)
    r = (await hs.search(kb.id, sp("gravitational pull of the moon")))[0]
    chunk = ws.store.get_chunks([r.id])[r.id]
    assert r.id == f"{kb.id}:tides#c0" and r.knowledge_id == "tides" and r.knowledge_title == "Tides"
    assert r.content == chunk.content and r.matched_content == chunk.content
    assert (r.chunk_index, r.seq, r.start_at, r.end_at) == (0, 0, 0, len(chunk.content))
    assert r.metadata == {"topic": "physics"} and r.chunk_type == "text" and r.parent_chunk_id == ""
    assert r.knowledge_base_id == kb.id and r.knowledge_source == "dataset" and r.chunk_metadata is None
    assert r.to_dict()["knowledge_base_id"] == kb.id


async def test_match_count_truncates_and_filters_pass_through(small_kb):
    ws, kb, emb = small_kb
    hs = HybridSearcher(ws, lambda k: emb)
    assert len(await hs.search(kb.id, sp("the plants and the moon", match_count=2))) == 2
    res = await hs.search(kb.id, sp("the plants and the moon", match_count=10, knowledge_ids=["chess", "db"]))
    assert {r.knowledge_id for r in res} == {"chess", "db"}
    res = await hs.search(kb.id, sp("the plants and the moon", match_count=10, tag_ids=["culture"]))
    assert {r.knowledge_id for r in res} == {"chess", "wall"}
    _, tr = await hs.search_with_trace(kb.id, sp("moon", match_count=0))
    assert tr.match_count == 50 and tr.pool_size == 250
    assert {r[3] for r in tr.requests} == {250}


async def test_embedding_once_and_supplied_embedding(small_kb):
    ws, kb, emb = small_kb
    asked: list[str] = []

    def embedder_for(k):
        asked.append(k.id)
        return emb

    hs = HybridSearcher(ws, embedder_for)
    before = emb.calls
    await hs.search(kb.id, sp("lava"))
    assert emb.calls == before + 1 and asked == [kb.id]
    vec = emb.embed(["molten magma"])[0]
    no_embedder = HybridSearcher(ws, lambda k: None)
    res = await no_embedder.search(kb.id, sp("molten magma", query_embedding=vec))
    assert res[0].knowledge_id == "volcano"
    with pytest.raises(EmbeddingUnavailable, match="no embedder for knowledge base 'small'"):
        await no_embedder.search(kb.id, sp("molten magma"))


async def test_persistence_same_results_after_reopen(small_kb):
    ws, kb, emb = small_kb
    queries = ["chloroplast photosynthesizing magma", "长城 防御工程", "database readers", "magma"]
    first = [[r.to_dict() for r in await HybridSearcher(ws, lambda k: emb).search(kb.id, sp(q))] for q in queries]
    root = ws.root
    ws.close()
    with Workspace(root) as ws2:
        hs2 = HybridSearcher(ws2, lambda k: emb)
        again = [[r.to_dict() for r in await hs2.search("small", sp(q))] for q in queries]
    assert again == first and all(first)


async def test_a_search_sees_another_process_writes_made_before_it(small_kb):
    """A search reads the store's change token once (one_state); another process' delete made
    between two searches is seen by the second, and this process' own delete too."""
    ws, kb, emb = small_kb
    hs = HybridSearcher(ws, lambda k: emb)
    assert "volcano" in [r.knowledge_id for r in await hs.search(kb.id, sp("molten magma crust"))]
    with Workspace(ws.root) as other:
        assert other.delete_knowledge("small", "volcano") == 1
    assert "volcano" not in [r.knowledge_id for r in await hs.search(kb.id, sp("molten magma crust"))]
    kept = [r.knowledge_id for r in await hs.search(kb.id, sp("chloroplast sunlight"))]
    assert kept[0] == "photo"
    ws.delete_knowledge(kb, "photo")
    assert "photo" not in [r.knowledge_id for r in await hs.search(kb.id, sp("chloroplast sunlight"))]


async def test_a_search_makes_only_the_hits_it_returns(small_kb, monkeypatch):
    """The engine's hits are made when read: a search fuses both lists and makes the hits of its
    results only; reading the trace makes the rest, equal to the engine's eager lists."""
    import rag_lab.retrieval.engine as engine_module

    ws, kb, emb = small_kb
    made = []
    real = engine_module._hit
    monkeypatch.setattr(engine_module, "_hit", lambda row: made.append(row[0]) or real(row))
    res, tr = await HybridSearcher(ws, lambda k: emb).search_with_trace(kb.id, sp("chloroplast sunlight magma"))
    assert len(res) == 3 and len(tr.vector_hits) > 3 and len(tr.keyword_hits) > 0
    assert sorted(made) == sorted(r.id for r in res)
    vec = tr.paths()["vector"]
    eager = ws.engine().vector_search(
        emb.embed(["chloroplast sunlight magma"])[0], SearchScope([kb.id], tr.pool_size, 0.0)
    )
    assert (
        vec
        == [[h.chunk_id, h.knowledge_id, h.score] for h in eager]
        == [[h.chunk_id, h.knowledge_id, h.score] for h in tr.vector_hits]
    )


async def test_reingest_is_idempotent(small_kb, docs):
    ws, kb, emb = small_kb
    hs = HybridSearcher(ws, lambda k: emb)
    before = [r.to_dict() for r in await hs.search(kb.id, sp("magma database moon", match_count=6))]
    calls = emb.calls
    rep = ws.ingest_documents(kb, docs, emb, progress=False)
    assert sorted(rep.unchanged) == sorted(d["id"] for d in docs) and not rep.changed and emb.calls == calls
    assert [r.to_dict() for r in await hs.search(kb.id, sp("magma database moon", match_count=6))] == before
    # a changed document replaces its chunk: the new text is found, the old one is gone
    docs[1]["text"] = "Geysers spout boiling water and steam."
    rep = ws.ingest_documents(kb, docs, emb, progress=False)
    assert rep.updated == ["volcano"] and rep.chunks_removed == 1
    assert (await hs.search(kb.id, sp("geysers steam", disable_vector_match=True)))[0].knowledge_id == "volcano"
    assert await hs.search(kb.id, sp("magma crust", disable_vector_match=True)) == []


async def test_unknown_kb_lists_known_names(small_kb):
    ws, kb, emb = small_kb
    hs = HybridSearcher(ws, lambda k: emb)
    with pytest.raises(KnowledgeBaseNotFound) as ei:
        await hs.search("no-such-kb", sp("lava"))
    assert "'no-such-kb'" in str(ei.value) and "'small'" in str(ei.value)
    # primary outside the searched KBs is not found either (no fallback to the first)
    with pytest.raises(KnowledgeBaseNotFound, match="primary knowledge base 'other'"):
        await hs.search("other", sp("lava", knowledge_base_ids=[kb.id]))


async def test_mixed_embedding_keys_rejected(small_kb, embedder_cls):
    ws, kb, emb = small_kb
    other = embedder_cls(dimension=64)
    kb2 = ws.create_kb("other-space", other)
    kw_only = ws.create_kb("keywords-only", None)
    hs = HybridSearcher(ws, lambda k: emb if k.embedding_model_key == emb.model_key else other)
    with pytest.raises(MixedEmbeddingSpaces) as ei:
        await hs.search(kb.id, sp("lava", knowledge_base_ids=[kb.id, kb2.id]))
    assert emb.model_key in str(ei.value) and other.model_key in str(ei.value)
    # a KB without an embedding key does not count
    await hs.search(kb.id, sp("lava", knowledge_base_ids=[kb.id, kw_only.id]))
    # an embedder for the wrong space is refused too
    wrong = HybridSearcher(ws, lambda k: other)
    with pytest.raises(MixedEmbeddingSpaces, match="supplied for it"):
        await wrong.search(kb.id, sp("lava"))


async def test_several_kbs_one_call(small_kb):
    ws, kb, emb = small_kb
    kb2 = ws.create_kb("extra", emb, chunk_size=200, chunk_overlap=0)
    ws.ingest_documents(
        kb2,
        [
            {"id": "basalt", "title": "Basalt", "text": "Basalt forms when lava cools quickly."},
            {"id": "bread", "title": "Bread", "text": "Bread needs flour and yeast."},
            {"id": "tea", "title": "Tea", "text": "Green tea is steamed, black tea oxidised."},
        ],
        emb,
        progress=False,
    )
    hs = HybridSearcher(ws, lambda k: emb)
    res, tr = await hs.search_with_trace(kb.id, sp("lava", match_count=5, knowledge_base_ids=[kb.id, kb2.id]))
    # pool = max(5 * 5, 50) * 2 KBs
    assert tr.pool_size == 100 and tr.requests == [
        ("", "vector", (kb.id, kb2.id), 100),
        ("", "keywords", (kb.id, kb2.id), 100),
    ]
    assert {r.knowledge_id for r in res[:2]} == {"volcano", "basalt"}
    assert {r.knowledge_base_id for r in res} == {kb.id, kb2.id}


async def test_store_groups_fan_out_through_the_searcher(small_kb):
    ws, kb, emb = small_kb
    kb2 = ws.create_kb("grouped", emb, chunk_size=200, chunk_overlap=0)
    ws.ingest_documents(
        kb2, [{"id": "basalt", "title": "Basalt", "text": "Basalt forms when lava cools quickly."}], emb, progress=False
    )
    eng = ws.engine()
    hs = HybridSearcher(ws, lambda k: emb, engine_for=lambda k: (k.id, eng))
    res, tr = await hs.search_with_trace(kb.id, sp("lava", match_count=10, knowledge_base_ids=[kb.id, kb2.id]))
    assert [r[0] for r in tr.requests] == [kb.id, kb.id, kb2.id, kb2.id]
    # §5.10: each list is the concatenation of the groups' runs (group order here), not a merge
    assert [h.knowledge_base_id for h in tr.vector_hits] == [kb.id] * 6 + [kb2.id]
    basalt = next(r for r in res if r.knowledge_id == "basalt")
    assert basalt.score == pytest.approx((0.7 / 67) * 61, abs=1e-12)  # vector rank 7, no keyword hit


# -- FAQ -------------------------------------------------------------------------------------
FAQ = [
    FAQEntry(
        "How do I reset my password?",
        answers=["Use the reset link on the login page."],
        similar_questions=["forgot my password", "password reset not working"],
        negative_questions=["how do i reset my router?"],
    ),
    {
        "id": "router",
        "standard_question": "How do I restart my router?",
        "answers": ["Unplug it for 30 s."],
        "similar_questions": ["router reboot", "restart the wifi router"],
    },
    {
        "id": "ship",
        "standard_question": "How long does shipping take?",
        "answers": ["Three to five days."],
        "similar_questions": ["delivery time", "when will my parcel arrive"],
    },
    {
        "id": "refund",
        "standard_question": "How do I get a refund?",
        "answers": ["Ask support within 30 days."],
        "similar_questions": ["money back", "return an item for a refund"],
    },
]


@pytest.fixture
def faq_kb(small_kb):
    ws, _, emb = small_kb
    kb = ws.create_kb("faq", emb, kb_type="faq")
    ws.ingest_faq(kb, FAQ, emb, progress=False)
    return ws, kb, emb


async def test_faq_negative_question_filter(faq_kb):
    ws, kb, emb = faq_kb
    hs = HybridSearcher(ws, lambda k: emb)
    pw_chunk = next(c.id for c in ws.store.list_chunks(kb.id) if "password" in c.content)
    res, tr = await hs.search_with_trace(kb.id, sp("How do I reset my password?", match_count=10))
    assert res[0].id == pw_chunk and res[0].matched_content == "How do I reset my password?"
    assert res[0].score == pytest.approx(1.0, abs=1e-5) and res[0].chunk_type == "faq"
    assert res[0].chunk_metadata["negative_questions"] == ["how do i reset my router?"]
    assert [r[1] for r in tr.requests] == ["vector"]  # FAQ KBs get no keyword request
    res, tr = await hs.search_with_trace(kb.id, sp("  How do I RESET my router? ", match_count=10))
    assert pw_chunk not in {r.id for r in res} and tr.negative_filtered == [pw_chunk]
    assert len(res) == 3 and tr.faq_iterations == 0


async def test_faq_iterative_retrieval(faq_kb):
    ws, kb, emb = faq_kb
    params = P.with_changes(over_recall_factor=1, over_recall_min=1)
    hs = HybridSearcher(ws, lambda k: emb, params)
    pw_chunk = next(c.id for c in ws.store.list_chunks(kb.id) if "password" in c.content)
    # pool = 3; the top 3 question vectors are all of the password FAQ → 1 fused chunk < 3
    res, tr = await hs.search_with_trace(kb.id, sp("password reset forgot my password", match_count=3))
    assert tr.pool_size == 3 and len(tr.vector_hits) == 3
    assert {h.chunk_id for h in tr.vector_hits} == {pw_chunk}
    assert tr.faq_iterations == 1  # top_k = 9 already yields >= 3 chunks
    assert len(res) == 3 and res[0].id == pw_chunk
    assert [r.score for r in res] == sorted((r.score for r in res), reverse=True)
    q = emb.embed(["password reset forgot my password"])[0]
    best_q = emb.embed([res[0].matched_content])[0]
    assert res[0].score == pytest.approx(float(q @ best_q), abs=1e-5)  # raw cosine, not RRF
    # the negative question is applied inside the iteration as well
    res, tr = await hs.search_with_trace(kb.id, sp("how do i reset my router?", match_count=3))
    assert pw_chunk not in {r.id for r in res}


# -- fan-out ---------------------------------------------------------------------------------
def _group(key: str) -> StoreGroup:
    from rag_lab.retrieval.hybrid_search import RetrievalRequest

    return StoreGroup(key, engine=None, kbs=[], requests=[RetrievalRequest("keywords", [key], 5, 0.0, query="q")])


async def test_fan_out_order_concurrency_and_single_group():
    running = peak = 0

    async def retrieve(g: StoreGroup):
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01 * (5 - int(g.key)))  # later groups finish first
        running -= 1
        return [RetrieveResult([], "e", "keywords", None), RetrieveResult([], g.key, "vector", None)]

    out = await fan_out([_group(str(i)) for i in range(5)], 2, 5.0, retrieve)
    assert [r.engine_type for r in out if r.retriever_type == "vector"] == ["0", "1", "2", "3", "4"]
    assert peak == 2

    async def boom(g):
        raise RuntimeError("engine exploded")

    with pytest.raises(RuntimeError, match="engine exploded"):  # one group: called directly
        await fan_out([_group("0")], 4, 1.0, boom)
    assert await fan_out([], 4, 1.0, boom) == []


async def test_fan_out_all_or_nothing_and_timeout():
    async def one_fails(g):
        if g.key == "1":
            raise ConnectionError("store 1 down")
        await asyncio.sleep(0.01)
        return [RetrieveResult([], "e", "vector", None)]

    with pytest.raises(VectorStoreUnavailable) as ei:
        await fan_out([_group("0"), _group("1"), _group("2")], 4, 5.0, one_fails)
    assert isinstance(ei.value.__cause__, ConnectionError) and "store 1 down" not in str(ei.value)

    async def slow(g):
        await asyncio.sleep(5 if g.key == "1" else 0)
        return []

    with pytest.raises(VectorStoreUnavailable) as ei:
        await fan_out([_group("0"), _group("1")], 4, 0.05, slow)
    assert isinstance(ei.value.__cause__, (asyncio.TimeoutError, TimeoutError))


async def test_no_requests_returns_empty(small_kb):
    ws, kb, emb = small_kb
    hs = HybridSearcher(ws, lambda k: emb)
    res, tr = await hs.search_with_trace(kb.id, sp("lava", disable_vector_match=True, disable_keywords_match=True))
    assert res == [] and tr.requests == []


async def test_hydration_skips_disabled_and_missing(small_kb):
    ws, kb, emb = small_kb
    hs = HybridSearcher(ws, lambda k: emb)
    from rag_lab.retrieval.base import IndexWithScore

    c = f"{kb.id}:volcano#c0"
    hits = [
        IndexWithScore(id=x, content="m", chunk_id=x, knowledge_id="", knowledge_base_id=kb.id, score=1.0, match_type=0)
        for x in [c, "ghost", c]
    ]
    from rag_lab.retrieval.fusion import Ranked
    from rag_lab.retrieval.hybrid_search import HybridTrace

    tr = HybridTrace()
    out = hs._hydrate(Ranked.of(hits)[:], tr)
    assert [r.id for r in out] == [c]
    assert tr.skipped_in_hydration == [("ghost", "chunk not found"), (c, "duplicate chunk")]
    ws.store.set_chunks_enabled([c], False)
    tr = HybridTrace()
    assert hs._hydrate(Ranked.of(hits)[:1], tr) == [] and tr.skipped_in_hydration == [(c, "chunk not searchable")]
    ws.store.set_chunks_enabled([c], True)
    # the chunk without its document row is skipped
    chunks = ws.store.list_chunks(kb.id, "volcano")
    ws.store.delete_knowledge(kb.id, "volcano")
    ws.store.add_chunks(chunks)
    tr = HybridTrace()
    assert hs._hydrate(Ranked.of(hits)[:1], tr) == [] and tr.skipped_in_hydration == [(c, "document not found")]


def test_a_result_takes_every_field_from_its_chunk_and_document():
    """The result is built positionally (hydration.search_result): every field lands where the
    keyword form puts it, the metadata copied."""
    from rag_lab.knowledge.models import Chunk, Knowledge
    from rag_lab.retrieval.hybrid_search import chunk_to_search_result
    from rag_lab.types.search_result import SearchResult

    chunk = Chunk(
        id="c",
        knowledge_id="d",
        knowledge_base_id="kb",
        content="text",
        chunk_index=3,
        chunk_type="faq",
        start_at=5,
        end_at=9,
        parent_chunk_id="p",
        image_info="[img]",
        metadata={"m": [1]},
        content_revision=7,
        tag_id="t",
    )
    doc = Knowledge(
        id="d",
        knowledge_base_id="kb",
        title="Title",
        file_name="f.md",
        source="src",
        channel="ch",
        description="desc",
        metadata={"a": "x", "b": 2},
        custom_metadata={"z": 1, "a": "é"},
    )
    got = chunk_to_search_result(chunk, doc, 0.5, 1, "matched")
    assert got == SearchResult(
        id="c",
        content="text",
        content_revision=7,
        knowledge_id="d",
        chunk_index=3,
        seq=3,
        knowledge_title="Title",
        start_at=5,
        end_at=9,
        score=0.5,
        match_type=1,
        metadata={"a": "x", "b": "2"},
        chunk_type="faq",
        parent_chunk_id="p",
        image_info="[img]",
        knowledge_filename="f.md",
        knowledge_source="src",
        knowledge_channel="ch",
        knowledge_description="desc",
        knowledge_custom_metadata='{"a": "é", "z": 1}',
        chunk_metadata={"m": [1]},
        matched_content="matched",
        knowledge_base_id="kb",
    )
    assert got.chunk_metadata is not chunk.metadata and got.sub_chunk_id == [] and not got.content_rewritten
    plain = chunk_to_search_result(Chunk(id="c", knowledge_id="d", knowledge_base_id="kb", content=""), doc, 0.1, 0)
    assert plain.chunk_metadata is None and plain.matched_content == ""


async def test_empty_kb_returns_nothing(tmp_path, embedder):
    with Workspace(tmp_path / "empty") as ws:
        kb = ws.create_kb("nothing yet", embedder)
        res, tr = await HybridSearcher(ws, lambda k: embedder).search_with_trace(kb.id, sp("anything"))
        assert res == [] and [r[1] for r in tr.requests] == ["vector", "keywords"]


async def test_tenant_access_denied_looks_like_not_found_and_sharing_opens_it(small_kb):
    from rag_lab.retrieval.hybrid_search import can_view

    ws, kb, emb = small_kb
    hs = HybridSearcher(ws, lambda k: emb)
    assert kb.tenant_id == 1
    assert await hs.search(kb.id, SearchParams(query_text="lava", match_count=3, tenant_id=1))
    assert await hs.search(kb.id, SearchParams(query_text="lava", match_count=3, tenant_id=0))  # no check
    with pytest.raises(KnowledgeBaseNotFound):
        await hs.search(kb.id, SearchParams(query_text="lava", match_count=3, tenant_id=2))
    kb.metadata["shared_with"] = [2]
    ws.store.update_kb(kb)
    assert can_view(ws.get_kb(kb.id), 2) and not can_view(ws.get_kb(kb.id), 3)
    assert await hs.search(kb.id, SearchParams(query_text="lava", match_count=3, tenant_id=2))


async def test_results_are_the_same_with_the_kb_read_whole_or_row_by_row(small_kb, monkeypatch):
    """Search reading the KB's rows whole (the store holds them within its budget) or row by row
    gives the same results, and a write is seen at once (the rows are read again)."""
    from rag_lab.knowledge.kb_rows import KbRows

    ws, kb, emb = small_kb
    queries = ("chloroplast photosynthesizing magma", "moon tides chess", "crust")
    whole = HybridSearcher(ws, lambda k: emb)
    a = [await whole.search(kb.id, sp(q, match_count=6)) for q in queries]
    assert ws.store.kb_rows.held() > 0 and whole._rows._kbs[kb.id] is not None
    by_row = KbRows(ws.store)
    by_row.max_rows = 0
    monkeypatch.setattr(ws.store, "kb_rows", by_row)
    rows = HybridSearcher(ws, lambda k: emb)
    b = [await rows.search(kb.id, sp(q, match_count=6)) for q in queries]
    assert by_row.held() == 0 and rows._rows._kbs[kb.id] is None
    assert all(a) and [[r.to_dict() for r in x] for x in a] == [[r.to_dict() for r in x] for x in b]
    monkeypatch.undo()
    ws.store.set_chunks_enabled([f"{kb.id}:volcano#c0"], False)
    assert "volcano" not in {r.knowledge_id for r in await whole.search(kb.id, sp("magma crust", match_count=6))}
