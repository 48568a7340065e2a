"""rag_lab: a workbench around a faithful, event-driven RAG chat pipeline.

Public names are resolved lazily, so ``import rag_lab`` stays fast (no onnxruntime, faiss,
bm25s or jieba until something needs them).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # lab
    "Lab": "rag_lab.lab.lab",
    "Run": "rag_lab.lab.lab",
    "LabConfigError": "rag_lab.lab.lab",
    # core types
    "ChatManage": "rag_lab.types",
    "PipelineRequest": "rag_lab.types",
    "PipelineState": "rag_lab.types",
    "PipelineContext": "rag_lab.types",
    "SearchTarget": "rag_lab.types",
    "History": "rag_lab.types",
    "SearchResult": "rag_lab.types",
    "MatchType": "rag_lab.types",
    "ChunkType": "rag_lab.types",
    "EventType": "rag_lab.types",
    "PipelineBuilder": "rag_lab.types",
    "QueryIntent": "rag_lab.types",
    "normalize_query_intent": "rag_lab.types",
    "needs_kb_retrieval": "rag_lab.types",
    "needs_retrieval": "rag_lab.types",
    "PipelineParams": "rag_lab.types",
    "ParamsError": "rag_lab.types",
    "ResponseType": "rag_lab.types",
    "StreamEvent": "rag_lab.types",
    "StreamResponse": "rag_lab.types",
    # pipeline framework
    "Plugin": "rag_lab.pipeline.plugin",
    "EventManager": "rag_lab.pipeline.plugin",
    "PluginError": "rag_lab.pipeline.plugin",
    "ErrSearchNothing": "rag_lab.pipeline.plugin",
    "Services": "rag_lab.pipeline.container",
    "build_event_manager": "rag_lab.pipeline.container",
    "knowledge_qa_by_event": "rag_lab.pipeline.orchestrator",
    # streams
    "EventBus": "rag_lab.stream.bus",
    "MemoryStreamManager": "rag_lab.stream.manager",
    # pure functions of the spec
    "clean_passage": "rag_lab.reranking.clean",
    "select_mmr": "rag_lab.reranking.mmr",
    "composite_score": "rag_lab.reranking.composite",
    "tokenize_simple": "rag_lab.searchutil.text",
    "jaccard": "rag_lab.searchutil.text",
    "build_content_signature": "rag_lab.searchutil.text",
    "join_chunk_content": "rag_lab.searchutil.chunkmerge",
    # workbench
    "diff": "rag_lab.lab.diff",
    "save_capture": "rag_lab.lab.capture",
    "load_capture": "rag_lab.lab.capture",
    "Capture": "rag_lab.lab.capture",
    "CaptureError": "rag_lab.lab.capture",
    # evaluation
    "load_dataset": "rag_lab.eval.datasets",
    "evaluate_retrieval": "rag_lab.eval.metrics",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rag_lab' has no attribute '{name}'")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
