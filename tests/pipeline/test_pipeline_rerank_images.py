"""Rerank with image hits (seed): OCR-rich images as text, pictorial ones kept by vector score."""

from __future__ import annotations

import json

from rag_lab.models.base import RerankScore
from rag_lab.pipeline.container import Services
from rag_lab.pipeline.plugin import ErrSearchNothing
from rag_lab.pipeline.plugins.rerank import PluginRerank
from rag_lab.types import ChatManage, EventType, PipelineParams, PipelineRequest, SearchResult


class ScriptedReranker:
    model_id = "scripted"

    def __init__(self, by_text: dict[str, float], image_scores: dict[str, float] | None = None):
        self.by_text, self.image_scores = by_text, image_scores
        self.supports_images = image_scores is not None
        self.image_calls: list[list[str]] = []

    async def rerank(self, query, passages):
        out = [
            RerankScore(i, next((v for k, v in self.by_text.items() if k in p), 0.0)) for i, p in enumerate(passages)
        ]
        return sorted(out, key=lambda s: -s.relevance_score)

    async def rerank_images(self, query, urls):
        self.image_calls.append(list(urls))
        if self.image_scores == {}:
            raise RuntimeError("vision endpoint down")
        return [RerankScore(i, self.image_scores.get(u, 0.0)) for i, u in enumerate(urls)]


def _image(id_, vector_score, caption, ocr="", url=None):
    info = json.dumps([{"url": url or f"https://img/{id_}.png", "caption": caption, "ocr_text": ocr}])
    return SearchResult(
        id=id_, knowledge_id=f"doc-{id_}", chunk_type="image_vector", content="", image_info=info, score=vector_score
    )


def _chat(results, threshold=0.5, vector_threshold=0.2):
    p = PipelineParams()
    req = PipelineRequest.from_params(
        p,
        query="red bridge",
        rerank_model_id="m",
        rerank_threshold=threshold,
        vector_threshold=vector_threshold,
        rerank_top_k=5,
    )
    chat = ChatManage(request=req)
    chat.state.rewrite_query = "red bridge"
    chat.state.search_result = results
    return chat


async def _run(chat, model):
    async def nxt():
        return None

    return await PluginRerank(Services(rerank_models={"m": model})).on_event(EventType.CHUNK_RERANK, chat, nxt)


async def test_pictorial_hits_kept_by_vector_score_after_text_results():
    results = [
        SearchResult(id="t1", knowledge_id="d1", content="the red bridge at dawn", score=0.7),
        _image("i1", 0.30, "a bridge"),
        _image("i2", 0.60, "painted steel"),
        _image("i3", 0.45, "river"),
        _image("i4", 0.10, "blurry"),  # below max(vector threshold, 0.25)
    ]
    chat = _chat(results)
    assert await _run(chat, ScriptedReranker({"red bridge": 0.9})) is None
    ids = [r.id for r in chat.state.rerank_result]
    assert ids == ["t1", "i2", "i3"]  # at most 2, by vector score
    assert all(r.metadata["kept_by"] == "image_vector" for r in chat.state.rerank_result[1:])
    assert chat.state.diagnostics["rerank"]["images_kept"] == 2


async def test_images_returned_even_when_no_text_passes():
    chat = _chat([SearchResult(id="t1", content="unrelated text", score=0.9), _image("i1", 0.5, "x")], threshold=0.95)
    assert await _run(chat, ScriptedReranker({})) is None
    assert [r.id for r in chat.state.rerank_result] == ["i1"]


async def test_ocr_rich_images_are_ranked_as_text_only():
    long_ocr = "timetable " * 30  # 300 chars >= 200
    chat = _chat([_image("i1", 0.9, "sign", ocr=long_ocr)], threshold=0.95)
    model = ScriptedReranker({})
    # rejected by the text model and not pictorial: nothing kept, top-1 fallback floor 0.15 not met
    assert await _run(chat, model) is ErrSearchNothing


async def test_vision_reranker_scores_the_image_and_falls_back_on_error():
    chat = _chat([_image("i1", 0.1, "x", url="https://img/a.png")], threshold=0.5)
    model = ScriptedReranker({}, image_scores={"https://img/a.png": 0.8})
    assert await _run(chat, model) is None
    assert model.image_calls == [["https://img/a.png"]]
    r = chat.state.rerank_result[0]
    assert r.metadata["model_score"] == "0.8000" and "kept_by" not in r.metadata
    assert chat.state.diagnostics["rerank"]["images_scored"] == 1

    chat = _chat([_image("i1", 0.1, "x")], threshold=0.5)
    assert await _run(chat, ScriptedReranker({}, image_scores={})) is ErrSearchNothing  # text score stands


async def test_a_pictorial_faq_hit_kept_by_vector_score_takes_the_faq_boost():
    """An image hit that is an FAQ entry, kept by its vector score, is scored like a ranked one:
    its composite times the FAQ boost when FAQ priority is on."""
    faq = SearchResult(
        id="f1",
        knowledge_id="doc-f1",
        chunk_type="faq",
        content="",
        image_info=json.dumps([{"url": "https://img/f1.png", "caption": "a chart"}]),
        metadata={"retrieved_by": "image_vector"},
        score=0.6,
    )
    text = SearchResult(id="t1", knowledge_id="d1", content="the red bridge at dawn", score=0.7)
    chat = _chat([text, faq])
    chat.request.faq_priority_enabled, chat.request.faq_score_boost = True, 1.5
    assert await _run(chat, ScriptedReranker({"red bridge": 0.9})) is None
    kept = chat.state.rerank_result[1]
    assert (kept.id, kept.metadata["kept_by"], kept.metadata["faq_boosted"]) == ("f1", "image_vector", "true")
    composite = 0.6 * 0.0 + 0.3 * 0.6 + 0.1 * 1.0  # the model gave it nothing; its base is its vector score
    assert kept.score == composite * 1.5
    assert kept.metadata["faq_original_score"] == kept.metadata["composite_score"] == f"{composite:.4f}"
