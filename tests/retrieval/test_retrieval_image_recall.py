"""Image recall in HybridSearch (seed §5 step 5) with a real, tiny joint text/image embedder."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.knowledge.images import ingest_images
from rag_lab.knowledge.workspace import Workspace
from rag_lab.models.base import RerankScore
from rag_lab.pipeline.container import Services
from rag_lab.pipeline.plugins.rerank import PluginRerank
from rag_lab.reranking.image import image_url, is_image_hit
from rag_lab.retrieval.base import IndexWithScore, SearchParams
from rag_lab.retrieval.hybrid_search import HybridSearcher
from rag_lab.retrieval.image_recall import (
    filter_image_hits,
    image_index_dir,
    image_threshold,
    image_top_k,
    recall_images,
)
from rag_lab.retrieval.versioned import current_dir
from rag_lab.types import ChatManage, EventType, PipelineParams, PipelineRequest
from tests.knowledge.hash_embedder import HashEmbedder
from tests.retrieval.joint_embedder import JointHashEmbedder, write_png

P = PipelineParams()


@pytest.fixture
def setup(tmp_path):
    """(ws, kb, text embedder, image embedder): 3 text docs and 2 images (captions unrelated to
    the pictures' words, so only the image vector can find them)."""
    emb, img = HashEmbedder(), JointHashEmbedder()
    ws = Workspace(tmp_path / "ws")
    kb = ws.create_kb("mixed", emb, chunk_size=200, chunk_overlap=20)
    ws.ingest_documents(
        kb,
        [
            {"id": "bridge", "title": "Bridges", "text": "Suspension bridges hang their deck from steel cables."},
            {"id": "bread", "title": "Bread", "text": "Sourdough rises with wild yeast."},
            {"id": "tides", "title": "Tides", "text": "Tides follow the moon."},
        ],
        emb,
        progress=False,
    )
    pics = tmp_path / "pics"
    pics.mkdir()
    items = [
        {
            "path": str(write_png(pics / "red.png", "red bridge river")),
            "caption": "figure one",
            "ocr_text": "",
            "url": "https://img.example/red.png",
        },
        str(write_png(pics / "cat.png", "sleeping cat sofa")),
    ]
    report = ingest_images(ws, kb, items, img, captions={"cat.png": "figure two"})
    assert report.added == ["red.png", "cat.png"] and report.vectors_added == 2
    kb = ws.get_kb(kb.id)
    yield ws, kb, emb, img
    ws.close()


def searcher(ws, emb, img, params=P):
    return HybridSearcher(ws, lambda kb: emb, params, image_embedder_for=(lambda kb: img) if img else None)


def sp(query, **kw):
    kw.setdefault("match_count", 5)
    kw.setdefault("vector_threshold", 0.5)
    return SearchParams(query_text=query, **kw)


# -- ingestion -------------------------------------------------------------------------------
def test_ingestion_marks_kb_and_stores_image_chunks(setup):
    ws, kb, _, img = setup
    assert kb.metadata["image_vector_enabled"] is True
    assert kb.metadata["image_embedding_model_key"] == "test-joint-hash-512|local"
    chunks = {c.id: c for c in ws.store.list_chunks(kb.id) if c.chunk_type == "image_caption"}
    red = chunks[f"{kb.id}:red.png#img"]
    assert red.content == "figure one"
    assert json.loads(red.image_info) == [
        {"url": "https://img.example/red.png", "caption": "figure one", "ocr_text": ""}
    ]
    cat = chunks[f"{kb.id}:cat.png#img"]
    assert cat.content == "figure two" and json.loads(cat.image_info)[0]["url"].endswith("pics/cat.png")
    assert (current_dir(image_index_dir(ws, kb.id))[0] / "vectors.faiss").is_file()
    # idempotent: nothing re-embedded the second time
    calls = img.image_calls
    again = ingest_images(ws, kb, [str(Path(json.loads(cat.image_info)[0]["url"]))], img, captions=["figure two"])
    assert again.unchanged == ["cat.png"] and img.image_calls == calls


# -- recall through the hybrid search --------------------------------------------------------
async def test_image_hit_recalled_and_marked(setup):
    ws, kb, emb, img = setup
    results, trace = await searcher(ws, emb, img).search_with_trace(kb.id, sp("red bridge"))
    by_id = {r.id: r for r in results}
    red = by_id[f"{kb.id}:red.png#img"]
    assert red.metadata["retrieved_by"] == "image_vector" and is_image_hit(red)
    assert image_url(red) == "https://img.example/red.png"
    assert f"{kb.id}:cat.png#img" not in by_id  # no shared word → cosine 0 < image threshold
    assert trace.image_kb_ids == [kb.id]
    assert trace.pool_size == 50 and trace.image_requests == [75]  # ceil(50 × 1.5)
    # text results are untouched by the mark
    assert all("retrieved_by" not in r.metadata for r in results if r.chunk_type == "text")


async def test_without_image_embedder_behaviour_is_unchanged(setup):
    ws, kb, emb, _ = setup
    results, trace = await searcher(ws, emb, None).search_with_trace(kb.id, sp("red bridge"))
    assert all(r.chunk_type == "text" for r in results) and trace.image_requests == []


async def test_image_threshold_is_min_of_vector_and_image_thresholds(setup):
    ws, kb, emb, img = setup
    # "red bridge" vs the picture's "red bridge river": cosine 2/sqrt(2*3) = 0.816;
    # "red cat" vs it: 1/sqrt(2*3) = 0.408 ; vs "sleeping cat sofa": 0.408
    assert image_threshold(0.5, P) == 0.1 and image_threshold(0.05, P) == 0.05
    results, trace = await searcher(ws, emb, img).search_with_trace(kb.id, sp("red cat", vector_threshold=0.5))
    img_ids = sorted(h.chunk_id for h in trace.image_hits)
    assert img_ids == [f"{kb.id}:cat.png#img", f"{kb.id}:red.png#img"]  # 0.408 >= min(0.5, 0.1)
    assert all(abs(h.score - 1 / math.sqrt(6)) < 1e-5 for h in trace.image_hits)
    assert all(h.score >= 0.5 for h in trace.vector_hits if h.source_type != "image")
    # image_vector_threshold raised above the scores: the image hits go
    p = P.with_changes(image_vector_threshold=0.45)
    _, trace = await searcher(ws, emb, img, p).search_with_trace(kb.id, sp("red cat", vector_threshold=0.5))
    assert trace.image_hits == []


async def test_kb_without_image_vectors_gets_no_image_hits(setup, tmp_path):
    ws, kb, emb, img = setup
    plain = ws.create_kb("plain", emb, chunk_size=200, chunk_overlap=20)
    ws.ingest_documents(plain, [{"id": "p", "text": "a red bridge over a river"}], emb, progress=False)
    results, trace = await searcher(ws, emb, img).search_with_trace(plain.id, sp("red bridge"))
    assert trace.image_kb_ids == [] and trace.image_requests == [] and results
    assert all("retrieved_by" not in r.metadata for r in results)
    # both KBs in scope: only the image KB is asked, and only its image comes back
    _, trace = await searcher(ws, emb, img).search_with_trace(
        kb.id, sp("red bridge", knowledge_base_ids=[kb.id, plain.id])
    )
    assert trace.image_kb_ids == [kb.id] and {h.knowledge_base_id for h in trace.image_hits} == {kb.id}


async def test_corrupt_image_index_is_best_effort(setup):
    ws, kb, emb, img = setup
    good, _ = await searcher(ws, emb, img).search_with_trace(kb.id, sp("steel cables bridge"))
    d = image_index_dir(ws, kb.id)
    (current_dir(d)[0] / "vectors.faiss").write_bytes(b"not a faiss index")
    (current_dir(d)[0] / "ids.json").write_text('{"dimension": 512, "next_id": 9, "entries": []}')  # new stamp: reload
    results, trace = await searcher(ws, emb, img).search_with_trace(kb.id, sp("steel cables bridge"))
    assert trace.image_hits == [] and trace.image_errors and "cannot read" in trace.image_errors[0]
    text = [r.id for r in good if r.chunk_type == "text"]
    assert [r.id for r in results if r.chunk_type == "text"] == text and text
    shutil.rmtree(d)  # index missing: an empty index, no images, no error
    _, trace = await searcher(ws, emb, img).search_with_trace(kb.id, sp("steel cables bridge"))
    assert trace.image_hits == []


async def test_failing_image_embedder_leaves_text_results(setup):
    ws, kb, emb, img = setup

    class Broken(JointHashEmbedder):
        def embed(self, texts):
            raise RuntimeError("clip server down")

    results, trace = await searcher(ws, emb, Broken()).search_with_trace(kb.id, sp("steel cables bridge"))
    assert [r.knowledge_id for r in results] and "clip server down" in trace.image_errors[0]


# -- top-k and the refill loop ---------------------------------------------------------------
@pytest.mark.parametrize("pool, expected", [(50, 75), (51, 77), (1, 2), (334, 500), (500, 500), (100, 150)])
def test_image_top_k(pool, expected):
    assert image_top_k(pool, P) == expected


@settings(max_examples=100)
@given(pool=st.integers(1, 2000), factor=st.floats(1.0, 10.0), cap=st.integers(1, 5000))
def test_image_top_k_property(pool, factor, cap):
    p = P.with_changes(image_recall_top_k_factor=factor, retrieval_pool_max=cap)
    assert image_top_k(pool, p) == max(1, min(math.ceil(pool * factor), cap))


def _row(cid, score, kb="kbI", image=True, keyword=False, enabled=True):
    return IndexWithScore(
        id=cid,
        content="",
        chunk_id=cid,
        knowledge_id=cid,
        knowledge_base_id=kb,
        score=score,
        match_type=1 if keyword else 0,
        source_type="image" if image else "chunk",
        is_enabled=enabled,
    )


def test_filter_image_hits_rules():
    rows = [
        _row("i1", 0.2),
        _row("i2", 0.05),
        _row("t1", 0.6, image=False),
        _row("t2", 0.3, image=False),
        _row("ik", 0.9, keyword=True),
        _row("ix", 0.9, kb="kbPlain"),
        _row("id", 0.9, enabled=False),
    ]
    f = filter_image_hits(rows, ["kbI"], vector_threshold=0.5, image_thr=0.1)
    assert [h.chunk_id for h in f.kept] == ["i1", "t1"]
    assert f.dropped_images == 3 and f.below_threshold == 2


@settings(max_examples=200)
@given(
    st.lists(st.tuples(st.floats(0, 1), st.booleans(), st.booleans(), st.booleans(), st.booleans()), max_size=30),
    st.floats(0, 1),
    st.floats(0, 1),
)
def test_filter_image_hits_properties(specs, vt, it):
    rows = [
        _row(f"c{i}", s, kb="kbI" if inkb else "kbP", image=im, keyword=kw)
        for i, (s, im, kw, inkb, _) in enumerate(specs)
    ]
    f = filter_image_hits(rows, ["kbI"], vt, it)
    assert len(f.kept) + f.dropped_images + f.below_threshold == len(rows)
    for h in f.kept:
        if h.source_type == "image":
            assert h.score >= it and h.match_type == 0 and h.knowledge_base_id == "kbI"
        else:
            assert h.score >= vt
    assert [h.chunk_id for h in f.kept] == [h.chunk_id for h in rows if h in f.kept]


async def test_refill_loop_doubles_top_k_on_a_pool_of_50():
    calls = []

    async def search(ids, emb, top_k, thr):  # a store whose best 400 rows are stale images
        calls.append((top_k, thr))
        rows = [_row(f"s{i:03d}", 0.9, enabled=False) for i in range(400)]
        rows += [_row(f"g{i:03d}", 0.5) for i in range(20)]
        return rows[:top_k]

    out = await recall_images(search, ["kbI"], np.zeros(4), 50, 0.3, P)
    assert [c[0] for c in calls] == out.requests == [75, 150, 300, 500]
    assert all(c[1] == pytest.approx(0.1) for c in calls)
    assert [h.chunk_id for h in out.hits] == [f"g{i:03d}" for i in range(20)]
    calls.clear()
    out = await recall_images(search, ["kbI"], np.zeros(4), 50, 0.3, P.with_changes(image_recall_max_requests=2))
    assert out.requests == [75, 150] and out.hits == [] and out.dropped_images == 150


async def test_no_refill_when_pool_not_full_or_nothing_dropped():
    async def few(ids, emb, top_k, thr):
        return [_row("a", 0.5, enabled=False), _row("b", 0.4)]

    assert (await recall_images(few, ["kbI"], np.zeros(4), 50, 0.3, P)).requests == [75]

    async def full_clean(ids, emb, top_k, thr):
        return [_row(f"r{i}", 0.5) for i in range(top_k)]

    assert (await recall_images(full_clean, ["kbI"], np.zeros(4), 50, 0.3, P)).requests == [75]

    async def failing_second(ids, emb, top_k, thr):
        if top_k > 75:
            raise OSError("store went away")
        return [_row(f"s{i}", 0.9, enabled=False) for i in range(74)] + [_row("ok", 0.5)]

    out = await recall_images(failing_second, ["kbI"], np.zeros(4), 50, 0.3, P)
    assert out.requests == [75, 150] and [h.chunk_id for h in out.hits] == ["ok"] and "store went away" in out.error


async def test_refill_with_disabled_images_in_a_real_index(tmp_path):
    emb, img = HashEmbedder(), JointHashEmbedder()
    ws = Workspace(tmp_path / "ws")
    kb = ws.create_kb("pics", emb, chunk_size=200, chunk_overlap=20)
    pics = tmp_path / "p"
    pics.mkdir()
    items = [str(write_png(pics / f"a{i:03d}.png", "lighthouse")) for i in range(80)]
    items += [str(write_png(pics / f"b{i:03d}.png", "lighthouse storm")) for i in range(5)]
    ingest_images(ws, kb, items, img)
    ws.store.set_chunks_enabled([f"{kb.id}:a{i:03d}.png#img" for i in range(80)], False)
    s = searcher(ws, emb, img, P.with_changes(over_recall_min=10, over_recall_factor=1))
    results, trace = await s.search_with_trace(kb.id, sp("lighthouse", match_count=10))
    assert trace.pool_size == 10 and trace.image_requests == [15, 30, 60, 120]
    assert sorted(r.knowledge_id for r in results) == [f"b{i:03d}.png" for i in range(5)]
    assert all(r.metadata["retrieved_by"] == "image_vector" for r in results)
    ws.close()


# -- the rerank stage sees an image hit ------------------------------------------------------
class ScriptedReranker:
    model_id = "scripted"
    supports_images = False

    def __init__(self, by_text: dict[str, float]):
        self.by_text = by_text

    async def rerank(self, query, passages):
        out = [
            RerankScore(i, next((v for k, v in self.by_text.items() if k in p), 0.0)) for i, p in enumerate(passages)
        ]
        return sorted(out, key=lambda s: -s.relevance_score)


async def test_image_hit_kept_by_image_vector_in_rerank(setup):
    ws, kb, emb, img = setup
    results = await searcher(ws, emb, img).search(kb.id, sp("red bridge", vector_threshold=0.2))
    req = PipelineRequest.from_params(
        P, query="red bridge", rerank_model_id="m", rerank_threshold=0.5, vector_threshold=0.2, rerank_top_k=5
    )
    chat = ChatManage(request=req)
    chat.state.rewrite_query = "red bridge"
    chat.state.search_result = results

    async def nxt():
        return None

    # the text reranker likes the bridge text and rejects the caption "figure one"
    out = await PluginRerank(Services(rerank_models={"m": ScriptedReranker({"Suspension": 0.9})})).on_event(
        EventType.CHUNK_RERANK, chat, nxt
    )
    assert out is None
    ranked = chat.state.rerank_result
    assert ranked[0].knowledge_id == "bridge"
    red = [r for r in ranked if r.id == f"{kb.id}:red.png#img"]
    assert red and red[0].metadata["kept_by"] == "image_vector"
