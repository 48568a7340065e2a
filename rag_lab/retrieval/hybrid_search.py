"""HybridSearch (spec §5) on a single tenant.

``HybridSearcher.search(primary_kb_id, params)`` runs, in order: match-count normalisation,
KB scope, KB loading, embedding-space check, over-recall pool, embed once, store groups and
their retrieval requests, fan-out, classification, fusion (dedup or weighted RRF normalised to
[0, 1], see :mod:`rag_lab.retrieval.fusion`), FAQ post-processing (negative-question filter and
the iterative top-k growth), truncation and hydration into :class:`SearchResult`.

Differences from the reference, all deliberate:

* single tenant: no permission checks; KBs are looked up by id (or, for notebooks, by name);
* equal scores are ordered by chunk id, and several store groups are concatenated in group
  order (the reference uses completion order and unstable sorts);
* image recall (seed step 5, :mod:`rag_lab.retrieval.image_recall`) runs only when the searcher
  has ``image_embedder_for`` and a KB in scope has image vectors; its hits are appended to the
  vector list (after the text vector hits) before fusion and hydrated with
  ``metadata["retrieved_by"] = "image_vector"``. Image-info enrichment (§6.9) is not done here.

Kept whole: the §5 search read in the order it runs: the helpers are the steps of
:class:`HybridSearcher` (request building, fan-out, fusion, hydration) and share its trace.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from rag_lab.models.timeouts import all_in_process, call_with_timeout, is_in_process
from rag_lab.retrieval.base import IndexWithScore, RetrieveEngine, RetrieveResult, SearchParams
from rag_lab.retrieval.engine import is_searchable
from rag_lab.retrieval.fusion import (
    dedup_by_score,
    fuse_hits,
    normalize_engine_scores,
    resolve_rrf_k,
    resolve_rrf_weights,
)
from rag_lab.retrieval.hydration import HydrationMemo
from rag_lab.retrieval.image_recall import (
    IMAGE_SOURCE,
    IMAGE_VECTOR,
    ImageEmbedder,
    has_image_vectors,
    image_kb_ids,
    recall_images,
    search_image_indexes,
)
from rag_lab.retrieval.sharing import can_view
from rag_lab.types.errors import KnowledgeBaseNotFound, MixedEmbeddingSpaces
from rag_lab.types.params import PipelineParams
from rag_lab.types.search_result import SearchResult

if TYPE_CHECKING:
    from rag_lab.knowledge.models import Chunk, Knowledge, KnowledgeBase
    from rag_lab.knowledge.workspace import Workspace
    from rag_lab.models.base import Embedder

log = logging.getLogger(__name__)

__all__ = [
    "HybridSearcher",
    "HybridTrace",
    "RetrievalRequest",
    "StoreGroup",
    "SearchError",
    "KnowledgeBaseNotFound",
    "MixedEmbeddingSpaces",
    "can_view",
    "EmbeddingUnavailable",
    "VectorStoreUnavailable",
    "normalize_match_count",
    "pool_size",
    "fan_out",
    "retrieve_group",
    "classify_results",
    "negative_question_matches",
    "filter_negative_questions",
]


class SearchError(RuntimeError):
    """Base of the typed errors the hybrid search raises itself (abort FAQ iteration)."""


class EmbeddingUnavailable(SearchError):
    """The query must be embedded but no embedder is available, or it failed."""


class VectorStoreUnavailable(SearchError):
    """A multi-store retrieval failed or timed out (detail hidden, chained as __cause__)."""


# -- pure helpers ----------------------------------------------------------------------------
def normalize_match_count(match_count: int, params: PipelineParams) -> int:
    """§5.1: ``match_count <= 0`` → ``params.default_retrieval_top_k`` (50)."""
    return match_count if match_count > 0 else params.default_retrieval_top_k


def pool_size(match_count: int, n_kbs: int, params: PipelineParams) -> int:
    """§5.6: ``min(max(match_count * factor, min) * n_kbs, cap)`` with the normalised match count
    (defaults: factor 5, min 50, cap 500)."""
    mc = normalize_match_count(match_count, params)
    per_kb = max(mc * params.over_recall_factor, params.over_recall_min)
    return min(per_kb * max(1, n_kbs), params.retrieval_pool_max)


def _norm_question(q: Any) -> str:
    return q.strip().lower() if isinstance(q, str) else ""


def negative_question_matches(chunk: Chunk, query: str) -> bool:
    """True when ``chunk`` is an FAQ chunk with a negative question equal (lower-cased, trimmed,
    non-empty) to the query (§5.13)."""
    nq = _norm_question(query)
    if not nq or chunk.chunk_type != "faq":
        return False
    meta = chunk.metadata
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except ValueError:
            return False
    if not isinstance(meta, dict):
        return False
    negatives = meta.get("negative_questions") or []
    if not isinstance(negatives, list):
        return False
    return any(_norm_question(n) == nq for n in negatives if _norm_question(n))


def filter_negative_questions(
    hits: Sequence[IndexWithScore], chunks: dict[str, Chunk], query: str
) -> list[IndexWithScore]:
    """Drop hits whose FAQ chunk rejects the query (§5.13); missing chunks are kept."""
    if not _norm_question(query):
        return list(hits)
    return [h for h in hits if not (h.chunk_id in chunks and negative_question_matches(chunks[h.chunk_id], query))]


def classify_results(results: Sequence[RetrieveResult]) -> tuple[list[IndexWithScore], list[IndexWithScore]]:
    """§5.10: (vector hits, keyword hits), each the concatenation in result order."""
    vec: list[IndexWithScore] = []
    kw: list[IndexWithScore] = []
    for r in results:
        (vec if r.retriever_type == "vector" else kw).extend(r.hits)
    return vec, kw


# -- store groups and fan-out ----------------------------------------------------------------
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
    if req.retriever_type == "vector":
        assert req.embedding is not None
        hits = engine.vector_search(req.kb_ids, req.embedding, req.top_k, req.threshold, req.knowledge_ids, req.tag_ids)
    else:
        hits = engine.keyword_search(req.kb_ids, req.query, req.top_k, req.threshold, req.knowledge_ids, req.tag_ids)
    return RetrieveResult(hits=list(hits), engine_type=engine.engine_type, retriever_type=req.retriever_type)


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


# -- trace -----------------------------------------------------------------------------------
@dataclass(slots=True)
class HybridTrace:
    """What one search did, for the lab and for tests."""

    match_count: int = 0
    pool_size: int = 0
    kb_ids: list[str] = field(default_factory=list)
    embedded: bool = False
    requests: list[tuple[str, str, tuple[str, ...], int]] = field(default_factory=list)  # (group, type, kbs, top_k)
    vector_hits: list[IndexWithScore] = field(default_factory=list)
    keyword_hits: list[IndexWithScore] = field(default_factory=list)
    fused: list[IndexWithScore] = field(default_factory=list)
    fusion: str = ""  # "" | "dedup_vector" | "dedup_keywords" | "rrf"
    faq_iterations: int = 0
    negative_filtered: list[str] = field(default_factory=list)
    skipped_in_hydration: list[tuple[str, str]] = field(default_factory=list)  # (chunk_id, reason)
    image_kb_ids: list[str] = field(default_factory=list)
    image_requests: list[int] = field(default_factory=list)  # top-k of each image request
    image_hits: list[IndexWithScore] = field(default_factory=list)
    image_dropped: int = 0
    image_errors: list[str] = field(default_factory=list)

    def paths(self) -> dict[str, Any]:
        """The compact per-path record the search stage keeps (``SearchDiagnostics.calls``): the
        match count and the vector, keyword and fused (uncut) lists as ``[chunk id, document id,
        score]`` in rank order."""

        def hits(xs: Sequence[IndexWithScore]) -> list[list[Any]]:
            return [[h.chunk_id, h.knowledge_id, float(h.score)] for h in xs]

        return {
            "match_count": self.match_count,
            "vector": hits(self.vector_hits),
            "keyword": hits(self.keyword_hits),
            "fused": hits(self.fused),
        }


EngineFor = Callable[["KnowledgeBase"], tuple[str, RetrieveEngine]]


async def _no_results() -> list[RetrieveResult]:
    return []


def chunk_to_search_result(
    chunk: Any, doc: Any, score: float, match_type: int, matched_content: str = ""
) -> SearchResult:
    """A stored chunk and its document as a SearchResult (§5.15 hydration; also graph hits)."""
    return SearchResult(
        id=chunk.id,
        content=chunk.content,
        content_revision=chunk.content_revision,
        knowledge_id=chunk.knowledge_id,
        chunk_index=chunk.chunk_index,
        seq=chunk.chunk_index,
        knowledge_title=doc.title,
        start_at=chunk.start_at,
        end_at=chunk.end_at,
        score=score,
        match_type=match_type,
        metadata={
            str(k): v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
            for k, v in (doc.metadata or {}).items()
        },
        chunk_type=chunk.chunk_type,
        parent_chunk_id=chunk.parent_chunk_id,
        image_info=chunk.image_info,
        knowledge_filename=doc.file_name,
        knowledge_source=doc.source,
        knowledge_channel=doc.channel,
        knowledge_description=doc.description,
        knowledge_custom_metadata=(
            json.dumps(doc.custom_metadata, ensure_ascii=False, sort_keys=True) if doc.custom_metadata else ""
        ),
        chunk_metadata=dict(chunk.metadata) if chunk.metadata else None,
        matched_content=matched_content,
        knowledge_base_id=doc.knowledge_base_id,
    )


#: query vectors kept per searcher (least recently used dropped first)
QUERY_VECTOR_CACHE = 1024


class HybridSearcher:
    """§5 HybridSearch over a workspace. ``embedder_for(kb)`` returns the embedder of a KB's space
    (or ``None``); ``engine_for(kb)`` returns ``(store group key, engine)`` and defaults to the
    workspace's single :class:`~rag_lab.retrieval.engine.LocalEngine`. ``image_embedder_for(kb)``
    returns the joint text/image embedder of a KB with image vectors (``None``, the default,
    disables image recall)."""

    def __init__(
        self,
        workspace: Workspace,
        embedder_for: Callable[[KnowledgeBase], Embedder | None],
        params: PipelineParams | None = None,
        engine_for: EngineFor | None = None,
        image_embedder_for: Callable[[KnowledgeBase], ImageEmbedder | None] | None = None,
    ) -> None:
        self.workspace = workspace
        self.image_embedder_for = image_embedder_for
        self.embedder_for = embedder_for
        self.params = params or PipelineParams()
        if engine_for is None:
            engine = workspace.engine()

            def engine_for(kb: KnowledgeBase) -> tuple[str, RetrieveEngine]:
                return "", engine

        self.engine_for: EngineFor = engine_for
        #: query vectors by (embedding model, query text): a repeated question is embedded once
        self._query_vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        #: the rows hydration reads, per store state (shared by the with_params copies)
        self._rows = HydrationMemo()

    def with_params(self, params: PipelineParams) -> HybridSearcher:
        """The same searcher reading another request's params (shares workspace and engines)."""
        if params is self.params:
            return self
        other = copy.copy(self)
        other.params = params
        return other

    async def search(self, primary_kb_id: str, sp: SearchParams) -> list[SearchResult]:
        results, _ = await self.search_with_trace(primary_kb_id, sp)
        return results

    async def search_with_paths(
        self, primary_kb_id: str, sp: SearchParams
    ) -> tuple[list[SearchResult], Callable[[], dict[str, Any]]]:
        """:meth:`search` with a function giving the compact per-path record of the search
        (:meth:`HybridTrace.paths`, built when called: a search nobody reads pays nothing for it)."""
        results, trace = await self.search_with_trace(primary_kb_id, sp)
        return results, trace.paths

    def runs_in_process(self, primary_kb_id: str, sp: SearchParams) -> bool:
        """True when everything this search calls runs in this process: every searched KB's
        engine, and the embedders it would call (the query's, when ``sp`` carries no vector, and
        the image embedder). The search stage then awaits it without ``search_timeout_s``
        (:mod:`rag_lab.models.timeouts`). KBs that cannot be resolved: ``False`` (the search
        raises the same error at once)."""
        try:
            self._rows.fresh(self.workspace.store)
            _, kbs = self._load_kbs(primary_kb_id, sp)
        except Exception:
            return False
        parts: list[Any] = []
        for kb in kbs:
            parts.append(self.engine_for(kb)[1])
            if kb.vector_enabled and sp.query_embedding is None:
                parts.append(self.embedder_for(kb))
            if self.image_embedder_for is not None:
                parts.append(self.image_embedder_for(kb))
        return all_in_process(parts)

    # -- steps ------------------------------------------------------------------------------
    def _load_kbs(self, primary_kb_id: str, sp: SearchParams) -> tuple[KnowledgeBase, list[KnowledgeBase]]:
        """The searched KBs (by id or name, memoised per store state; call after the memo's
        ``fresh``) and the primary one among them, with the access check (§5.3)."""
        wanted = list(dict.fromkeys(i for i in (sp.knowledge_base_ids or [primary_kb_id]) if i))
        kbs: list[KnowledgeBase] = []
        missing: list[str] = []
        for ref in wanted:
            kb = self._rows.kb(ref)
            if kb is not None and not can_view(kb, sp.tenant_id):
                kb = None  # denied looks like unknown (§5.3): a KB's existence is not revealed
            if kb is None:
                missing.append(ref)
            elif all(k.id != kb.id for k in kbs):
                kbs.append(kb)
        if not kbs:
            raise KnowledgeBaseNotFound(self.workspace._not_found_message(wanted or [primary_kb_id], sp.tenant_id))
        if missing:
            log.warning("hybrid search: unknown knowledge bases ignored: %s", ", ".join(missing))
        primary = next((k for k in kbs if primary_kb_id in (k.id, k.name)), None)
        if primary is None:
            raise KnowledgeBaseNotFound(
                f"primary knowledge base {primary_kb_id!r} is not among the searched knowledge bases "
                f"{[k.id for k in kbs]}; " + self.workspace._not_found_message([primary_kb_id], sp.tenant_id)
            )
        return primary, kbs

    @staticmethod
    def _check_embedding_spaces(kbs: Sequence[KnowledgeBase]) -> None:
        by_key: dict[str, list[str]] = {}
        for kb in kbs:
            if kb.embedding_model_key:
                by_key.setdefault(kb.embedding_model_key, []).append(kb.name)
        if len(by_key) > 1:
            parts = "; ".join(f"{key!r} ({', '.join(names)})" for key, names in sorted(by_key.items()))
            raise MixedEmbeddingSpaces(f"selected knowledge bases use different embedding models: {parts}")

    async def _embed(self, kb: KnowledgeBase, query: str) -> np.ndarray:
        embedder = self.embedder_for(kb)
        if embedder is None:
            raise EmbeddingUnavailable(
                f"no embedder for knowledge base {kb.name!r} (embedding model {kb.embedding_model_key!r})"
            )
        if embedder.model_key != kb.embedding_model_key:
            raise MixedEmbeddingSpaces(
                f"knowledge base {kb.name!r} uses embedding model {kb.embedding_model_key!r} but the embedder "
                f"supplied for it is {embedder.model_key!r}"
            )
        key = (embedder.model_key, query)
        cached = self._query_vectors.get(key)
        if cached is not None:
            self._query_vectors.move_to_end(key)
            return cached
        try:
            vecs = await asyncio.to_thread(embedder.embed, [query])
        except Exception as exc:
            raise EmbeddingUnavailable(f"embedding the query with {embedder.model_key!r} failed: {exc}") from exc
        arr = np.asarray(vecs, dtype=np.float32)
        if arr.ndim != 2 or arr.shape[0] != 1:
            raise EmbeddingUnavailable(f"embedder {embedder.model_key!r} returned shape {arr.shape} for one query")
        vec: np.ndarray = arr[0]
        vec.flags.writeable = False
        self._query_vectors[key] = vec
        if len(self._query_vectors) > QUERY_VECTOR_CACHE:
            self._query_vectors.popitem(last=False)
        return vec

    def _groups(self, kbs: Sequence[KnowledgeBase]) -> list[StoreGroup]:
        groups: dict[str, StoreGroup] = {}
        for kb in kbs:
            key, engine = self.engine_for(kb)
            g = groups.get(key)
            if g is None:
                groups[key] = StoreGroup(key, engine, [kb])
            else:
                g.kbs.append(kb)
        return list(groups.values())

    async def search_with_trace(self, primary_kb_id: str, sp: SearchParams) -> tuple[list[SearchResult], HybridTrace]:
        """Run the search and return the results with a :class:`HybridTrace`."""
        p = self.params
        trace = HybridTrace()
        match_count = normalize_match_count(sp.match_count, p)
        self._rows.fresh(self.workspace.store)  # the memo of this store state's rows
        primary, kbs = self._load_kbs(primary_kb_id, sp)
        self._check_embedding_spaces(kbs)
        # the KBs' rows (KbRows), read on a KB's first search under a store state, hits or none
        self._rows.preload(k.id for k in kbs)
        pool = pool_size(match_count, len(kbs), p)
        trace.match_count, trace.pool_size, trace.kb_ids = match_count, pool, [k.id for k in kbs]
        query = (sp.query_text or "").strip()

        embedding = sp.query_embedding
        if embedding is not None:
            embedding = np.asarray(embedding, dtype=np.float32).reshape(-1)
        elif primary.vector_enabled and primary.embedding_model_key and not sp.disable_vector_match:
            embedding = await self._embed(primary, query)
            trace.embedded = True

        groups = self._groups(kbs)
        for g in groups:
            faq_vec = [k.id for k in g.kbs if k.vector_enabled and k.embedding_model_key and k.type == "faq"]
            doc_vec = [k.id for k in g.kbs if k.vector_enabled and k.embedding_model_key and k.type != "faq"]
            doc_kw = [k.id for k in g.kbs if k.keyword_enabled and k.type != "faq"]
            common: dict[str, Any] = dict(top_k=pool, knowledge_ids=list(sp.knowledge_ids), tag_ids=list(sp.tag_ids))
            if g.engine.supports_vector() and not sp.disable_vector_match and (doc_vec or faq_vec):
                if embedding is None:  # primary without vectors: embed with this group's first vector KB
                    first = next(k for k in g.kbs if k.id in (doc_vec + faq_vec))
                    embedding = await self._embed(first, query)
                    trace.embedded = True
                for ids, index in ((doc_vec, "default"), (faq_vec, "faq")):
                    if ids:
                        g.requests.append(
                            RetrievalRequest(
                                "vector",
                                ids,
                                threshold=sp.vector_threshold,
                                query=query,
                                embedding=embedding,
                                index=index,
                                **common,
                            )
                        )
            if g.engine.supports_keywords() and not sp.disable_keywords_match and doc_kw and query:
                g.requests.append(
                    RetrievalRequest("keywords", doc_kw, threshold=sp.keyword_threshold, query=query, **common)
                )
            trace.requests.extend((g.key, r.retriever_type, tuple(r.kb_ids), r.top_k) for r in g.requests)
        image_kbs = (
            [k for k in kbs if has_image_vectors(k)]
            if (self.image_embedder_for is not None and query and not sp.disable_vector_match)
            else []
        )
        has_requests = any(g.requests for g in groups)
        if not has_requests and not image_kbs:
            return [], trace

        if image_kbs:
            results, image_hits = await asyncio.gather(
                self._retrieve(groups) if has_requests else _no_results(),
                self._image_recall(image_kbs, query, pool, sp, trace),
            )
        else:  # no second branch to run alongside: no tasks to create
            results, image_hits = await self._retrieve(groups), []
        vec, kw = classify_results(results)
        vec = vec + image_hits
        trace.vector_hits, trace.keyword_hits = vec, kw
        if not vec and not kw:
            return [], trace

        k = resolve_rrf_k(p.rrf_k)
        wv, wk = resolve_rrf_weights(p.rrf_vector_weight, p.rrf_keyword_weight)
        fused = fuse_hits(vec, kw, k, wv, wk, normalize=True)
        trace.fusion = "rrf" if vec and kw else ("dedup_vector" if vec else "dedup_keywords")

        if primary.type == "faq":
            if len(fused) < match_count and len(vec) == pool:
                fused = await self._faq_iterate(groups, query, match_count, trace)
            else:
                fused = await self._negative_filter(fused, query, trace)
        trace.fused = fused
        hits = fused[:match_count]
        # hydration reads match_count rows: in this thread, a hand-off would cost more than the reads
        results_out = self._hydrate(hits, trace)
        return results_out, trace

    async def _image_recall(
        self, image_kbs: Sequence[KnowledgeBase], query: str, pool: int, sp: SearchParams, trace: HybridTrace
    ) -> list[IndexWithScore]:
        """Seed step 5, best effort: any failure is logged and traced, and yields no image hits."""
        if not image_kbs:
            return []
        assert self.image_embedder_for is not None
        try:
            embedder = self.image_embedder_for(image_kbs[0])
            if embedder is None:
                trace.image_errors.append(f"no image embedder for knowledge base {image_kbs[0].name!r}")
                return []
            ids = image_kb_ids(image_kbs, embedder.model_key)
            skipped = [k.name for k in image_kbs if k.id not in ids]
            if skipped:
                trace.image_errors.append(
                    f"knowledge bases {skipped} use another image embedding model than {embedder.model_key!r}"
                )
            trace.image_kb_ids = ids
            if not ids:
                return []
            vecs = np.asarray(await asyncio.to_thread(embedder.embed, [query]), dtype=np.float32)
            if vecs.ndim != 2 or vecs.shape[0] != 1:
                raise ValueError(f"image embedder {embedder.model_key!r} returned shape {vecs.shape} for one query")
            qvec = vecs[0]
            errors: list[str] = []

            async def search(kb_ids: list[str], emb: np.ndarray, top_k: int, thr: float) -> list[IndexWithScore]:
                return await asyncio.to_thread(
                    search_image_indexes,
                    self.workspace,
                    kb_ids,
                    emb,
                    top_k,
                    thr,
                    list(sp.knowledge_ids),
                    list(sp.tag_ids),
                    errors,
                )

            outcome = await recall_images(search, ids, qvec, pool, sp.vector_threshold, self.params)
        except Exception as exc:
            log.warning("image recall failed, text results only: %s", exc)
            trace.image_errors.append(f"{type(exc).__name__}: {exc}")
            return []
        trace.image_errors.extend(dict.fromkeys(errors))
        if outcome.error:
            trace.image_errors.append(outcome.error)
        trace.image_requests, trace.image_hits, trace.image_dropped = (
            outcome.requests,
            outcome.hits,
            outcome.dropped_images,
        )
        return outcome.hits

    async def _retrieve(self, groups: Sequence[StoreGroup]) -> list[RetrieveResult]:
        results = await fan_out(groups, self.params.store_fanout_concurrency, self.params.store_fanout_timeout_s)
        return normalize_engine_scores(results)

    async def _negative_filter(
        self, hits: list[IndexWithScore], query: str, trace: HybridTrace
    ) -> list[IndexWithScore]:
        if not _norm_question(query) or not hits:
            return hits
        try:
            chunks = await asyncio.to_thread(self.workspace.store.get_chunks, [h.chunk_id for h in hits])
        except Exception as exc:  # §5.13: on a load error keep everything
            log.warning("FAQ negative-question filter skipped: %s", exc)
            return hits
        kept = filter_negative_questions(hits, chunks, query)
        kept_ids = {h.chunk_id for h in kept}
        trace.negative_filtered.extend(h.chunk_id for h in hits if h.chunk_id not in kept_ids)
        return kept

    async def _faq_iterate(
        self, groups: Sequence[StoreGroup], query: str, match_count: int, trace: HybridTrace
    ) -> list[IndexWithScore]:
        """§5.13 iterative retrieval: grow top_k (×3 start, ×2 per round, cap = pool max, 5 rounds),
        drop FAQ chunks whose negative questions match, keep the max raw score per chunk."""
        cap = self.params.retrieval_pool_max
        top_k = min(match_count * self.params.faq_iteration_start_factor, cap)
        cache: dict[str, Chunk | None] = {}
        filtered: set[str] = set()
        kept: dict[str, IndexWithScore] = {}
        store = self.workspace.store
        for _ in range(self.params.faq_iteration_max_rounds):
            trace.faq_iterations += 1
            try:
                results = await self._retrieve([g.with_top_k(top_k) for g in groups])
            except SearchError:
                raise
            except Exception as exc:  # untyped failure: stop, keep what was gathered
                log.warning("FAQ iterative retrieval stopped: %s", exc)
                break
            hits = [h for r in results for h in r.hits]
            if not hits:
                break
            todo = [h.chunk_id for h in hits if h.chunk_id not in cache and h.chunk_id not in filtered]
            if todo:
                loaded = await asyncio.to_thread(store.get_chunks, todo)
                for cid in todo:
                    cache[cid] = loaded.get(cid)
            for h in hits:
                if h.chunk_id in filtered:
                    continue
                c = cache.get(h.chunk_id)
                if c is not None and negative_question_matches(c, query):
                    filtered.add(h.chunk_id)
                    kept.pop(h.chunk_id, None)
                    trace.negative_filtered.append(h.chunk_id)
                    continue
                cur = kept.get(h.chunk_id)
                if cur is None or h.score > cur.score:
                    kept[h.chunk_id] = h
            if len(kept) >= match_count or len(hits) < top_k or top_k >= cap:
                break
            top_k = min(2 * top_k, cap)
        return dedup_by_score(kept.values())

    def _hydrate(self, hits: Sequence[IndexWithScore], trace: HybridTrace) -> list[SearchResult]:
        """§5.15 ``process_search_results`` with context enrichment skipped; results without image
        info get the image info of the image chunks under them (§6.9)."""
        memo = self._rows
        memo.fresh(self.workspace.store)
        memo.preload(h.knowledge_base_id for h in hits)
        chunks = memo.chunks([h.chunk_id for h in hits])
        docs: dict[tuple[str, str], Knowledge] = memo.documents(
            (c.knowledge_base_id, c.knowledge_id) for c in chunks.values()
        )
        out: list[SearchResult] = []
        seen: set[str] = set()
        for h in hits:
            c = chunks.get(h.chunk_id)
            reason = ""
            if c is None:
                reason = "chunk not found"
            elif not is_searchable(c):
                reason = "chunk not searchable"
            elif c.id in seen:
                reason = "duplicate chunk"
            elif (c.knowledge_base_id, c.knowledge_id) not in docs:
                reason = "document not found"
                log.warning("hybrid search: document %r of chunk %r not found", c.knowledge_id, c.id)
            if reason:
                trace.skipped_in_hydration.append((h.chunk_id, reason))
                continue
            assert c is not None
            seen.add(c.id)
            d = docs[(c.knowledge_base_id, c.knowledge_id)]
            r = chunk_to_search_result(c, d, h.score, h.match_type, matched_content=h.content)
            if h.source_type == IMAGE_SOURCE:
                r.metadata["retrieved_by"] = IMAGE_VECTOR
            out.append(r)
        memo.enrich_image_info(out)  # §6.9: images split off into child chunks
        return out
