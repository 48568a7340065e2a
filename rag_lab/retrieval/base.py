"""Retrieval engine protocol and the HybridSearch input (spec §1.8, §1.9, §5)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np


@dataclass(slots=True)
class SearchParams:
    query_text: str = ""
    query_embedding: np.ndarray | None = None
    vector_threshold: float = 0.0
    keyword_threshold: float = 0.0
    match_count: int = 0
    disable_keywords_match: bool = False
    disable_vector_match: bool = False
    knowledge_ids: list[str] = field(default_factory=list)
    tag_ids: list[str] = field(default_factory=list)
    scope_tag_ids: list[str] = field(default_factory=list)
    only_recommended: bool = False
    knowledge_base_ids: list[str] = field(default_factory=list)
    skip_context_enrichment: bool = True
    #: the caller's tenant; 0 skips the access check (a single-tenant lab)
    tenant_id: int = 0


@dataclass(slots=True)
class IndexWithScore:
    """A raw retriever hit."""

    id: str
    content: str
    chunk_id: str
    knowledge_id: str
    knowledge_base_id: str
    score: float
    match_type: int
    source_id: str = ""
    source_type: str = "chunk"
    tag_id: str = ""
    is_enabled: bool = True


@dataclass(slots=True)
class RetrieveResult:
    hits: list[IndexWithScore]
    engine_type: str
    retriever_type: str  # "vector" | "keywords" | "websearch"
    error: Exception | None = None


class RetrieveEngine(Protocol):
    """What HybridSearch needs from a store. FAISS + BM25 is the in-process default; a Milvus
    engine can implement the same two calls. An engine may declare ``in_process: bool`` (not a
    protocol member): ``True`` exempts its searches from the search timeouts; an engine without
    it counts as remote (:mod:`rag_lab.models.timeouts`)."""

    engine_type: str

    def supports_vector(self) -> bool: ...

    def supports_keywords(self) -> bool: ...

    def vector_search(
        self,
        kb_ids: Sequence[str],
        embedding: np.ndarray,
        top_k: int,
        threshold: float,
        knowledge_ids: Sequence[str] = (),
        tag_ids: Sequence[str] = (),
    ) -> list[IndexWithScore]: ...

    def keyword_search(
        self,
        kb_ids: Sequence[str],
        query: str,
        top_k: int,
        threshold: float,
        knowledge_ids: Sequence[str] = (),
        tag_ids: Sequence[str] = (),
    ) -> list[IndexWithScore]: ...
