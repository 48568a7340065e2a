"""CHUNK_SEARCH: hybrid search over the turn's search targets (spec §4.4.1).

Targets are grouped by embedding-model identity; the query is embedded once per group; whole-KB
targets share one HybridSearch call, constrained targets get one call each.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rag_lab.models.timeouts import call_with_timeout
from rag_lab.pipeline.contracts import StageContract
from rag_lab.pipeline.plugin import ErrSearch, ErrSearchNothing, NextFn, PluginError
from rag_lab.pipeline.plugins.base import StagePlugin
from rag_lab.retrieval.base import SearchParams
from rag_lab.types.chat_manage import ChatManage, PipelineRequest, SearchTarget, has_knowledge_retrieval_scope
from rag_lab.types.diagnostics import Deferred, QueryExpansionDiagnostics, SearchDiagnostics
from rag_lab.types.events import EventType
from rag_lab.types.search_result import SearchResult

if TYPE_CHECKING:
    from rag_lab.knowledge.models import KnowledgeBase

log = logging.getLogger(__name__)


def target_searches(
    req: PipelineRequest,
    targets: Sequence[SearchTarget],
    query_text: str,
    embedding: np.ndarray | None = None,
    disable_vector: bool = False,
) -> list[tuple[str, SearchParams]]:
    """The HybridSearch calls for one group of targets (§4.4.1 step 6): one over every whole-KB
    target without tags, then one per other target (a ``knowledge`` target without documents is
    skipped), each with its recall thresholds; ``(primary KB id, params)`` in call order."""

    def whole_kb(t: SearchTarget) -> bool:
        return t.type == "knowledge_base" and not t.tag_ids

    full = [t for t in targets if whole_kb(t)]
    calls: list[tuple[str, SearchParams]] = []
    if full:
        calls.append(
            (
                full[0].knowledge_base_id,
                SearchParams(
                    query_text=query_text,
                    query_embedding=embedding,
                    knowledge_base_ids=[t.knowledge_base_id for t in full],
                    vector_threshold=req.vector_threshold,
                    keyword_threshold=req.keyword_threshold,
                    match_count=req.embedding_top_k,
                    disable_vector_match=disable_vector,
                    tenant_id=req.tenant_id,
                ),
            )
        )
    for t in targets:
        if whole_kb(t) or (t.type == "knowledge" and not t.knowledge_ids):
            continue
        vt, kt = t.recall_thresholds(req.vector_threshold, req.keyword_threshold)
        calls.append(
            (
                t.knowledge_base_id,
                SearchParams(
                    query_text=query_text,
                    query_embedding=embedding,
                    vector_threshold=vt,
                    keyword_threshold=kt,
                    match_count=req.embedding_top_k,
                    tag_ids=list(t.tag_ids),
                    scope_tag_ids=list(t.scope_tag_ids),
                    knowledge_ids=list(t.knowledge_ids) if t.type == "knowledge" else [],
                    disable_vector_match=disable_vector,
                    tenant_id=req.tenant_id,
                ),
            )
        )
    return calls


def compact_results(results: Sequence[SearchResult]) -> list[list[str | float]]:
    """``[chunk id, document id, score]`` of each result, in order (``SearchDiagnostics.results``)."""
    return [[r.id, r.knowledge_id, float(r.score)] for r in results]


class PluginSearch(StagePlugin):
    events = (EventType.CHUNK_SEARCH,)
    contract = StageContract(
        reads=(
            "request.embedding_top_k",
            "request.enable_query_expansion",
            "request.keyword_threshold",
            "request.knowledge_base_ids",
            "request.knowledge_ids",
            "request.query",
            "request.rerank_top_k",
            "request.search_targets",
            "request.tenant_id",
            "request.vector_threshold",
            "request.web_search_enabled",
            "request.web_search_max_results",
            "request.web_search_provider_id",
            "state.rewrite_query",
            "state.search_result",
        ),
        writes=(
            "state.diagnostics.query_expansion",
            "state.diagnostics.query_expansion_variants",
            "state.diagnostics.search",
            "state.search_result",
        ),
        # with what HybridSearch reads (image recall, FAQ iteration): the stage cache keys on these
        params=(
            "default_retrieval_top_k",
            "faq_iteration_max_rounds",
            "faq_iteration_start_factor",
            "image_recall_max_requests",
            "image_recall_top_k_factor",
            "image_vector_threshold",
            "over_recall_factor",
            "over_recall_min",
            "query_expansion_concurrency",
            "query_expansion_keyword_factor",
            "query_expansion_max_variants",
            "query_expansion_top_k_factor",
            "retrieval_pool_max",
            "rrf_k",
            "rrf_keyword_weight",
            "rrf_vector_weight",
            "search_timeout_s",
            "store_fanout_concurrency",
            "store_fanout_timeout_s",
            "web_result_score",
        ),
        kb=(
            "embedding_dim",
            "embedding_model_key",
            "id",
            "keyword_enabled",
            "metadata",
            "name",
            "tenant_id",
            "type",
            "vector_enabled",
        ),
    )

    async def on_event(self, event: EventType, chat: ChatManage, next: NextFn) -> PluginError | None:
        req = chat.request
        if (
            not has_knowledge_retrieval_scope(req.search_targets, req.knowledge_base_ids, req.knowledge_ids)
            and not req.web_search_enabled
        ):
            log.error("chunk_search: no knowledge scope and web search disabled")
            return None  # spec App. B.17: success without next()
        diag = SearchDiagnostics(query=chat.state.rewrite_query or req.query)
        chat.state.diagnostics["search"] = diag
        kb_task = asyncio.ensure_future(self.search_by_targets(chat, diag))
        web_task = asyncio.ensure_future(self.search_web_if_enabled(chat))
        results: list[SearchResult] = []
        kb_err: BaseException | None = None
        for fut in asyncio.as_completed([kb_task, web_task]):
            try:
                got, err = await fut
            except Exception as exc:  # a crashed task counts as that branch's error
                got, err = [], exc
            results.extend(got)
            if err is not None and kb_err is None:
                kb_err = err
        if kb_err is not None and not results:
            return ErrSearch.with_error(kb_err)
        if kb_err is not None:
            log.warning("chunk_search: partial failure: %s", kb_err)
        chat.state.search_result = results

        if req.enable_query_expansion and len(results) < max(1, req.embedding_top_k):
            from rag_lab.pipeline.plugins.query_expansion import expand_search

            extra = await expand_search(chat, self.services)
            if extra is not None:
                chat.state.search_result = results + extra
                chat.state.diagnostics["query_expansion"] = QueryExpansionDiagnostics(triggered=True, added=len(extra))
        diag.results = compact_results(chat.state.search_result)

        if chat.state.search_result:
            return await next()
        return ErrSearchNothing

    # -- KB search --------------------------------------------------------------------------
    async def search_by_targets(
        self, chat: ChatManage, diag: SearchDiagnostics | None = None
    ) -> tuple[list[SearchResult], BaseException | None]:
        """The knowledge-base searches of the turn; each call's per-path record goes to ``diag``
        (in call order) when the searcher gives one (``search_with_paths``)."""
        req = chat.request
        targets = [t for t in req.search_targets if t is not None]
        if not targets:
            return [], None
        ws, searcher = self.services.workspace, self.services.searcher
        if ws is None or searcher is None:
            return [], RuntimeError("no knowledge workspace is configured")
        query_text = chat.state.rewrite_query.strip()

        kbs: dict[str, KnowledgeBase | None] = {}
        for t in targets:
            if t.knowledge_base_id not in kbs:
                try:
                    kbs[t.knowledge_base_id] = ws.get_kb(t.knowledge_base_id)
                except Exception:
                    kbs[t.knowledge_base_id] = None
        groups: dict[str, list[SearchTarget]] = {}
        for t in targets:
            kb = kbs.get(t.knowledge_base_id)
            key = kb.embedding_model_key if kb is not None else ""
            groups.setdefault(key, []).append(t)

        outcomes = await asyncio.gather(
            *(self._search_group(chat, key, group, kbs, query_text) for key, group in groups.items())
        )
        if diag is not None:
            recs = [rec for _, _, group_recs in outcomes for rec in group_recs]
            diag.update(calls=Deferred(lambda: [{"kb": kb, **(rec() if callable(rec) else rec)} for kb, rec in recs]))
        results: list[SearchResult] = []
        first_err: BaseException | None = None
        for got, err, _ in outcomes:
            results.extend(got)
            if err is not None and first_err is None:
                first_err = err
        return results, first_err

    async def _search_group(
        self,
        chat: ChatManage,
        key: str,
        group: list[SearchTarget],
        kbs: dict[str, KnowledgeBase | None],
        query_text: str,
    ) -> tuple[list[SearchResult], BaseException | None, list[tuple[str, Any]]]:
        req = chat.request
        if self.services.searcher is None:
            raise RuntimeError("chunk_search: no searcher configured (Services.searcher)")
        searcher = self.services.searcher.with_params(req.params)
        errors: list[BaseException] = []
        embedding = None
        disable_vector = False
        first_kb = kbs.get(group[0].knowledge_base_id)
        if key and first_kb is not None and self.services.embedder_for is not None:
            try:
                embedder = self.services.embedder_for(first_kb)
                if embedder is None:
                    raise RuntimeError(f"no embedder for knowledge base '{first_kb.name}'")
                embedding = (await asyncio.to_thread(embedder.embed, [query_text]))[0]
            except Exception as exc:
                # keep only targets that can degrade to keyword search (§4.4.1 5.1)
                kept = []
                for t in group:
                    kb = kbs.get(t.knowledge_base_id)
                    if kb is not None and (kb.type == "faq" or (not kb.keyword_enabled and kb.vector_enabled)):
                        errors.append(exc)
                    else:
                        kept.append(t)
                group = kept
                disable_vector = True

        results: list[SearchResult] = []
        records: dict[int, tuple[str, object]] = {}  # by call position: calls finish in any order
        with_paths = getattr(type(searcher), "search_with_paths", None) is not None

        async def paths_of(n: int, primary: str, sp: SearchParams) -> list[SearchResult]:
            got, rec = await searcher.search_with_paths(primary, sp)
            records[n] = (primary, rec)  # the record, or a function building it on first read
            return got  # type: ignore[no-any-return]

        async def call(n: int, primary: str, sp: SearchParams) -> list[SearchResult]:
            # search_timeout_s bounds remote work only: a search that runs wholly in this process
            # (FAISS + BM25, the ONNX query embedder) is awaited however long it takes
            in_process = getattr(searcher, "runs_in_process", None)
            try:
                # asked before the search coroutine exists: when it raises (no embedder for a KB's
                # space), no coroutine is left un-awaited
                local = bool(in_process is not None and in_process(primary, sp))
                return await call_with_timeout(
                    paths_of(n, primary, sp) if with_paths else searcher.search(primary, sp),
                    in_process=local,
                    stage="chunk_search",
                    param="search_timeout_s",
                    seconds=req.params.search_timeout_s,
                    what=f"hybrid search on {primary} did not finish",
                )
            except Exception as exc:
                errors.append(exc)
                return []

        calls = [
            call(n, primary, sp)
            for n, (primary, sp) in enumerate(
                target_searches(req, group, query_text, embedding, disable_vector=disable_vector)
            )
        ]
        for got in await asyncio.gather(*calls):
            results.extend(got)
        return results, (errors[0] if errors else None), [records[n] for n in sorted(records)]

    # -- web search -------------------------------------------------------------------------
    async def search_web_if_enabled(self, chat: ChatManage) -> tuple[list[SearchResult], BaseException | None]:
        req = chat.request
        provider = self.services.web_search
        # §4.4.2: enabled, a provider configured, and a provider id on the request
        if not req.web_search_enabled or provider is None or not req.web_search_provider_id:
            return [], None
        try:
            pages = await provider.search(chat.state.rewrite_query, max_results=req.web_search_max_results)
        except Exception as exc:  # web errors are not failures (§4.4.2)
            log.warning("web search failed: %s", exc)
            return [], None
        from rag_lab.searchutil.conversion import convert_web_search_results

        return convert_web_search_results(pages, req.params), None
