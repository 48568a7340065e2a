"""Fetch a web page and extract its main text (used by WEB_FETCH, spec §4.7).

:class:`PageFetcher` downloads with an ``httpx.AsyncClient`` under one overall deadline, reads
at most ``max_download_bytes`` of the body, accepts only HTML, XHTML and plain text (checked on
the response headers, before the body is read), decodes with the declared charset (header, then
``<meta charset>``, then UTF-8 with replacement characters), and extracts the main text with
trafilatura. When trafilatura is not installed or finds nothing, a stdlib ``html.parser`` text
extraction is used instead; :attr:`FetchedPage.extractor` says which one produced the text.

URLs come from data (search results, page front matter), so every fetch goes through the
:class:`~rag_lab.web.policy.FetchPolicy`: ``http`` / ``https`` to public addresses only (checked
on every redirect hop and again on the address each connection really opens), ``file://`` only
under ``file_root`` (offline labs over a folder of saved pages), at most ``max_download_bytes``
and ``timeout_s`` per page. Every failure raises :class:`FetchError` naming the URL and what went
wrong; the WEB_FETCH stage logs it and keeps the search snippet.
"""

from __future__ import annotations

import asyncio
import codecs
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING
from urllib.parse import urlsplit
from urllib.request import url2pathname

from rag_lab.web.policy import FetchPolicy, GuardedBackend, PolicyError, guarded_transport

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)

#: media type → how its body is turned into text
SUPPORTED_MEDIA_TYPES: Mapping[str, str] = {
    "text/html": "html",
    "application/xhtml+xml": "html",
    "text/plain": "text",
    "text/markdown": "text",
    "text/x-markdown": "text",
}
#: ``file://`` suffix → media type
FILE_MEDIA_TYPES: Mapping[str, str] = {
    ".html": "text/html",
    ".htm": "text/html",
    ".xhtml": "application/xhtml+xml",
    ".txt": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
}
EXTRACTORS = ("trafilatura", "html.parser")
DEFAULT_USER_AGENT = "rag_lab-web-fetch/0.1"
TRUNCATION_MARKER = "\n...(truncated)"

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.IGNORECASE)


class FetchError(RuntimeError):
    """A page could not be fetched or read; the message names the URL."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"fetch {url!r}: {reason}")
        self.url = url
        self.reason = reason


@dataclass(slots=True)
class FetchedPage:
    """A fetched page and how its text was obtained."""

    url: str
    text: str
    extractor: str  # "trafilatura" | "html.parser" | "plain"
    status: int = 200
    final_url: str = ""
    content_type: str = ""
    bytes_read: int = 0
    #: the body was longer than ``max_download_bytes`` and only its start was read
    download_truncated: bool = False
    elapsed_ms: float = 0.0


# -- pure helpers ----------------------------------------------------------------------------
def truncate_utf8(text: str, max_bytes: int, marker: str = TRUNCATION_MARKER) -> tuple[str, bool]:
    """``(text, False)`` when its UTF-8 encoding fits in ``max_bytes``; otherwise its first
    ``max_bytes`` bytes decoded with replacement characters (a character cut in half becomes
    U+FFFD) followed by ``marker``, and True (spec §4.7 step 5)."""
    if max_bytes < 0:
        raise ValueError(f"max_bytes={max_bytes} must be >= 0")
    raw = text.encode("utf-8")
    if len(raw) <= max_bytes:
        return text, False
    return raw[:max_bytes].decode("utf-8", errors="replace") + marker, True


def media_type(content_type: str | None) -> str:
    """``"text/html; charset=utf-8"`` → ``"text/html"`` (lower case; ``""`` when absent)."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def _valid_codec(name: str | None) -> str | None:
    if not name:
        return None
    try:
        return codecs.lookup(name.strip().strip("\"'")).name
    except LookupError:
        return None


def declared_charset(content_type: str | None, body: bytes) -> str:
    """The body's encoding: the header's ``charset``, else a UTF-8/16 BOM, else an HTML
    ``<meta charset>`` in the first 4 KiB, else UTF-8. Unknown names are ignored."""
    for part in (content_type or "").split(";")[1:]:
        key, _, value = part.partition("=")
        if key.strip().lower() == "charset":
            found = _valid_codec(value)
            if found:
                return found
    if body.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if body.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    m = _META_CHARSET.search(body[:4096])
    if m:
        found = _valid_codec(m.group(1).decode("ascii", "replace"))
        if found:
            return found
    return "utf-8"


def stdlib_html_text(html: str) -> str:
    """Visible text of an HTML page with the stdlib parser (``script``/``style`` dropped, block
    elements as line breaks); the page title when the body has no text."""
    from rag_lab.knowledge.ingestion import html_to_text

    title, text = html_to_text(html)
    return text or title


_trafilatura: ModuleType | None = None
_trafilatura_missing = False


