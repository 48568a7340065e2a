"""Web search providers (spec §4.4.2): ``await provider.search(query, max_results)``.

* :class:`LocalFolderProvider` — offline: a folder of saved pages (``.html``/``.htm``,
  ``.md``/``.markdown``, ``.txt``) ranked with BM25 (the keyword index and tokenizer of the
  knowledge bases, so Chinese is segmented with jieba). Each page's URL comes from, in order:

  1. ``urls.json`` in the folder: ``{"relative/path.html": "https://…", …}`` (paths relative to
     the folder, ``/``-separated; every key must name a page of the folder);
  2. a front-matter block at the top of the file — a first line ``---``, ``key: value`` lines
     (YAML), a closing ``---`` — with ``url:`` (and optionally ``title:``, ``published:``);
     the block is not part of the page text;
  3. for HTML, ``<link rel="canonical" href="…">``;
  4. otherwise the file's own ``file://`` URL (fetchable by a ``PageFetcher(allow_file=True)``).

  Titles come from the front matter, the HTML ``<title>``, the first Markdown ``# `` heading, or
  the file name. The snippet is the window of the page (at most ``snippet_chars`` characters)
  holding the most distinct query terms (:func:`best_snippet`).

* :class:`HttpJsonSearchProvider` — a self-hosted JSON search API with SearXNG's shape:
  ``GET {base_url}/search?q=…&format=json`` → ``{"results": [{"title", "url", "content",
  "publishedDate", "engine"}, …]}``. One page of results is read. Failures raise
  :class:`WebSearchError` naming the request URL and the HTTP status; the search stage logs them
  and goes on without web results (§4.4.2 step 2).

Page reading and snippets are in :mod:`rag_lab.web.pages` (re-exported here).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

from rag_lab.searchutil.conversion import WebSearchResult
from rag_lab.searchutil.text import markdown_title
from rag_lab.types.params import PipelineParams
from rag_lab.web.pages import (
    LocalPage,
    WebSearchError,
    _as_datetime,
    _canonical_url,
    _check_url,
    best_snippet,
    parse_front_matter,
)

if TYPE_CHECKING:
    import httpx

    from rag_lab.retrieval.tokenization import Tokenizer

__all__ = [
    "WebSearchProvider",
    "WebSearchResult",
    "WebSearchError",
    "LocalFolderProvider",
    "LocalPage",
    "HttpJsonSearchProvider",
    "best_snippet",
    "parse_front_matter",
]

DEFAULT_MAX_RESULTS: int = PipelineParams.model_fields["web_search_max_results"].default  # §4.4.2 step 1


@runtime_checkable
class WebSearchProvider(Protocol):
    """What the search stage calls. ``max_results <= 0`` means the provider's default."""

    async def search(self, query: str, max_results: int = DEFAULT_MAX_RESULTS) -> list[WebSearchResult]: ...


