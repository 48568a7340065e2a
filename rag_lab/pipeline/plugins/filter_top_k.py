"""FILTER_TOP_K: deterministic sort and truncation to rerank_top_k (spec §4.9, seed)."""

from __future__ import annotations

import logging

from rag_lab.pipeline.contracts import StageContract
from rag_lab.pipeline.plugin import NextFn, PluginError
from rag_lab.pipeline.plugins.base import StagePlugin
from rag_lab.types.chat_manage import ChatManage
from rag_lab.types.diagnostics import FilterTopKDiagnostics
from rag_lab.types.events import EventType
from rag_lab.types.intent import needs_retrieval
from rag_lab.types.search_result import SearchResult

log = logging.getLogger(__name__)


def sort_search_results_deterministically(results: list[SearchResult | None]) -> list[SearchResult | None]:
    """Score desc, then knowledge_id, chunk_type, chunk_index, id ascending (bytes); None last."""
    present = [r for r in results if r is not None]
    present.sort(
        key=lambda r: (
            -r.score,
            r.knowledge_id.encode("utf-8"),
            r.chunk_type.encode("utf-8"),
            r.chunk_index,
            r.id.encode("utf-8"),
        )
    )
    return present + [None] * (len(results) - len(present))


def filter_top_k(results: list[SearchResult | None], k: int) -> tuple[list[SearchResult | None], int | None]:
    """The deterministic sort, then the first ``k`` (when ``k > 0``) of the results not kept by
    the rerank outside the top-K (``kept_by``, e.g. images), which follow. Returns the list and,
    when it truncated, how many competed for the ``k`` places."""
    ordered = sort_search_results_deterministically(results)
    # seed: results kept by the rerank outside the top-K (kept_by, images) do not take a place
    extra = [r for r in ordered if r is not None and r.metadata.get("kept_by")]
    main = [r for r in ordered if r is None or not r.metadata.get("kept_by")]
    if k > 0 and len(main) > k:
        return main[:k] + extra, len(main)
    return main + extra, None


def top_k_diagnostics(
    name: str, results: list[SearchResult | None], kept: list[SearchResult | None], before: int, k: int
) -> FilterTopKDiagnostics:
    """What a truncating FILTER_TOP_K records: the list, the counts and the results it cut."""
    left = {id(r) for r in kept}
    cut = [r for r in sort_search_results_deterministically(results) if r is not None and id(r) not in left]
    return FilterTopKDiagnostics(
        field=name, before=before, after=k, cut_ids=[r.id for r in cut], cut_doc_ids=[r.knowledge_id for r in cut]
    )


class PluginFilterTopK(StagePlugin):
    events = (EventType.FILTER_TOP_K,)
    contract = StageContract(
        # the first non-empty of merge_result, rerank_result, search_result is read and written back
        # (a pipeline without CHUNK_MERGE cuts the rerank or search results)
        reads=(
            "request.rerank_top_k",
            "state.intent",
            "state.merge_result",
            "state.rerank_result",
            "state.search_result",
        ),
        writes=("state.diagnostics.filter_top_k", "state.merge_result", "state.rerank_result", "state.search_result"),
        params=(),
        kb=(),
    )

    async def on_event(self, event: EventType, chat: ChatManage, next: NextFn) -> PluginError | None:
        if not needs_retrieval(chat):
            return await next()
        state = chat.state
        for name in ("merge_result", "rerank_result", "search_result"):
            results = getattr(state, name)
            if results:
                break
        else:
            log.info("filter_top_k: nothing to filter")
            return await next()
        kept, before = filter_top_k(results, chat.request.rerank_top_k)
        if before is not None:
            state.diagnostics["filter_top_k"] = top_k_diagnostics(
                name, results, kept, before, chat.request.rerank_top_k
            )
        setattr(state, name, kept)
        return await next()
