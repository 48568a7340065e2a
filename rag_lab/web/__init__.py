"""Web search providers and the page fetcher (spec §4.4.2, §4.7).

The lab config's ``web:`` section builds them (:func:`web_services_from_config`)::

    web:
      search:
        type: local_folder          # offline: a folder of saved .html/.md/.txt pages
        folder: web_pages           # relative to the current directory
        snippet_chars: 300
      # search: {type: searxng, base_url: "http://127.0.0.1:8888", timeout_s: 10,
      #          params: {language: en}}
      fetch:
        timeout_s: 10
        max_download_bytes: 2000000
        allow_file: false           # true lets WEB_FETCH read file:// URLs under file_root
        file_root: web_pages        # default with allow_file: the local_folder search folder
        allow_addresses: []         # CIDR networks fetched although not public, e.g. [10.1.0.0/16]
        extractor: trafilatura      # or html.parser

Page URLs come from data, so fetching is guarded (rag_lab.web.policy): public addresses only,
re-checked on every redirect and on the connected address, no proxies, size and time caps.

Either part may be left out; web search and fetch still have to be switched on per request
(``web_search_enabled`` / ``web_fetch_enabled`` params).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rag_lab.web.fetch import FetchedPage, FetchError, PageFetcher, extract_main_text, truncate_utf8
from rag_lab.web.providers import (
    HttpJsonSearchProvider,
    LocalFolderProvider,
    LocalPage,
    WebSearchError,
    WebSearchProvider,
    WebSearchResult,
    best_snippet,
)

__all__ = [
    "FetchError",
    "FetchedPage",
    "HttpJsonSearchProvider",
    "LocalFolderProvider",
    "LocalPage",
    "PageFetcher",
    "WebConfigError",
    "WebSearchError",
    "WebSearchProvider",
    "WebSearchResult",
    "best_snippet",
    "build_page_fetcher",
    "build_web_search",
    "extract_main_text",
    "truncate_utf8",
    "web_services_from_config",
]

SEARCH_TYPES = {
    "local_folder": ("folder", "default_max_results", "snippet_chars", "source"),
    "searxng": ("base_url", "path", "timeout_s", "default_max_results", "params", "headers", "trust_env"),
    "http_json": ("base_url", "path", "timeout_s", "default_max_results", "params", "headers", "trust_env"),
}
FETCH_KEYS = (
    "timeout_s",
    "max_download_bytes",
    "allow_file",
    "file_root",
    "allow_addresses",
    "extractor",
    "user_agent",
    "max_redirects",
    "trust_env",
)


class WebConfigError(ValueError):
    """A bad ``web:`` config section; the message names the key and value."""


def _mapping(value: object, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise WebConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
    return dict(value)


def build_web_search(
    cfg: Mapping[str, object], source: str = "web.search", base_dir: str | Path | None = None
) -> WebSearchProvider:
    """A provider from ``{type: local_folder|searxng|http_json, …}``; relative folders are
    resolved against ``base_dir`` (default: the current directory)."""
    cfg = _mapping(cfg, source)
    kind = cfg.pop("type", None)
    if kind not in SEARCH_TYPES:
        raise WebConfigError(f"{source}.type={kind!r} must be one of {', '.join(SEARCH_TYPES)}")
    unknown = sorted(set(cfg) - set(SEARCH_TYPES[kind]))
    if unknown:
        raise WebConfigError(
            f"{source}: unknown key(s) {', '.join(unknown)} for type {kind}; allowed: {', '.join(SEARCH_TYPES[kind])}"
        )
    try:
        if kind == "local_folder":
            if "folder" not in cfg:
                raise WebConfigError(f"{source}.folder is required for type local_folder")
            folder = Path(cfg.pop("folder"))
            if not folder.is_absolute() and base_dir is not None:
                folder = Path(base_dir) / folder
            return LocalFolderProvider(folder, **cfg)
        if "base_url" not in cfg:
            raise WebConfigError(f"{source}.base_url is required for type {kind}")
        return HttpJsonSearchProvider(cfg.pop("base_url"), **cfg)
    except (WebSearchError, TypeError) as exc:
        raise WebConfigError(f"{source}: {exc}") from None


def build_page_fetcher(cfg: Mapping[str, object] | None, source: str = "web.fetch") -> PageFetcher:
    """A :class:`PageFetcher` from ``{timeout_s, max_download_bytes, allow_file, extractor, …}``."""
    cfg = _mapping(cfg, source)
    unknown = sorted(set(cfg) - set(FETCH_KEYS))
    if unknown:
        raise WebConfigError(f"{source}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(FETCH_KEYS)}")
    try:
        return PageFetcher(**cfg)
    except (ValueError, TypeError) as exc:
        raise WebConfigError(f"{source}: {exc}") from None


def web_services_from_config(
    web: Mapping[str, object] | None, source: str = "web", base_dir: str | Path | None = None
) -> tuple[WebSearchProvider | None, PageFetcher | None]:
    """``(provider or None, fetcher or None)`` from the lab config's ``web:`` section."""
    web = _mapping(web, source)
    unknown = sorted(set(web) - {"search", "fetch"})
    if unknown:
        raise WebConfigError(f"{source}: unknown key(s) {', '.join(unknown)}; allowed: fetch, search")
    provider = build_web_search(web["search"], f"{source}.search", base_dir) if web.get("search") is not None else None
    fetch_cfg = _mapping(web.get("fetch"), f"{source}.fetch")
    if fetch_cfg.get("file_root") is not None:
        root = Path(fetch_cfg["file_root"])
        if not root.is_absolute() and base_dir is not None:
            fetch_cfg["file_root"] = Path(base_dir) / root
    elif fetch_cfg.get("allow_file") and isinstance(provider, LocalFolderProvider):
        fetch_cfg["file_root"] = provider.folder  # the saved pages the search returns, nothing else
    fetcher = build_page_fetcher(fetch_cfg, f"{source}.fetch") if "fetch" in web else None
    return provider, fetcher
