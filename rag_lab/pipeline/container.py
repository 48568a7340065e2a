"""Services the stages use, and the default plugin registration (the seed's container order).

Registration order is chain order for plugins sharing an event (spec §2.1): Rerank before
WikiBoost before MemoryAffinity on ``chunk_rerank``; QueryUnderstand before ExtractEntity.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, Unpack

from rag_lab.models.base import ChatModel, Embedder, Reranker
from rag_lab.pipeline.plugin import EventManager, Plugin
from rag_lab.prompts.templates import PromptTemplates
from rag_lab.session.store import MessageFields

if TYPE_CHECKING:
    from rag_lab.knowledge.graph import GraphData, NameSpace
    from rag_lab.knowledge.models import KnowledgeBase
    from rag_lab.knowledge.store import KnowledgeStore
    from rag_lab.memory.notes import Recall
    from rag_lab.retrieval.base import SearchParams
    from rag_lab.searchutil.conversion import WebSearchResult
    from rag_lab.session.sqlite_schema import Session
    from rag_lab.session.store import Message
    from rag_lab.types.params import PipelineParams
    from rag_lab.types.search_result import SearchResult


class ModelNotFound(LookupError):
    pass


# -- what the stages need from each service (the real classes are structural matches) ------------
class SearcherService(Protocol):
    """HybridSearch (:class:`~rag_lab.retrieval.hybrid_search.HybridSearcher`, or the stage cache's
    CachingSearcher around it)."""

    @property
    def params(self) -> PipelineParams: ...

    def with_params(self, params: PipelineParams) -> Any: ...

    async def search(self, primary_kb_id: str, sp: SearchParams) -> list[SearchResult]: ...


class WorkspaceService(Protocol):
    """Knowledge bases and their store (:class:`~rag_lab.knowledge.workspace.Workspace`)."""

    @property
    def store(self) -> KnowledgeStore: ...

    def get_kb(self, kb: str | KnowledgeBase) -> KnowledgeBase: ...


class MessageService(Protocol):
    """Session messages (:class:`~rag_lab.session.sqlite_store.SQLiteSessionStore`)."""

    def get_recent_messages(self, session_id: str, limit: int) -> list[Message]: ...

    def update_message(self, session_id: str, message_id: str, **fields: object) -> None: ...

    def add_message(
        self, session_id: str, role: str, content: str, request_id: str, **fields: Unpack[MessageFields]
    ) -> Message: ...

    def insert_message(
        self, session_id: str, role: str, content: str, request_id: str, **fields: Unpack[MessageFields]
    ) -> str: ...

    def ensure_session(self, session_id: str, user_id: str, **fields: object) -> Session: ...


class MemoryService(Protocol):
    """Long-term memory (:class:`~rag_lab.memory.store.MemoryStore`)."""

    def recall(self, user_id: str, query: str) -> Recall: ...

    def document_affinity(self, user_id: str, knowledge_ids: Sequence[str]) -> Mapping[str, int]: ...


class WebSearchService(Protocol):
    """A web search provider (:mod:`rag_lab.web.providers`)."""

    async def search(self, query: str, max_results: int = ...) -> list[WebSearchResult]: ...


class WebFetcherService(Protocol):
    """The page fetcher of WEB_FETCH (:class:`~rag_lab.web.fetch.PageFetcher`)."""

    async def fetch(self, url: str) -> str: ...


class GraphService(Protocol):
    """The knowledge graph store (:class:`~rag_lab.knowledge.graph.GraphStore`)."""

    def search_nodes(self, ns: NameSpace, names: Sequence[str], partial: bool = True) -> GraphData: ...


class SpanService(Protocol):
    """One open span (:mod:`rag_lab.observability.tracing`'s ``_OtelSpan``, or its null span)."""

    def set_attribute(self, key: str, value: object) -> None: ...

    def set_attributes(self, attrs: Mapping[str, object]) -> None: ...

    def record_error(self, kind: str, message: str) -> None: ...


class TracerService(Protocol):
    """OpenTelemetry spans (:mod:`rag_lab.observability.tracing`)."""

    enabled: bool

    def span(
        self, name: str, attributes: Mapping[str, object] | None = None
    ) -> AbstractContextManager[SpanService]: ...

    def start_span(self, name: str, attributes: Mapping[str, object] | None = None) -> object: ...

    def end_span(self, span: object, attributes: Mapping[str, object] | None = None, error: str = "") -> None: ...


@dataclass
class Services:
    """Everything outside ChatManage that stages need. Optional parts may be None."""

    workspace: WorkspaceService | None = None
    searcher: SearcherService | None = None
    embedder_for: Callable[[KnowledgeBase], Embedder | None] | None = None
    chat_models: dict[str, ChatModel] = field(default_factory=dict)
    rerank_models: dict[str, Reranker] = field(default_factory=dict)
    prompts: PromptTemplates | None = None
    messages: MessageService | None = None
    #: long-term memory (MEMORY_RECALL / MemoryAffinity)
    memory: MemoryService | None = None
    web_search: WebSearchService | None = None
    #: page fetcher for WEB_FETCH
    web_fetcher: WebFetcherService | None = None
    #: knowledge graph store (ExtractEntity / SearchEntity)
    graph: GraphService | None = None
    #: OpenTelemetry spans (rag_lab.observability.tracing); NullTracer = off
    tracer: TracerService = field(
        default_factory=lambda: __import__("rag_lab.observability.tracing", fromlist=["NullTracer"]).NullTracer()
    )
    #: lab diagnostics (MMR traces, score components, merge decisions) are recorded when True
    diagnostics: bool = True

    def get_chat_model(self, model_id: str) -> ChatModel:
        try:
            return self.chat_models[model_id]
        except KeyError:
            raise ModelNotFound(
                f"unknown chat model '{model_id}' (known: {', '.join(self.chat_models) or 'none'})"
            ) from None

    def get_rerank_model(self, model_id: str) -> Reranker:
        try:
            return self.rerank_models[model_id]
        except KeyError:
            raise ModelNotFound(
                f"unknown rerank model '{model_id}' (known: {', '.join(self.rerank_models) or 'none'})"
            ) from None


def default_plugins(services: Services) -> list[Plugin]:
    """The seventeen stage plugins, in the container's order (= chain order on a shared event).
    Every stage is registered; one whose service is not configured (memory, web, graph) or whose
    switch is off passes through. Each declares its reads / writes / params (``contract``)."""
    from rag_lab.pipeline.plugins.chat_completion import PluginChatCompletion
    from rag_lab.pipeline.plugins.chat_completion_stream import PluginChatCompletionStream
    from rag_lab.pipeline.plugins.data_analysis import PluginDataAnalysis
    from rag_lab.pipeline.plugins.extract_entity import PluginExtractEntity
    from rag_lab.pipeline.plugins.filter_top_k import PluginFilterTopK
    from rag_lab.pipeline.plugins.into_chat_message import PluginIntoChatMessage
    from rag_lab.pipeline.plugins.load_history import PluginLoadHistory
    from rag_lab.pipeline.plugins.memory_affinity import PluginMemoryAffinity
    from rag_lab.pipeline.plugins.memory_recall import PluginMemoryRecall
    from rag_lab.pipeline.plugins.merge import PluginMerge
    from rag_lab.pipeline.plugins.query_understand import PluginQueryUnderstand
    from rag_lab.pipeline.plugins.rerank import PluginRerank
    from rag_lab.pipeline.plugins.search import PluginSearch
    from rag_lab.pipeline.plugins.search_entity import PluginSearchEntity
    from rag_lab.pipeline.plugins.search_parallel import PluginSearchParallel
    from rag_lab.pipeline.plugins.web_fetch import PluginWebFetch
    from rag_lab.pipeline.plugins.wiki_boost import PluginWikiBoost

    search = PluginSearch(services)
    search_entity = PluginSearchEntity(services)
    return [
        search,  # 1 Search
        PluginRerank(services),  # 2 Rerank
        PluginWebFetch(services),  # 3 (the stage is in the pipeline only with web search on)
        PluginMerge(services),  # 4 Merge
        PluginDataAnalysis(services),  # 5 (the stage is in the pipeline only when enabled)
        PluginIntoChatMessage(services),  # 6
        PluginChatCompletion(services),  # 7
        PluginChatCompletionStream(services),  # 8
        PluginFilterTopK(services),  # 9
        PluginQueryUnderstand(services),  # 10
        PluginLoadHistory(services),  # 11
        PluginMemoryRecall(services),  # 12
        PluginExtractEntity(services),  # 13 (inner layer of query_understand)
        search_entity,  # 14
        PluginSearchParallel(services, search=search, entity=search_entity),  # 15
        PluginWikiBoost(services),  # 16
        PluginMemoryAffinity(services),  # 17
    ]


def build_event_manager(services: Services, plugins: list[Plugin] | None = None) -> EventManager:
    manager = EventManager()
    manager.register_all(plugins if plugins is not None else default_plugins(services))
    return manager