def _load_trafilatura() -> ModuleType | None:
    global _trafilatura, _trafilatura_missing
    if _trafilatura is None and not _trafilatura_missing:
        try:
            import trafilatura  # lazy: heavy import (lxml, dateparser)

            _trafilatura = trafilatura
        except ImportError:
            _trafilatura_missing = True
            log.warning("trafilatura is not installed: web pages are extracted with html.parser")
    return _trafilatura


def extract_main_text(html: str, url: str = "", extractor: str = "trafilatura") -> tuple[str, str]:
    """``(text, extractor used)``: trafilatura's main text (boilerplate removed), or the stdlib
    extraction when trafilatura is unavailable, not asked for, or returns nothing."""
    if extractor not in EXTRACTORS:
        raise ValueError(f"extractor={extractor!r} is not one of {EXTRACTORS}")
    if extractor == "trafilatura":
        traf = _load_trafilatura()
        if traf is not None:
            try:
                text = traf.extract(html, url=url or None, include_comments=False, include_tables=True)
            except Exception as exc:  # a parser crash on odd markup: use the fallback
                log.warning("trafilatura failed on %s: %s", url or "a page", exc)
                text = None
            if text and text.strip():
                return text.strip(), "trafilatura"
    return stdlib_html_text(html), "html.parser"


