"""Three rules of the seed the stages follow: merge cuts the unranked search results to
``rerank_top_k``, query expansion only searches knowledge bases that search keywords, and an
image result's text parent is asked for its scoped image info whether or not it was loaded."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from rag_lab.pipeline.container import Services
from rag_lab.pipeline.plugins.merge import merge_input, resolve_parent_chunks
from rag_lab.pipeline.plugins.search import PluginSearch
from rag_lab.types import ChatManage, PipelineParams, PipelineRequest, SearchResult, SearchTarget
from rag_lab.types.events import EventType


def _r(rid: str, score: float) -> SearchResult:
    return SearchResult(id=rid, content=rid, score=score)


def test_merge_input_cuts_the_search_results_to_rerank_top_k() -> None:
    search = [_r("a", 0.2), _r("b", 0.9), _r("c", 0.5), _r("d", 0.9)]
    log: list[dict[str, Any]] = []
    got = merge_input([], search, 2, log)
    assert [r.id for r in got] == ["b", "d"]  # by score, ties in input order, then cut
    assert log == [{"step": "input", "source": "search_result", "ids": ["b", "d"]}]
    assert [r.id for r in merge_input([], search, 0, [])] == ["b", "d", "c", "a"]  # 0: no cut
    got[0].content = "changed"
    assert search[1].content == "b"  # copies: the stage's input is never changed


def test_merge_input_takes_the_whole_rerank_result() -> None:
    rerank = [_r("x", 0.1), _r("y", 0.8), _r("z", 0.5)]
    log: list[dict[str, Any]] = []
    got = merge_input(rerank, [_r("s", 1.0)], 2, log)
    assert [r.id for r in got] == ["x", "y", "z"]  # the rerank's order, never cut here
    assert log[0]["source"] == "rerank_result"


class _Searcher:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def with_params(self, p: PipelineParams) -> _Searcher:
        return self

    async def search(self, kb: str, sp: Any) -> list[SearchResult]:
        self.calls.append((kb, sp))
        return [_r(f"{kb}-{len(self.calls)}", 0.5)] if sp.disable_vector_match else []


class _Workspace:
    def __init__(self, keyword: dict[str, bool]) -> None:
        self.keyword = keyword

    def get_kb(self, kb_id: str) -> Any:
        return SimpleNamespace(
            id=kb_id,
            name=kb_id,
            embedding_model_key="",
            type="document",
            keyword_enabled=self.keyword[kb_id],
            vector_enabled=True,
        )


def _search(keyword: dict[str, bool]) -> tuple[ChatManage, _Searcher]:
    p = PipelineParams().with_changes(enable_query_expansion=True, embedding_top_k=5)
    targets = [SearchTarget(knowledge_base_id=k) for k in keyword]
    req = PipelineRequest.from_params(p, query="red bridge", knowledge_base_ids=list(keyword), search_targets=targets)
    chat = ChatManage(request=req)
    chat.state.rewrite_query = "red bridge at dawn"
    searcher = _Searcher()

    async def nxt() -> None:
        return None

    plugin = PluginSearch(Services(workspace=_Workspace(keyword), searcher=searcher))
    asyncio.run(plugin.on_event(EventType.CHUNK_SEARCH, chat, nxt))
    return chat, searcher


def test_no_query_expansion_when_no_knowledge_base_searches_keywords() -> None:
    chat, searcher = _search({"kb": False})
    assert "query_expansion" not in chat.state.diagnostics
    assert not any(sp.disable_vector_match for _, sp in searcher.calls)  # no keyword-only variant search


def test_query_expansion_searches_only_the_keyword_knowledge_bases() -> None:
    chat, searcher = _search({"vec": False, "kw": True})
    expansion = [kb for kb, sp in searcher.calls if sp.disable_vector_match]
    assert expansion and set(expansion) == {"kw"}
    assert chat.state.diagnostics["query_expansion"].to_dict()["added"] == len(expansion)


class _Store:
    """Chunks by id; records the ids whose image children are asked for."""

    def __init__(self, chunks: dict[str, SimpleNamespace]) -> None:
        self.chunks = chunks
        self.children_of: list[list[str]] = []

    def get_chunks(self, ids: list[str]) -> dict[str, SimpleNamespace]:
        return {i: self.chunks[i] for i in ids if i in self.chunks}

    def get_children(self, ids: list[str]) -> list[Any]:
        self.children_of.append(list(ids))
        return []


def test_an_image_results_text_parent_is_asked_for_image_info_even_when_not_loaded() -> None:
    text_parent = SimpleNamespace(id="T1", chunk_type="text", parent_chunk_id="", content="body", chunk_index=0)
    store = _Store({"T1": text_parent})
    images = [
        SearchResult(id="I1", chunk_type="image_ocr", parent_chunk_id="T1", content="ocr"),
        SearchResult(id="I2", chunk_type="image_caption", parent_chunk_id="T9", content="cap"),  # T9 not in the store
        SearchResult(id="I3", chunk_type="image_caption", parent_chunk_id="T1", content="cap"),
    ]
    resolve_parent_chunks(images, store, [])
    asked = [i for call in store.children_of for i in call]
    assert asked[:2] == ["T1", "T9"] and asked.count("T1") == 1  # each parent once, loaded or not
