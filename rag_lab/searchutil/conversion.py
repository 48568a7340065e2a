"""Web search results → SearchResult (spec §4.4.2 step 3)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from rag_lab.types.params import PipelineParams
from rag_lab.types.search_result import ChunkType, MatchType, SearchResult


@dataclass(slots=True)
class WebSearchResult:
    title: str = ""
    url: str = ""
    snippet: str = ""
    content: str = ""
    source: str = ""
    published_at: datetime | None = None


def _get(page: object, name: str) -> object:
    return page.get(name) if isinstance(page, dict) else getattr(page, name, None)


def convert_web_search_results(pages: Iterable[object], params: PipelineParams) -> list[SearchResult]:
    out: list[SearchResult] = []
    for i, page in enumerate(pages):
        url = str(_get(page, "url") or "")
        title = str(_get(page, "title") or "")
        snippet = str(_get(page, "snippet") or "")
        body = str(_get(page, "content") or "")
        content = title
        for part in (snippet, body):
            if part:
                content = f"{content}\n\n{part}" if content else part
        meta = {"url": url, "source": str(_get(page, "source") or ""), "title": title, "snippet": snippet}
        published = _get(page, "published_at")
        if isinstance(published, datetime):
            meta["published_at"] = published.isoformat()
        elif published:
            meta["published_at"] = str(published)
        rid = url or f"web_search_{i}"
        out.append(
            SearchResult(
                id=rid,
                content=content,
                knowledge_id=rid,
                knowledge_title=title,
                start_at=0,
                end_at=len(content),
                seq=1,
                score=params.web_result_score,
                match_type=MatchType.WEB_SEARCH,
                sub_chunk_id=[],
                metadata=meta,
                chunk_type=ChunkType.WEB_SEARCH.value,
                knowledge_source="web_search",
            )
        )
    return out