class LocalFolderProvider:
    """Offline web search over a folder of saved pages (see the module docstring).

    The folder is scanned on the first search (or by :meth:`refresh`, e.g. after adding pages)."""

    SUFFIXES = (".html", ".htm", ".md", ".markdown", ".txt")
    URLS_FILE = "urls.json"

    def __init__(
        self,
        folder: str | Path,
        *,
        default_max_results: int = DEFAULT_MAX_RESULTS,
        snippet_chars: int = 300,
        source: str = "local_folder",
        tokenizer: Tokenizer | None = None,
    ) -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise WebSearchError(f"{self.folder}: web page folder not found")
        if default_max_results <= 0:
            raise WebSearchError(f"default_max_results={default_max_results} must be positive")
        if snippet_chars <= 0:
            raise WebSearchError(f"snippet_chars={snippet_chars} must be positive")
        self.default_max_results = default_max_results
        self.snippet_chars = snippet_chars
        self.source = source
        if tokenizer is None:
            from rag_lab.retrieval.tokenization import DEFAULT_TOKENIZER

            tokenizer = DEFAULT_TOKENIZER
        self.tokenizer = tokenizer
        self._pages: dict[str, LocalPage] | None = None
        self._index: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        n = "?" if self._pages is None else len(self._pages)
        return f"LocalFolderProvider({str(self.folder)!r}, pages={n})"

    # -- scanning ---------------------------------------------------------------------------
    def _read_urls_json(self, rels: set[str]) -> dict[str, str]:
        f = self.folder / self.URLS_FILE
        if not f.exists():
            return {}
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise WebSearchError(f"{f}: cannot read: {exc}") from None
        if not isinstance(data, dict):
            raise WebSearchError(f'{f}: expected a JSON object {{"page path": "url", …}}')
        out = {}
        for key, url in data.items():
            rel = str(key).replace("\\", "/")
            rel = rel[2:] if rel.startswith("./") else rel
            if rel not in rels:
                raise WebSearchError(
                    f"{f}: {key!r} is not a page of {self.folder} (pages: .html .htm .md .markdown .txt)"
                )
            out[rel] = _check_url(url, f"{f}: {key!r}")
        return out

    def _read_page(self, path: Path, rel: str, urls: Mapping[str, str]) -> LocalPage:
        from rag_lab.knowledge.ingestion import html_to_text

        where = str(path)
        try:
            raw = path.read_bytes().decode("utf-8-sig")
        except OSError as exc:
            raise WebSearchError(f"{where}: cannot read: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise WebSearchError(f"{where}: not valid UTF-8 (byte {exc.start}: {exc.reason})") from None
        raw = raw.replace("\r\n", "\n").replace("\r", "\n")
        meta, body = parse_front_matter(raw, where)
        unknown = sorted(set(meta) - {"url", "title", "published", "date"})
        if unknown:
            raise WebSearchError(
                f"{where}: unknown front matter key(s) {', '.join(unknown)} (allowed: url, title, published)"
            )
        is_html = path.suffix.lower() in (".html", ".htm")
        if is_html:
            html_title, text = html_to_text(body)
        else:
            html_title, text = "", body.strip()
        if rel in urls:
            url, url_from = urls[rel], "urls.json"
        elif meta.get("url"):
            url, url_from = _check_url(meta["url"], where), "front matter"
        elif is_html and _canonical_url(body):
            url, url_from = _check_url(_canonical_url(body), where), "canonical"
        else:
            url, url_from = path.resolve().as_uri(), "file"
        title = (
            str(meta.get("title") or "").strip()
            or html_title
            or (markdown_title(text) if not is_html else "")
            or path.stem
        )
        published = _as_datetime(meta.get("published", meta.get("date")), where)
        return LocalPage(rel, url, title, text, published, url_from)

    def refresh(self) -> int:
        """(Re)scan the folder and rebuild the BM25 index; returns the number of pages."""
        from rag_lab.retrieval.keyword_index import KeywordIndex

        files = sorted(p for p in self.folder.rglob("*") if p.is_file() and p.suffix.lower() in self.SUFFIXES)
        rels = {p.relative_to(self.folder).as_posix(): p for p in files}
        urls = self._read_urls_json(set(rels))
        pages: dict[str, LocalPage] = {}
        by_url: dict[str, str] = {}
        for rel, path in rels.items():
            page = self._read_page(path, rel, urls)
            if not page.text.strip():
                continue
            if page.url in by_url:
                raise WebSearchError(
                    f"{self.folder}: pages {by_url[page.url]!r} and {rel!r} have the same url {page.url!r}"
                )
            by_url[page.url] = rel
            pages[rel] = page
        index = KeywordIndex(tokenizer=self.tokenizer)
        index.add(list(pages), [f"{p.title}\n{p.text}" for p in pages.values()])
        with self._lock:
            self._pages, self._index = pages, index
        return len(pages)

    @property
    def pages(self) -> list[LocalPage]:
        """The indexed pages, by path."""
        if self._pages is None:
            self.refresh()
        assert self._pages is not None
        return list(self._pages.values())

    # -- searching --------------------------------------------------------------------------
    def search_sync(self, query: str, max_results: int = DEFAULT_MAX_RESULTS) -> list[WebSearchResult]:
        """Best pages by BM25 (score > 0), score descending then path."""
        if self._pages is None:
            self.refresh()
        with self._lock:
            pages, index = self._pages, self._index
        assert pages is not None
        n = max_results if max_results > 0 else self.default_max_results
        terms = self.tokenizer.tokenize(query or "")
        if not terms or not pages:
            return []
        out = []
        for rel, _score in index.search(terms, n):
            page = pages[rel]
            out.append(
                WebSearchResult(
                    title=page.title,
                    url=page.url,
                    snippet=best_snippet(page.text, terms, self.snippet_chars),
                    content="",
                    source=self.source,
                    published_at=page.published_at,
                )
            )
        return out

    async def search(self, query: str, max_results: int = DEFAULT_MAX_RESULTS) -> list[WebSearchResult]:
        return await asyncio.to_thread(self.search_sync, query, max_results)


# -- HTTP JSON (SearXNG-shaped) ----------------------------------------------------------------
def _parse_published(value: object) -> datetime | None:
    """SearXNG's ``publishedDate`` (ISO 8601, may be null or odd): a datetime or None."""
    if not value or not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.strip())
    except ValueError:
        return None


