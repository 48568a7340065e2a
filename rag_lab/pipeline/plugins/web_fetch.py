"""WEB_FETCH (spec §4.7): after rerank, the best web results get their page text instead of the
search snippet.

Runs only when web fetch *and* web search are on. The first ``web_fetch_top_n`` items of
``rerank_result`` whose knowledge source is ``web_search`` (case-insensitive) are fetched
concurrently by their id (the URL). A non-empty page text replaces the item's content, cut to
``web_fetch_max_bytes`` UTF-8 bytes plus ``"\\n...(truncated)"`` when longer. Fetch errors are
logged and never fail the stage. After a rerank error or without a rerank model,
``rerank_result`` is empty and the stage does nothing.

Replaced items are copies (the ``search_result`` item keeps its snippet). What happened to each
URL is recorded in ``state.diagnostics["web_fetch"]``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from rag_lab.pipeline.contracts import StageContract
from rag_lab.pipeline.plugin import NextFn, PluginError
from rag_lab.pipeline.plugins.base import StagePlugin
from rag_lab.types.chat_manage import ChatManage
from rag_lab.types.diagnostics import WebFetchDiagnostics
from rag_lab.types.events import EventType
from rag_lab.types.search_result import SearchResult
from rag_lab.web.fetch import TRUNCATION_MARKER, truncate_utf8

if TYPE_CHECKING:
    from rag_lab.pipeline.container import WebFetcherService

log = logging.getLogger(__name__)

WEB_SOURCE = "web_search"


def is_web_result(r: SearchResult) -> bool:
    """§4.7 step 3: knowledge source ``web_search``, case-insensitive."""
    return (r.knowledge_source or "").lower() == WEB_SOURCE


def select_web_results(results: list[SearchResult], top_n: int) -> list[int]:
    """Positions of the first ``top_n`` web results of ``results``."""
    return [i for i, r in enumerate(results) if is_web_result(r)][: max(0, top_n)]


def _fetch_url(r: SearchResult) -> str:
    """The URL to fetch: the id, except for the placeholder id of a result without a URL."""
    meta = r.metadata or {}
    if "url" in meta and not meta.get("url"):
        return ""
    return (r.id or "").strip()


class PluginWebFetch(StagePlugin):
    events = (EventType.WEB_FETCH,)
    contract = StageContract(
        reads=(
            "request.web_fetch_enabled",
            "request.web_fetch_top_n",
            "request.web_search_enabled",
            "state.rerank_result",
        ),
        writes=("state.diagnostics.web_fetch", "state.rerank_result"),
        params=("web_fetch_max_bytes", "web_fetch_top_n"),
        kb=(),
    )

    async def on_event(self, event: EventType, chat: ChatManage, next: NextFn) -> PluginError | None:
        req, state = chat.request, chat.state
        if not (req.web_fetch_enabled and req.web_search_enabled):
            return await next()
        params = req.params
        top_n = req.web_fetch_top_n if req.web_fetch_top_n > 0 else params.web_fetch_top_n
        max_bytes = params.web_fetch_max_bytes
        positions = select_web_results(state.rerank_result, top_n)
        pages: list[dict[str, object]] = []
        diag = WebFetchDiagnostics(top_n=top_n, max_bytes=max_bytes, pages=pages)
        state.diagnostics["web_fetch"] = diag
        fetcher = self.services.web_fetcher
        if fetcher is None:
            if positions:
                log.warning("web_fetch: %d web results but no web fetcher is configured", len(positions))
            diag["skipped"] = "no web fetcher configured"
            return await next()

        urls = {pos: _fetch_url(state.rerank_result[pos]) for pos in positions}
        unique = list(dict.fromkeys(u for u in urls.values() if u))
        outcomes = await asyncio.gather(*(self._fetch(fetcher, u) for u in unique))
        by_url = dict(zip(unique, outcomes))

        for pos in positions:
            url = urls[pos]
            row: dict[str, object] = {"url": url, "rank": pos}
            if not url:
                row["outcome"] = "skipped"
                row["error"] = "no url"
                pages.append(row)
                continue
            text, extractor, error, ms = by_url[url]
            row.update(extractor=extractor, ms=round(ms, 1))
            if error is not None:
                row.update(outcome="error", error=error)
            elif not text:
                row["outcome"] = "empty"
            else:
                content, cut = truncate_utf8(text, max_bytes, TRUNCATION_MARKER)
                item = state.rerank_result[pos].copy()
                item.content = content
                state.rerank_result[pos] = item
                row.update(outcome="replaced", bytes=len(text.encode("utf-8")), truncated=cut)
            pages.append(row)
        return await next()

    @staticmethod
    async def _fetch(fetcher: WebFetcherService, url: str) -> tuple[str, str | None, str | None, float]:
        """``(text, extractor, error, ms)``; errors are logged and returned, never raised."""
        t0 = time.perf_counter()
        try:
            if hasattr(fetcher, "fetch_page"):
                page = await fetcher.fetch_page(url)
                text, extractor = page.text or "", page.extractor
            else:
                text, extractor = await fetcher.fetch(url) or "", None
            if not isinstance(text, str):
                raise TypeError(f"the fetcher returned {type(text).__name__}, not str")
            return text.strip(), extractor, None, (time.perf_counter() - t0) * 1000
        except Exception as exc:
            log.warning("web_fetch: %s: %s", url, exc)
            return "", None, f"{type(exc).__name__}: {exc}", (time.perf_counter() - t0) * 1000
