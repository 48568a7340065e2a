"""CHUNK_SEARCH_PARALLEL: chunk search ∥ entity search on clones, merged and deduplicated (§4.4)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rag_lab.pipeline.contracts import StageContract
from rag_lab.pipeline.plugin import ErrSearch, ErrSearchNothing, NextFn, PluginError, run_parallel
from rag_lab.pipeline.plugins.base import StagePlugin
from rag_lab.pipeline.plugins.search import compact_results
from rag_lab.searchutil.dedup import remove_duplicate_results
from rag_lab.types.chat_manage import ChatManage
from rag_lab.types.diagnostics import SearchDiagnostics
from rag_lab.types.events import EventType
from rag_lab.types.intent import needs_retrieval

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.pipeline.container import Services
    from rag_lab.pipeline.plugins.search import PluginSearch
    from rag_lab.pipeline.plugins.search_entity import PluginSearchEntity

log = logging.getLogger(__name__)


async def _noop() -> PluginError | None:
    return None


class PluginSearchParallel(StagePlugin):
    events = (EventType.CHUNK_SEARCH_PARALLEL,)
    contract = StageContract(
        reads=("state.entity", "state.graph_result", "state.intent", "state.search_result"),
        writes=(
            "state.diagnostics.entity_search",
            "state.diagnostics.query_expansion",
            "state.diagnostics.query_expansion_variants",
            "state.diagnostics.search",
            "state.graph_result",
            "state.search_result",
        ),
        params=(),
        kb=(),
    )

    def __init__(self, services: Services, search: PluginSearch, entity: PluginSearchEntity | None = None) -> None:
        super().__init__(services)
        self.search = search
        self.entity = entity

    async def on_event(self, event: EventType, chat: ChatManage, next: NextFn) -> PluginError | None:
        if not needs_retrieval(chat):
            return await next()
        chunk_chat, entity_chat = chat.clone(), chat.clone()
        errors: dict[str, PluginError | None] = {}

        async def chunk_search() -> None:
            err = await self.search.on_event(EventType.CHUNK_SEARCH, chunk_chat, _noop)
            errors["chunk_search"] = None if err is ErrSearchNothing else err

        async def entity_search() -> None:
            if not chat.state.entity or self.entity is None:
                return
            err = await self.entity.on_event(EventType.ENTITY_SEARCH, entity_chat, _noop)
            errors["entity_search"] = None if err is ErrSearchNothing else err

        crashed = await run_parallel({"chunk_search": chunk_search, "entity_search": entity_search})
        for name, exc in crashed.items():
            log.error("%s crashed: %s", name, exc)
            errors[name] = ErrSearch.with_error(exc)
        chat.state.search_result = remove_duplicate_results(
            chunk_chat.state.search_result + entity_chat.state.search_result
        )
        chat.state.diagnostics.update(chunk_chat.state.diagnostics)
        chat.state.diagnostics.update(entity_chat.state.diagnostics)
        search_diag = chat.state.diagnostics.get("search")
        if isinstance(search_diag, SearchDiagnostics):  # the stage's output: graph hits in, duplicates out
            search_diag.results = compact_results(chat.state.search_result)
        if chunk_chat.state.graph_result is not None or entity_chat.state.graph_result is not None:
            chat.state.graph_result = entity_chat.state.graph_result
        if not chat.state.search_result:
            chunk_err = errors.get("chunk_search")
            return chunk_err if chunk_err is not None else ErrSearchNothing
        for name, err in errors.items():
            if err is not None:
                log.warning("%s failed but results exist: %s", name, err)
        return await next()
