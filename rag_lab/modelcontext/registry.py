"""Request-local handle registry (spec §7.1).

One :class:`Registry` per request maps durable identities (chunk IDs, document IDs,
KB IDs, web URLs, stored resources, wiki issues) to short handles shown to the model
(``c1``, ``d1``, ``b1``, ``w1``, ``res://0001``, ``i1``). Entries are never removed,
so numbering is stable for the request's lifetime. The registry never stores handles
as durable values (the handle-shaped input guard).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar
from urllib.parse import urlsplit

from rag_lab.modelcontext import resources as _res

if TYPE_CHECKING:
    from rag_lab.types.search_result import SearchResult

M = TypeVar("M")

#: A value shaped like a source handle is never registered as a new durable ID.
SOURCE_HANDLE_RE = re.compile(r"[cdbw][1-9][0-9]*\Z", re.IGNORECASE)
#: Same guard for the issue space.
ISSUE_HANDLE_RE = re.compile(r"i[1-9][0-9]*\Z", re.IGNORECASE)
#: Issue handles inside text, decoded at (ASCII) word boundaries.
ISSUE_HANDLE_IN_TEXT_RE = re.compile(r"\bi[0-9]+\b", re.ASCII)


@dataclass(slots=True)
class ChunkRef:
    """Metadata kept for a registered knowledge chunk."""

    chunk_id: str
    knowledge_id: str = ""
    kb_id: str = ""
    title: str = ""
    chunk_index: int = 0
    chunk_type: str = ""


@dataclass(slots=True)
class WebRef:
    """A registered web page: the raw URL as first seen and its title."""

    url: str
    title: str = ""


class HandleTable(Generic[M]):
    """One handle space: a counter, key → handle, and handle → (durable value, metadata)."""

    def __init__(self, prefix: str, width: int = 0) -> None:
        self.prefix = prefix
        self.width = width
        self._by_key: dict[str, str] = {}
        self._by_handle: dict[str, tuple[str, M | None]] = {}

    def _format(self, n: int) -> str:
        return f"{self.prefix}{n:0{self.width}d}" if self.width else f"{self.prefix}{n}"

    def register(
        self,
        key: str,
        value: str,
        meta: M | None = None,
        merge: Callable[[M, M], None] | None = None,
    ) -> str:
        """Return the handle for ``key``, allocating the next one on first sight.

        On re-registration ``merge(existing_meta, new_meta)`` may fill in metadata.
        """
        if key == "":
            return ""
        handle = self._by_key.get(key)
        if handle is not None:
            _, existing = self._by_handle[handle]
            if merge is not None and existing is not None and meta is not None:
                merge(existing, meta)
            return handle
        handle = self._format(len(self._by_handle) + 1)
        self._by_key[key] = handle
        self._by_handle[handle] = (value, meta)
        return handle

    def has(self, handle: str) -> bool:
        return handle in self._by_handle

    def resolve(self, handle: str) -> tuple[str, M | None] | None:
        """(durable value, metadata) for a handle, or None."""
        return self._by_handle.get(handle)

    def handle_for_key(self, key: str) -> str:
        return self._by_key.get(key, "")

    def pairs(self) -> list[tuple[str, str]]:
        """(handle, durable value) in allocation order."""
        return [(h, v) for h, (v, _) in self._by_handle.items()]

    def handles(self) -> list[str]:
        return list(self._by_handle)

    def __len__(self) -> int:
        return len(self._by_handle)


def canonical_web_url(raw: str) -> str:
    """Dedup key for a web URL: the URL without its fragment (scheme lower-cased).

    When the URL does not parse or has no scheme or host, the trimmed string itself.
    """
    raw = raw.strip()
    try:
        parts = urlsplit(raw)
    except ValueError:
        return raw
    host = parts.netloc.rpartition("@")[2]
    if not parts.scheme or not host:
        return raw
    # Keep the original spelling (Go re-serialises a parsed URL to practically the same
    # text); only the scheme is normalised and everything from the first '#' dropped.
    rest = raw[len(parts.scheme) :].split("#", 1)[0]
    return parts.scheme.lower() + rest


def _merge_chunk(dst: ChunkRef, src: ChunkRef) -> None:
    if not dst.knowledge_id:
        dst.knowledge_id = src.knowledge_id
    if not dst.kb_id:
        dst.kb_id = src.kb_id
    if not dst.title:
        dst.title = src.title
    if dst.chunk_index == 0:
        dst.chunk_index = src.chunk_index
    if not dst.chunk_type:
        dst.chunk_type = src.chunk_type


def _merge_web(dst: WebRef, src: WebRef) -> None:
    if not dst.title and src.title:
        dst.title = src.title


def _first_non_blank(*values: str) -> str:
    for value in values:
        if value and value.strip():
            return value
    return ""


class Registry:
    """Request-scoped map between durable identities and model handles."""

    def __init__(self, citations_enabled: bool = True) -> None:
        self.citations_enabled = bool(citations_enabled)
        self._chunks: HandleTable[ChunkRef] = HandleTable("c")
        self._docs: HandleTable[None] = HandleTable("d")
        self._kbs: HandleTable[None] = HandleTable("b")
        self._webs: HandleTable[WebRef] = HandleTable("w")
        self._issues: HandleTable[None] = HandleTable("i")
        self._resources: HandleTable[None] = HandleTable(_res.RESOURCE_PREFIX, _res.RESOURCE_WIDTH)

    def __repr__(self) -> str:
        return (
            f"Registry(citations_enabled={self.citations_enabled}, chunks={len(self._chunks)}, "
            f"documents={len(self._docs)}, kbs={len(self._kbs)}, webs={len(self._webs)}, "
            f"resources={len(self._resources)}, issues={len(self._issues)})"
        )

    # ------------------------------------------------------------------ registration
    @staticmethod
    def _known(table: HandleTable[M], value: str) -> str:
        handle = value.lower()
        return handle if table.has(handle) else ""

    def register_chunk(
        self,
        chunk_id: str,
        knowledge_id: str = "",
        kb_id: str = "",
        title: str = "",
        chunk_index: int = 0,
        chunk_type: str = "",
    ) -> str:
        """Handle for a chunk (``cN``); re-registration fills only empty metadata fields."""
        chunk_id = (chunk_id or "").strip()
        if not chunk_id:
            return ""
        if SOURCE_HANDLE_RE.match(chunk_id):
            return self._known(self._chunks, chunk_id)
        ref = ChunkRef(chunk_id, knowledge_id or "", kb_id or "", title or "", int(chunk_index or 0), chunk_type or "")
        return self._chunks.register(chunk_id, chunk_id, ref, _merge_chunk)

    def register_document(self, knowledge_id: str) -> str:
        """Handle for a document (``dN``)."""
        knowledge_id = (knowledge_id or "").strip()
        if not knowledge_id:
            return ""
        if SOURCE_HANDLE_RE.match(knowledge_id):
            return self._known(self._docs, knowledge_id)
        return self._docs.register(knowledge_id, knowledge_id)

    def register_kb(self, kb_id: str) -> str:
        """Handle for a knowledge base (``bN``)."""
        kb_id = (kb_id or "").strip()
        if not kb_id:
            return ""
        if SOURCE_HANDLE_RE.match(kb_id):
            return self._known(self._kbs, kb_id)
        return self._kbs.register(kb_id, kb_id)

    def register_web(self, url: str, title: str = "") -> str:
        """Handle for a web page (``wN``), deduplicated on the canonical URL; decodes to the first raw URL."""
        url = (url or "").strip()
        if not url:
            return ""
        if SOURCE_HANDLE_RE.match(url):
            return self._known(self._webs, url)
        return self._webs.register(canonical_web_url(url), url, WebRef(url, title or ""), _merge_web)

    def register_issue(self, issue_id: str) -> str:
        """Handle for a wiki issue (``iN``; agent tools only, nothing in the chat pipeline calls it)."""
        issue_id = (issue_id or "").strip()
        if not issue_id:
            return ""
        if ISSUE_HANDLE_RE.match(issue_id):
            return self._known(self._issues, issue_id)
        return self._issues.register(issue_id, issue_id)

    def register_search_results(self, results: Iterable[SearchResult | None]) -> None:
        """Register, per result in order: its document, its KB, then the chunk itself."""
        for result in results:
            if result is None:
                continue
            self.register_document(result.knowledge_id)
            self.register_kb(result.knowledge_base_id)
            self.register_chunk(
                result.id,
                result.knowledge_id,
                result.knowledge_base_id,
                _first_non_blank(result.knowledge_title, result.knowledge_filename),
                result.chunk_index,
                result.chunk_type,
            )

    # ------------------------------------------------------------------ lookups
    @staticmethod
    def _norm(handle: str) -> str:
        # lower-cased, not trimmed: " c1" is not a handle (the decoder relies on this)
        return (handle or "").lower()

    def chunk(self, handle: str) -> ChunkRef | None:
        """A copy of the chunk metadata behind ``cN``, or None."""
        hit = self._chunks.resolve(self._norm(handle))
        return dataclasses.replace(hit[1]) if hit and hit[1] is not None else None

    def web(self, handle: str) -> WebRef | None:
        """A copy of the web page behind ``wN``, or None."""
        hit = self._webs.resolve(self._norm(handle))
        return dataclasses.replace(hit[1]) if hit and hit[1] is not None else None

    def document_id(self, handle: str) -> str:
        hit = self._docs.resolve(self._norm(handle))
        return hit[0] if hit else ""

    def kb_id(self, handle: str) -> str:
        hit = self._kbs.resolve(self._norm(handle))
        return hit[0] if hit else ""

    def issue_id(self, handle: str) -> str:
        hit = self._issues.resolve(handle)
        return hit[0] if hit else ""

    def resource_value(self, handle: str) -> str:
        hit = self._resources.resolve(handle)
        return hit[0] if hit else ""

    def durable_for_handle(self, handle: str) -> str:
        """The durable value behind a source handle of any space (chunk, document, KB, web), or ""."""
        handle = self._norm((handle or "").strip())
        for table in (self._chunks, self._docs, self._kbs, self._webs):
            hit = table.resolve(handle)
            if hit:
                return hit[0]
        return ""

    def chunk_handle(self, chunk_id: str) -> str:
        return self._chunks.handle_for_key((chunk_id or "").strip())

    def document_handle(self, knowledge_id: str) -> str:
        return self._docs.handle_for_key((knowledge_id or "").strip())

    def kb_handle(self, kb_id: str) -> str:
        return self._kbs.handle_for_key((kb_id or "").strip())

    def web_handle(self, url: str) -> str:
        return self._webs.handle_for_key(canonical_web_url(url or ""))

    def resource_handles(self) -> list[str]:
        """Registered resource handles in allocation order."""
        return self._resources.handles()

    def issue_handles(self) -> list[str]:
        return self._issues.handles()

    # ------------------------------------------------------------------ text codecs
    def compact_known_text(self, text: str) -> str:
        """Replace every registered durable value (chunk, document, KB IDs, raw web URLs) with its handle.

        Values are processed longest first (UTF-8 length) across all four spaces, each as a
        plain substring replacement over the text produced by the previous one.
        """
        if not text:
            return text
        pairs = self._chunks.pairs() + self._docs.pairs() + self._kbs.pairs() + self._webs.pairs()
        pairs.sort(key=lambda p: len(p[1].encode("utf-8")), reverse=True)  # stable
        for handle, value in pairs:
            if value and value in text:
                text = text.replace(value, handle)
        return text

    def encode_resources(self, text: str) -> str:
        """Replace stored references (§7.3 step 1 pattern) with ``res://NNNN`` handles."""
        return _res.encode_resources(text, self._resources)

    def restore_resources(self, text: str) -> str:
        """Replace registered ``res://`` handles with their durable values (§7.4 step 1)."""
        return _res.restore_resources(text, self._resources)

    def decode_resources(self, text: str) -> str:
        """§7.4 steps 1–2: restore registered handles, then strip orphan ``res://<digits>`` tokens."""
        return _res.strip_orphan_resource_handles(self.restore_resources(text))

    def orphan_resource_handles(self, decoded: str) -> list[str]:
        """Handle-shaped tokens no registered handle explains (for logging only)."""
        return _res.orphan_resource_handles(decoded, self._resources)

    def decode_issue_handles(self, text: str) -> str:
        """Replace registered ``iN`` handles (whole words) with their issue IDs."""
        if not text or not len(self._issues):
            return text

        def _sub(m: re.Match[str]) -> str:
            hit = self._issues.resolve(m.group(0))
            return hit[0] if hit else m.group(0)

        return ISSUE_HANDLE_IN_TEXT_RE.sub(_sub, text)

    def protocol_prompt(self) -> str:
        """The system-owned protocol prompt for this registry (see :func:`protocol.protocol_prompt`)."""
        from rag_lab.modelcontext.protocol import protocol_prompt

        return protocol_prompt(self)
