"""Core data types: ChatManage, SearchResult, intents, events, stream payloads, params."""

from rag_lab.types import chat_manage
from rag_lab.types.chat_manage import *  # noqa: F403  (the names of chat_manage.__all__)
from rag_lab.types.events import PIPELINES, EventType, PipelineBuilder, build_pure_chat_pipeline, build_rag_pipeline
from rag_lab.types.intent import QueryIntent, needs_kb_retrieval, needs_retrieval, normalize_query_intent
from rag_lab.types.params import ParamsError, PipelineParams
from rag_lab.types.search_result import SEARCHABLE_CHUNK_TYPES, ChunkType, MatchType, SearchResult
from rag_lab.types.stream import STOP_RESPONSE_TYPE, ResponseType, StreamEvent, StreamResponse

__all__ = [
    *chat_manage.__all__,
    "PIPELINES",
    "EventType",
    "PipelineBuilder",
    "build_pure_chat_pipeline",
    "build_rag_pipeline",
    "QueryIntent",
    "needs_kb_retrieval",
    "needs_retrieval",
    "normalize_query_intent",
    "ParamsError",
    "PipelineParams",
    "SEARCHABLE_CHUNK_TYPES",
    "ChunkType",
    "MatchType",
    "SearchResult",
    "STOP_RESPONSE_TYPE",
    "ResponseType",
    "StreamEvent",
    "StreamResponse",
]
