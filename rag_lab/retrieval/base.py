"""Retrieval engine protocol and the HybridSearch input (spec §1.8, §1.9, §5)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol, overload

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


class HitRows(Sequence[IndexWithScore]):
    """A retriever's hits in rank order kept as the rows they come from, each made an
    :class:`IndexWithScore` when it is first read (then kept). Every row starts with what the
    fusion reads of its hit, ``(chunk id, score, id)`` (:attr:`rows`): a hybrid search fuses the
    rows and makes only the hits it returns (:func:`~rag_lab.retrieval.fusion.fuse_ranked`).
    ``make(row)`` is the hit of a row."""

    __slots__ = ("rows", "_make", "_made")

    def __init__(self, rows: list[tuple[object, ...]], make: Callable[[tuple[object, ...]], IndexWithScore]) -> None:
        self.rows = rows
        self._make = make
        self._made: list[IndexWithScore | None] = [None] * len(rows)

    def __len__(self) -> int:
        return len(self.rows)

    @overload
    def __getitem__(self, i: int) -> IndexWithScore: ...

    @overload
    def __getitem__(self, i: slice) -> list[IndexWithScore]: ...

    def __getitem__(self, i: int | slice) -> IndexWithScore | list[IndexWithScore]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self.rows)))]
        hit = self._made[i]
        if hit is None:
            hit = self._made[i] = self._make(self.rows[i])
        return hit

    def __iter__(self) -> Iterator[IndexWithScore]:
        return iter(self[:])

    def __repr__(self) -> str:
        return f"HitRows({self[:]!r})"


@dataclass(frozen=True, slots=True)
class SearchScope:
    """Where one engine search looks and how much it keeps: the KBs ``kb_ids``, the best ``top_k``
    hits, scores ``>= threshold`` (an engine may not apply it: see its docs), and, when given, only
    the chunks of these documents (``knowledge_ids``) and tags (``tag_ids``)."""

    kb_ids: Sequence[str]
    top_k: int
    threshold: float
    knowledge_ids: Sequence[str] = ()
    tag_ids: Sequence[str] = ()


@dataclass(slots=True)
class RetrieveResult:
    hits: Sequence[IndexWithScore]  # a list, or an engine's HitRows
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

    def vector_search(self, embedding: np.ndarray, scope: SearchScope) -> list[IndexWithScore]: ...

    def keyword_search(self, query: str, scope: SearchScope) -> list[IndexWithScore]: ...