# -- the fetcher -----------------------------------------------------------------------------
class PageFetcher:
    """``await fetch(url) -> str``: the main text of a web page (see the module docstring).

    ``timeout_s`` bounds the whole download (connect, headers, redirects and body);
    ``max_download_bytes`` caps the body read; ``extractor`` is ``"trafilatura"`` (falls back to
    ``"html.parser"``) or ``"html.parser"``. ``file_root`` allows ``file://`` URLs under that
    folder (``allow_file=True`` alone is refused: it needs the root); ``allow_addresses`` lists
    CIDR networks that may be fetched although not public (an intranet, a test's loopback
    server). A new ``httpx.AsyncClient`` on the guarded transport is made per call unless
    ``client`` is given (then the connect-time address check is that client's business; the
    per-hop checks still run)."""

    def __init__(
        self,
        *,
        timeout_s: float = 10.0,
        max_download_bytes: int = 2_000_000,
        allow_file: bool = False,
        extractor: str = "trafilatura",
        user_agent: str = DEFAULT_USER_AGENT,
        max_redirects: int = 5,
        trust_env: bool = False,
        client: httpx.AsyncClient | None = None,
        file_root: str | Path | None = None,
        allow_addresses: list[str] | tuple[str, ...] | None = None,
    ) -> None:
        if not timeout_s > 0:
            raise ValueError(f"PageFetcher timeout_s={timeout_s!r} must be > 0")
        if max_download_bytes <= 0:
            raise ValueError(f"PageFetcher max_download_bytes={max_download_bytes!r} must be > 0")
        if extractor not in EXTRACTORS:
            raise ValueError(f"PageFetcher extractor={extractor!r} is not one of {EXTRACTORS}")
        if max_redirects < 0:
            raise ValueError(f"PageFetcher max_redirects={max_redirects!r} must be >= 0")
        if allow_file and file_root is None:
            raise ValueError(
                "PageFetcher allow_file=True needs file_root (the folder file:// URLs may read); "
                "without it any file on disk could be read"
            )
        try:
            self.policy = FetchPolicy.build(allow_addresses, file_root)
        except PolicyError as exc:
            raise ValueError(f"PageFetcher {exc}") from None
        self.timeout_s = float(timeout_s)
        self.max_download_bytes = int(max_download_bytes)
        self.allow_file = self.policy.file_root is not None
        self.extractor = extractor
        self.user_agent = user_agent
        self.max_redirects = int(max_redirects)
        self.trust_env = bool(trust_env)
        self._client = client

    def __repr__(self) -> str:
        return (
            f"PageFetcher(timeout_s={self.timeout_s:g}, max_download_bytes={self.max_download_bytes}, "
            f"file_root={str(self.policy.file_root) if self.policy.file_root else None!r}, extractor={self.extractor!r})"
        )

    async def fetch(self, url: str) -> str:
        """The page's main text (may be empty)."""
        return (await self.fetch_page(url)).text

    async def fetch_page(self, url: str) -> FetchedPage:
        """The page's text with the status, media type, byte count and extractor used."""
        t0 = time.perf_counter()
        scheme = urlsplit(url).scheme.lower() if url else ""
        if not url or not url.strip():
            raise FetchError(url, "empty URL")
        if scheme == "file":
            if not self.allow_file:
                raise FetchError(url, "file:// URLs are not allowed (PageFetcher(file_root=FOLDER) allows that folder)")
            page = await asyncio.to_thread(self._read_file, url)
        elif scheme in ("http", "https"):
            # the client is built before the clock starts: ``timeout_s`` bounds the exchange with
            # the server, not the import of httpx or the loading of its certificates
            client, own = self._session()
            try:
                page = await asyncio.wait_for(self._download(url, client), self.timeout_s)
            except TimeoutError:
                raise FetchError(url, f"timed out after {self.timeout_s:g}s") from None
            finally:
                if own:
                    await client.aclose()
        else:
            allowed = "http, https" + (", file" if self.allow_file else "")
            raise FetchError(url, f"scheme {scheme or '(none)'!r} is not allowed (allowed: {allowed})")
        raw, ctype, status, final_url, truncated = page
        kind = SUPPORTED_MEDIA_TYPES.get(media_type(ctype))
        if kind is None:  # no Content-Type header: sniff markup
            kind = "html" if raw.lstrip()[:1] == b"<" else "text"
        text_in = raw.decode(declared_charset(ctype, raw), errors="replace")
        if kind == "html":
            text, used = await asyncio.to_thread(extract_main_text, text_in, final_url or url, self.extractor)
        else:
            text, used = text_in.strip(), "plain"
        return FetchedPage(
            url=url,
            text=text,
            extractor=used,
            status=status,
            final_url=final_url,
            content_type=media_type(ctype),
            bytes_read=len(raw),
            download_truncated=truncated,
            elapsed_ms=(time.perf_counter() - t0) * 1000,
        )

    # -- transports -------------------------------------------------------------------------
    def _session(self) -> tuple[httpx.AsyncClient, bool]:
        """The client for one fetch, and whether it is this call's own (closed afterwards)."""
        if self._client is not None:
            return self._client, False
        import httpx

        #: the last call's connections as (host, address), for tests and logs
        self.backend = GuardedBackend(self.policy)
        client = httpx.AsyncClient(
            timeout=httpx.Timeout(self.timeout_s),
            follow_redirects=False,
            transport=guarded_transport(self.policy, self.backend),
            trust_env=False,  # environment proxies would resolve names where they cannot be checked
        )
        return client, True

    async def _download(self, url: str, client: httpx.AsyncClient) -> tuple[bytes, str, int, str, bool]:
        import httpx

        headers = {
            "User-Agent": self.user_agent,
            "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.1",
        }
        current = url
        try:
            for _hop in range(self.max_redirects + 1):
                target = httpx.URL(current)
                try:  # every hop: scheme, then each address the host resolves to
                    self.policy.check_scheme(target.scheme)
                    await self.policy.resolve(target.host, target.port or (443 if target.scheme == "https" else 80))
                except PolicyError as exc:
                    where = "" if current == url else f"redirect to {current!r}: "
                    raise FetchError(url, where + str(exc)) from None
                resp = await client.send(client.build_request("GET", target, headers=headers), stream=True)
                try:
                    if resp.is_redirect and resp.next_request is not None:
                        current = str(resp.next_request.url)
                        continue
                    return await self._read_body(url, resp)
                finally:
                    await resp.aclose()
            raise FetchError(url, f"more than {self.max_redirects} redirects")
        except FetchError:
            raise
        except httpx.InvalidURL as exc:  # e.g. an octal IPv4 spelling httpx refuses to parse
            raise FetchError(url, f"invalid URL: {exc}") from None
        except httpx.TimeoutException:
            raise FetchError(url, f"timed out after {self.timeout_s:g}s") from None
        except httpx.HTTPError as exc:
            text = str(exc)
            raise FetchError(url, text if "only public addresses" in text else f"{type(exc).__name__}: {exc}") from None

    async def _read_body(self, url: str, resp: httpx.Response) -> tuple[bytes, str, int, str, bool]:
        final_url = str(resp.url)
        if resp.status_code >= 300:
            reason = resp.reason_phrase or ""
            raise FetchError(url, f"HTTP {resp.status_code}{' ' + reason if reason else ''}")
        ctype = resp.headers.get("content-type", "")
        mt = media_type(ctype)
        if mt and mt not in SUPPORTED_MEDIA_TYPES:
            raise FetchError(
                url, f"unsupported content type {mt!r} (expected one of {', '.join(SUPPORTED_MEDIA_TYPES)})"
            )
        buf = bytearray()
        truncated = False
        async for chunk in resp.aiter_bytes():
            buf += chunk
            if len(buf) > self.max_download_bytes:
                truncated = True
                del buf[self.max_download_bytes :]
                break
        return bytes(buf), ctype, resp.status_code, final_url, truncated

    def _read_file(self, url: str) -> tuple[bytes, str, int, str, bool]:
        parts = urlsplit(url)
        if parts.netloc not in ("", "localhost"):
            raise FetchError(url, f"file:// URL with a remote host {parts.netloc!r}")
        try:
            path = self.policy.check_file(Path(url2pathname(parts.path)))
        except PolicyError as exc:
            raise FetchError(url, str(exc)) from None
        ctype = FILE_MEDIA_TYPES.get(path.suffix.lower())
        if ctype is None:
            raise FetchError(url, f"unsupported file type {path.suffix!r} (supported: {', '.join(FILE_MEDIA_TYPES)})")
        try:
            with path.open("rb") as fh:
                raw = fh.read(self.max_download_bytes + 1)
        except OSError as exc:
            raise FetchError(url, f"cannot read {path}: {exc.strerror or exc}") from None
        truncated = len(raw) > self.max_download_bytes
        return raw[: self.max_download_bytes], ctype, 200, url, truncated
