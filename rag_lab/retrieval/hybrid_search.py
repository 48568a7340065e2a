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

:class:`HybridSearcher` runs the steps in that order; the longer ones are its parts, in modules
named for them: its state and the fan-out (:mod:`rag_lab.retrieval.hybrid_base`,
:mod:`rag_lab.retrieval.store_groups`), image recall (:mod:`rag_lab.retrieval.hybrid_image`), FAQ
post-processing (:mod:`rag_lab.retrieval.hybrid_faq`), hydration
(:mod:`rag_lab.retrieval.hybrid_hydrate`); the trace is :mod:`rag_lab.retrieval.hybrid_trace`.
Their public names are importable from here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rag_lab.models.timeouts import all_in_process
from rag_lab.retrieval.base import SearchParams
from rag_lab.retrieval.fusion import Ranked, fuse_ranked, ranked_hits, resolve_rrf_k, resolve_rrf_weights
from rag_lab.retrieval.hybrid_base import QUERY_VECTOR_CACHE, EngineFor
from rag_lab.retrieval.hybrid_faq import FaqSteps, filter_negative_questions, negative_question_matches
from rag_lab.retrieval.hybrid_hydrate import HydrateStep, chunk_to_search_result
from rag_lab.retrieval.hybrid_image import ImageRecallStep
from rag_lab.retrieval.hybrid_trace import HybridTrace
from rag_lab.retrieval.image_recall import has_image_vectors
from rag_lab.retrieval.sharing import can_view
from rag_lab.retrieval.store_groups import (
    EmbeddingUnavailable,
    RetrievalRequest,
    SearchError,
    StoreGroup,
    VectorStoreUnavailable,
    _no_results,
    classify_results,
    fan_out,
    retrieve_group,
)
from rag_lab.types.errors import KnowledgeBaseNotFound, MixedEmbeddingSpaces
from rag_lab.types.params import PipelineParams
from rag_lab.types.search_result import SearchResult

if TYPE_CHECKING:
    from rag_lab.knowledge.models import KnowledgeBase

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
    "EngineFor",
    "QUERY_VECTOR_CACHE",
    "SearchParams",
    "chunk_to_search_result",
]


def normalize_match_count(match_count: int, params: PipelineParams) -> int:
    """§5.1: ``match_count <= 0`` → ``params.default_retrieval_top_k`` (50)."""
    return match_count if match_count > 0 else params.default_retrieval_top_k


def pool_size(match_count: int, n_kbs: int, params: PipelineParams) -> int:
    """§5.6: ``min(max(match_count * factor, min) * n_kbs, cap)`` with the normalised match count
    (defaults: factor 5, min 50, cap 500)."""
    mc = normalize_match_count(match_count, params)
    per_kb = max(mc * params.over_recall_factor, params.over_recall_min)
    return min(per_kb * max(1, n_kbs), params.retrieval_pool_max)


class HybridSearcher(FaqSteps, ImageRecallStep, HydrateStep):
    """§5 HybridSearch over a workspace. ``embedder_for(kb)`` returns the embedder of a KB's space
    (or ``None``); ``engine_for(kb)`` returns ``(store group key, engine)`` and defaults to the
    workspace's single :class:`~rag_lab.retrieval.engine.LocalEngine`. ``image_embedder_for(kb)``
    returns the joint text/image embedder of a KB with image vectors (``None``, the default,
    disables image recall)."""

    async def search(self, primary_kb_id: str, sp: SearchParams) -> list[SearchResult]:
        results, _ = await self.search_with_trace(primary_kb_id, sp)
        return results

    async def search_with_paths(
        self, primary_kb_id: str, sp: SearchParams
    ) -> tuple[list[SearchResult], Callable[[], dict[str, object]]]:
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
        parts: list[object] = []
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
        """Run the search and return the results with a :class:`HybridTrace`. Its steps see one
        state of the store: the change token their caches check is read once
        (:meth:`~rag_lab.knowledge.store_db.StoreDB.one_state`)."""
        with self.workspace.store.one_state():
            return await self._search(primary_kb_id, sp)

    async def _search(self, primary_kb_id: str, sp: SearchParams) -> tuple[list[SearchResult], HybridTrace]:
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
        vec, kw = classify_results(results)  # each retriever's hits, made when read (HitRows)
        if image_hits:
            vec = [*vec, *image_hits]
        trace.vector_hits, trace.keyword_hits = vec, kw
        if not vec and not kw:
            return [], trace

        k = resolve_rrf_k(p.rrf_k)
        wv, wk = resolve_rrf_weights(p.rrf_vector_weight, p.rrf_keyword_weight)
        ranked = fuse_ranked(vec, kw, k, wv, wk, normalize=True)
        trace.fusion = "rrf" if vec and kw else ("dedup_vector" if vec else "dedup_keywords")

        if primary.type == "faq":
            if len(ranked) < match_count and len(vec) == pool:
                fused = await self._faq_iterate(groups, query, match_count, trace)
            else:
                fused = await self._negative_filter(ranked_hits(ranked), query, trace)
            ranked = Ranked.of(fused)
        trace.ranked = ranked
        # hydration reads match_count rows: in this thread, a hand-off would cost more than the
        # reads; only the hits it reads are made
        results_out = self._hydrate(ranked[:match_count], trace)
        return results_out, trace
