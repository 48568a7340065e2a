"""Store groups and fan-out (spec §5.8–§5.10): the KBs one engine serves and the retrieval
requests built for them, run concurrently per group and across groups (all-or-nothing, remote
engines under a timeout), then classified into vector and keyword hits. Also the typed errors the
hybrid search raises itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from rag_lab.models.timeouts import call_with_timeout, is_in_process
from rag_lab.retrieval.base import HitRows, IndexWithScore, RetrieveEngine, RetrieveResult, SearchScope

if TYPE_CHECKING:
    from rag_lab.knowledge.models import KnowledgeBase


class SearchError(RuntimeError):
    """Base of the typed errors the hybrid search raises itself (abort FAQ iteration)."""


class EmbeddingUnavailable(SearchError):
    """The query must be embedded but no embedder is available, or it failed."""


class VectorStoreUnavailable(SearchError):
    """A multi-store retrieval failed or timed out (detail hidden, chained as __cause__)."""


@dataclass(slots=True)
class RetrievalRequest:
    retriever_type: str  # "vector" | "keywords"
    kb_ids: list[str]
    top_k: int
    threshold: float
    query: str = ""
    embedding: np.ndarray | None = None
    knowledge_ids: list[str] = field(default_factory=list)
    tag_ids: list[str] = field(default_factory=list)
    index: str = "default"  # "default" | "faq" (informational: the engine picks by KB type)

    def scope(self) -> SearchScope:
        """The engine search's KBs, ``top_k``, threshold and document / tag scope."""
        return SearchScope(self.kb_ids, self.top_k, self.threshold, self.knowledge_ids, self.tag_ids)


@dataclass(slots=True)
class StoreGroup:
    """KBs served by one engine (§5.8) and the requests built for them."""

    key: str
    engine: RetrieveEngine
    kbs: list[KnowledgeBase]
    requests: list[RetrievalRequest] = field(default_factory=list)

    def with_top_k(self, top_k: int) -> StoreGroup:
        return replace(self, requests=[replace(r, top_k=top_k) for r in self.requests])


def _run_request(engine: RetrieveEngine, req: RetrievalRequest) -> RetrieveResult:
    """One request's search; an engine that offers ``vector_rows`` / ``keyword_rows`` (its hits
    as :class:`~rag_lab.retrieval.base.HitRows`, each made when read) is called through them."""
    hits: Sequence[IndexWithScore]
    if req.retriever_type == "vector":
        assert req.embedding is not None
        search = getattr(engine, "vector_rows", None) or engine.vector_search
        hits = search(req.embedding, req.scope())
    else:
        search = getattr(engine, "keyword_rows", None) or engine.keyword_search
        hits = search(req.query, req.scope())
    if not isinstance(hits, (list, HitRows)):
        hits = list(hits)
    return RetrieveResult(hits=hits, engine_type=engine.engine_type, retriever_type=req.retriever_type)


async def retrieve_group(group: StoreGroup) -> list[RetrieveResult]:
    """Run a group's requests concurrently (engine calls in worker threads); results in request
    order. An engine error propagates. An engine that says a search runs inline (``runs_inline``:
    a small one, or one whose scan already runs on every core) is called in this thread, one
    request after the other: the hand-offs would cost more than they bring."""
    inline = getattr(group.engine, "runs_inline", None)
    if inline is not None and inline([k.id for k in group.kbs]):
        return [_run_request(group.engine, r) for r in group.requests]
    return list(await asyncio.gather(*(asyncio.to_thread(_run_request, group.engine, r) for r in group.requests)))


async def fan_out(
    groups: Sequence[StoreGroup],
    concurrency: int,
    timeout_s: float,
    retrieve: Callable[[StoreGroup], Awaitable[list[RetrieveResult]]] = retrieve_group,
) -> list[RetrieveResult]:
    """§5.9: one group is called directly; several run at most ``concurrency`` at a time, each
    under ``timeout_s`` when its engine is remote (an in-process engine, FAISS + BM25, has no
    wall-clock limit: :mod:`rag_lab.models.timeouts`), all-or-nothing: any failure cancels the rest and raises
    :class:`VectorStoreUnavailable` (the cause chained, not in the message). Caller cancellation
    propagates as ``CancelledError``. Results are concatenated in group order."""
    active = [g for g in groups if g.requests]
    if not active:
        return []
    if len(active) == 1:
        return await retrieve(active[0])
    sem = asyncio.Semaphore(max(1, concurrency))

    async def one(g: StoreGroup) -> list[RetrieveResult]:
        async with sem:
            return await call_with_timeout(
                retrieve(g),
                in_process=is_in_process(g.engine),
                stage="chunk_search",
                param="store_fanout_timeout_s",
                seconds=timeout_s,
                what=f"the {getattr(g.engine, 'engine_type', 'retrieval')} engine of store group {g.key!r} did not answer",
            )

    tasks = [asyncio.ensure_future(one(g)) for g in active]
    try:
        per_group = await asyncio.gather(*tasks)
    except asyncio.CancelledError:
        for t in tasks:
            t.cancel()
        raise
    except Exception as exc:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise VectorStoreUnavailable(
            f"retrieval failed in one of {len(active)} vector stores; no partial results are returned"
        ) from exc
    return [r for results in per_group for r in results]


def classify_results(
    results: Sequence[RetrieveResult],
) -> tuple[Sequence[IndexWithScore], Sequence[IndexWithScore]]:
    """§5.10: (vector hits, keyword hits), each the concatenation in result order (the hits of a
    type's only result as they are)."""
    vec = [r.hits for r in results if r.retriever_type == "vector"]
    kw = [r.hits for r in results if r.retriever_type != "vector"]
    return _joined(vec), _joined(kw)


def _joined(parts: list[Sequence[IndexWithScore]]) -> Sequence[IndexWithScore]:
    return parts[0] if len(parts) == 1 else [h for hits in parts for h in hits]


async def _no_results() -> list[RetrieveResult]:
    return []
