from __future__ import annotations

import asyncio
from types import SimpleNamespace

from rag_lab.pipeline.container import Services
from rag_lab.pipeline.plugin import ErrSearch
from rag_lab.pipeline.plugins.search import PluginSearch
from rag_lab.types import ChatManage, EventType, PipelineParams, PipelineRequest, SearchResult, SearchTarget


class Searcher:
    def __init__(self, delay):
        self.delay = delay

    def with_params(self, p):
        return self

    async def search(self, primary, sp):
        await asyncio.sleep(self.delay)
        return [SearchResult(id="c1", content="x", score=0.5)]


class Workspace:
    def get_kb(self, kb_id):
        return SimpleNamespace(
            id=kb_id, name=kb_id, embedding_model_key="", type="document", keyword_enabled=True, vector_enabled=False
        )


def _chat(timeout):
    p = PipelineParams().with_changes(search_timeout_s=timeout, enable_query_expansion=False)
    req = PipelineRequest.from_params(
        p, query="q", knowledge_base_ids=["kb"], search_targets=[SearchTarget(knowledge_base_id="kb")]
    )
    chat = ChatManage(request=req)
    chat.state.rewrite_query = "q"
    return chat


async def _next():
    return None


async def test_a_slow_search_call_times_out_as_a_search_error():
    plugin = PluginSearch(Services(workspace=Workspace(), searcher=Searcher(delay=1.0)))
    err = await plugin.on_event(EventType.CHUNK_SEARCH, _chat(0.1), _next)
    assert (
        err is not None
        and err.error_type == ErrSearch.error_type
        and "did not finish within search_timeout_s=0.1 s" in str(err)
    )


async def test_within_the_timeout_results_pass():
    chat = _chat(5.0)
    plugin = PluginSearch(Services(workspace=Workspace(), searcher=Searcher(delay=0.0)))
    assert await plugin.on_event(EventType.CHUNK_SEARCH, chat, _next) is None
    assert [r.id for r in chat.state.search_result] == ["c1"]


class LocalSearcher(Searcher):
    """A searcher whose whole search runs in this process (FAISS + BM25, the ONNX embedder)."""

    def runs_in_process(self, primary, sp):
        return True


async def test_an_in_process_search_is_never_cut_off():
    chat = _chat(0.1)
    plugin = PluginSearch(Services(workspace=Workspace(), searcher=LocalSearcher(delay=0.3)))
    assert await plugin.on_event(EventType.CHUNK_SEARCH, chat, _next) is None
    assert [r.id for r in chat.state.search_result] == ["c1"]