class HttpJsonSearchProvider:
    """A SearXNG-compatible JSON search endpoint (see the module docstring).

    ``params`` are extra query parameters sent with every request (e.g. ``{"engines": "wikipedia",
    "language": "en"}``); ``headers`` extra HTTP headers (e.g. an API key for a gateway)."""

    def __init__(
        self,
        base_url: str,
        *,
        path: str = "/search",
        timeout_s: float = 10.0,
        default_max_results: int = DEFAULT_MAX_RESULTS,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        trust_env: bool = True,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        if not base_url or urlsplit(base_url).scheme.lower() not in ("http", "https"):
            raise WebSearchError(f"base_url={base_url!r} must be an http(s) URL")
        if not timeout_s > 0:
            raise WebSearchError(f"timeout_s={timeout_s!r} must be > 0")
        if default_max_results <= 0:
            raise WebSearchError(f"default_max_results={default_max_results} must be positive")
        self.base_url = base_url.rstrip("/")
        self.path = "/" + path.lstrip("/") if path else ""
        self.timeout_s = float(timeout_s)
        self.default_max_results = default_max_results
        self.params = dict(params or {})
        self.headers = dict(headers or {})
        self.trust_env = trust_env
        self._client = client

    def __repr__(self) -> str:
        return f"HttpJsonSearchProvider({self.base_url + self.path!r})"

    @property
    def endpoint(self) -> str:
        return self.base_url + self.path

    async def search(self, query: str, max_results: int = DEFAULT_MAX_RESULTS) -> list[WebSearchResult]:
        import httpx

        n = max_results if max_results > 0 else self.default_max_results
        params = {**self.params, "q": query, "format": "json"}
        own = self._client is None
        client = self._client or httpx.AsyncClient(timeout=httpx.Timeout(self.timeout_s), trust_env=self.trust_env)
        request_url = self.endpoint
        try:
            try:
                req = client.build_request("GET", self.endpoint, params=params, headers=self.headers)
                request_url = str(req.url)
                resp = await asyncio.wait_for(client.send(req), self.timeout_s)
            except (TimeoutError, httpx.TimeoutException):
                raise WebSearchError(f"web search {request_url}: timed out after {self.timeout_s:g}s") from None
            except httpx.HTTPError as exc:
                raise WebSearchError(f"web search {request_url}: {type(exc).__name__}: {exc}") from None
        finally:
            if own:
                await client.aclose()
        if resp.status_code != 200:
            hint = ""
            if resp.status_code == 403:
                hint = " (for SearXNG, enable the json format under search.formats in settings.yml)"
            raise WebSearchError(
                f"web search {request_url}: HTTP {resp.status_code} {resp.reason_phrase or ''}".rstrip() + hint
            )
        try:
            data = resp.json()
        except ValueError as exc:
            ctype = resp.headers.get("content-type", "?")
            raise WebSearchError(
                f"web search {request_url}: response is not JSON (content-type {ctype}): {exc}"
            ) from None
        results = data.get("results") if isinstance(data, dict) else None
        if not isinstance(results, list):
            raise WebSearchError(f"web search {request_url}: field 'results' is missing or not a list")
        out: list[WebSearchResult] = []
        for i, item in enumerate(results[:n]):
            if not isinstance(item, dict):
                raise WebSearchError(f"web search {request_url}: results[{i}] is not an object")

            def text(field: str) -> str:
                v = item.get(field)  # noqa: B023 (called within this iteration)
                return v.strip() if isinstance(v, str) else ""

            out.append(
                WebSearchResult(
                    title=text("title"),
                    url=text("url"),
                    snippet=text("content"),
                    content="",
                    source=text("engine") or ", ".join(e for e in item.get("engines") or [] if isinstance(e, str)),
                    published_at=_parse_published(item.get("publishedDate")),
                )
            )
        return out
