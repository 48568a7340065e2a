"""Stage names and the pipeline builder (spec §1.3, §3.3)."""

from __future__ import annotations

from enum import Enum


class EventType(str, Enum):
    LOAD_HISTORY = "load_history"
    MEMORY_RECALL = "memory_recall"
    QUERY_UNDERSTAND = "query_understand"
    CHUNK_SEARCH = "chunk_search"
    CHUNK_SEARCH_PARALLEL = "chunk_search_parallel"
    ENTITY_SEARCH = "entity_search"
    CHUNK_RERANK = "chunk_rerank"
    WEB_FETCH = "web_fetch"
    CHUNK_MERGE = "chunk_merge"
    DATA_ANALYSIS = "data_analysis"
    INTO_CHAT_MESSAGE = "into_chat_message"
    CHAT_COMPLETION = "chat_completion"
    CHAT_COMPLETION_STREAM = "chat_completion_stream"
    FILTER_TOP_K = "filter_top_k"

    def __str__(self) -> str:  # "chunk_rerank", not "EventType.CHUNK_RERANK"
        return self.value


class PipelineBuilder:
    """An ordered list of stages: ``add`` appends, ``add_if`` appends when the condition holds."""

    def __init__(self) -> None:
        self._events: list[EventType] = []

    def add(self, *events: EventType) -> PipelineBuilder:
        self._events.extend(EventType(e) for e in events)
        return self

    def add_if(self, condition: bool, *events: EventType) -> PipelineBuilder:
        if condition:
            self.add(*events)
        return self

    def build(self) -> list[EventType]:
        return list(self._events)


E = EventType

#: Static named pipelines (kept for callers that need no dynamic assembly; §3.3).
PIPELINES: dict[str, list[EventType]] = {
    "chat": [E.CHAT_COMPLETION],
    "chat_stream": [E.CHAT_COMPLETION_STREAM],
    "chat_history_stream": [E.LOAD_HISTORY, E.CHAT_COMPLETION_STREAM],
    "rag": [E.CHUNK_SEARCH, E.CHUNK_RERANK, E.CHUNK_MERGE, E.INTO_CHAT_MESSAGE, E.CHAT_COMPLETION],
    "rag_stream": [
        E.QUERY_UNDERSTAND,
        E.CHUNK_SEARCH_PARALLEL,
        E.CHUNK_RERANK,
        E.CHUNK_MERGE,
        E.FILTER_TOP_K,
        E.INTO_CHAT_MESSAGE,
        E.CHAT_COMPLETION_STREAM,
    ],
}


def build_pure_chat_pipeline(has_history: bool) -> list[EventType]:
    return (
        PipelineBuilder().add_if(has_history, E.LOAD_HISTORY).add(E.MEMORY_RECALL).add(E.CHAT_COMPLETION_STREAM).build()
    )


def build_rag_pipeline(has_history: bool, web_search_enabled: bool, data_analysis_enabled: bool) -> list[EventType]:
    return (
        PipelineBuilder()
        .add_if(has_history, E.LOAD_HISTORY)
        .add(E.MEMORY_RECALL)
        .add(E.QUERY_UNDERSTAND)
        .add(E.CHUNK_SEARCH_PARALLEL)
        .add(E.CHUNK_RERANK)
        .add_if(web_search_enabled, E.WEB_FETCH)
        .add(E.CHUNK_MERGE)
        .add(E.FILTER_TOP_K)
        .add_if(data_analysis_enabled, E.DATA_ANALYSIS)
        .add(E.INTO_CHAT_MESSAGE)
        .add(E.CHAT_COMPLETION_STREAM)
        .build()
    )
