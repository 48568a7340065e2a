"""WikiBoost (middle layer of chunk_rerank): after ``next()``, wiki pages ×1.3 when a wiki KB is
in scope, then a stable re-sort (spec §4.6.6)."""

from __future__ import annotations

from rag_lab.pipeline.contracts import StageContract
from rag_lab.pipeline.plugin import NextFn, PluginError
from rag_lab.pipeline.plugins.base import StagePlugin
from rag_lab.reranking.composite import boosted_order
from rag_lab.types.chat_manage import ChatManage
from rag_lab.types.events import EventType
from rag_lab.types.search_result import SearchResult


class PluginWikiBoost(StagePlugin):
    events = (EventType.CHUNK_RERANK,)
    contract = StageContract(
        reads=("request.search_targets", "state.rerank_result"),
        writes=("state.rerank_result",),
        params=("wiki_boost_factor",),
        kb=("wiki_enabled",),
    )

    async def on_event(self, event: EventType, chat: ChatManage, next: NextFn) -> PluginError | None:
        err = await next()
        results = chat.state.rerank_result
        if not any(r.chunk_type == "wiki_page" for r in results):
            return err
        ws = self.services.workspace
        wiki_in_scope = False
        for t in chat.request.search_targets:
            try:
                kb = ws.get_kb(t.knowledge_base_id) if ws is not None else None
            except Exception:
                kb = None
            if kb is not None and kb.wiki_enabled:
                wiki_in_scope = True
                break
        if not wiki_in_scope:
            return err
        factor = chat.request.params.wiki_boost_factor
        scores, order = boosted_order([r.score for r in results], [wiki_factor(r, factor) for r in results])
        for r, score in zip(results, scores):
            r.score = score
            if r.chunk_type == "wiki_page":
                r.metadata["wiki_boosted"] = "true"
        results[:] = [results[i] for i in order]
        return err


def wiki_factor(r: SearchResult, factor: float) -> float:
    """The boost of one result: ``factor`` for a wiki page, 1 otherwise."""
    return factor if r.chunk_type == "wiki_page" else 1.0
