"""Ingestion: files, dataset documents and FAQ entries → chunks, embeddings, indexes.

* ``ingest_folder``: ``.txt``, ``.md``/``.markdown`` and ``.html``/``.htm`` files (HTML → text
  with the stdlib parser, ``script``/``style`` dropped); other files are skipped with a reason.
  The document id is the file's path relative to the folder (POSIX separators).
* ``ingest_documents``: dicts or objects with ``id``, ``title``, ``text``, ``metadata`` (and an
  optional ``tag_id``). The document id **is** the knowledge id, so a dataset's gold ids match
  ``SearchResult.knowledge_id``.
* ``ingest_faq``: FAQ entries (:class:`FAQEntry` or dicts, optional ``id``) into an FAQ KB: one
  ``faq`` chunk per entry, one vector per question (standard + similar).

Idempotent by content hash: an unchanged document is left alone, a changed one has its chunks and
index entries replaced. All inputs are read and validated before anything is written. The document
row (with its hash) is written last, so an interrupted run is redone next time. Chunk ids are
``<kb_id>:<knowledge_id>#c<i>`` (``#p<i>`` for parents, ``#faq`` for FAQ), unique store-wide.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_lab.knowledge.chunking import chunk_text
from rag_lab.knowledge.ingest_common import (
    DEFAULT_BATCH_SIZE,
    IngestError,
    IngestReport,
    _check_kb,
    _content_hash,
    _embed,
    _remove_document,
)
from rag_lab.knowledge.models import Chunk, FAQEntry, Knowledge, KnowledgeBase
from rag_lab.retrieval.spaces import vector_entries as _vector_entries
from rag_lab.types.errors import MixedEmbeddingSpaces
from rag_lab.types.search_result import SEARCHABLE_CHUNK_TYPES

if TYPE_CHECKING:
    from rag_lab.knowledge.workspace import Workspace
    from rag_lab.models.base import Embedder

SUPPORTED_SUFFIXES = {".txt": "txt", ".md": "md", ".markdown": "md", ".html": "html", ".htm": "html"}
#: CSV / Excel files: ingested as tables by rag_lab.knowledge.tables.ingest_table
TABLE_FILE_SUFFIXES = (".csv", ".xlsx", ".xls")
_WS = re.compile(r"\s+")


# -- HTML / file reading ---------------------------------------------------------------------
class _HTMLText(HTMLParser):
    _SKIP = {"script", "style", "noscript", "template"}
    _BLOCK = {
        "p",
        "div",
        "br",
        "li",
        "ul",
        "ol",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "tr",
        "table",
        "section",
        "article",
        "header",
        "footer",
        "pre",
        "blockquote",
        "hr",
        "title",
        "dt",
        "dd",
    }

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title_parts: list[str] = []
        self._skip = 0
        self._pre = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in self._SKIP:
            self._skip += 1
        elif tag == "pre":
            self._pre += 1
        elif tag == "title":
            self._in_title = True
        if tag in self._BLOCK:
            self.parts.append("\n\n" if tag in ("p", "div", "h1", "h2", "h3", "h4", "h5", "h6") else "\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP and self._skip:
            self._skip -= 1
        elif tag == "pre" and self._pre:
            self._pre -= 1
        elif tag == "title":
            self._in_title = False
        if tag in self._BLOCK:
            self.parts.append("\n\n" if tag in ("p", "div", "h1", "h2", "h3", "h4", "h5", "h6") else "\n")

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        if self._in_title:
            self.title_parts.append(data)
            return
        # outside <pre>, a run of whitespace (newlines included) is one space, as a browser shows it
        self.parts.append(data if self._pre else _WS.sub(" ", data))


def html_to_text(source: str) -> tuple[str, str]:
    """``(title, text)`` of an HTML page: text content with block elements as line breaks,
    ``script``/``style``/``noscript`` dropped, whitespace collapsed outside ``<pre>``, lines
    trimmed, at most one blank line in a row."""
    p = _HTMLText()
    p.feed(source)
    p.close()
    text = "\n".join(line.strip() for line in "".join(p.parts).splitlines())
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    title = " ".join(html.unescape("".join(p.title_parts)).split())
    return title, text.strip()


def _md_title(text: str) -> str:
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("# "):
            return s[2:].strip()
        if s:
            break
    return ""


def read_document(path: str | Path) -> tuple[str, str]:
    """``(title, text)`` of a supported file; unreadable or non-UTF-8 files raise IngestError."""
    p = Path(path)
    kind = SUPPORTED_SUFFIXES.get(p.suffix.lower())
    if kind is None:
        raise IngestError(f"{p}: unsupported file type {p.suffix!r} (supported: {sorted(SUPPORTED_SUFFIXES)})")
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise IngestError(f"{p}: cannot read file: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise IngestError(f"{p}: not valid UTF-8 (byte {exc.start}: {exc.reason})") from None
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if kind == "html":
        title, body = html_to_text(text)
        return title or p.stem, body
    if kind == "md":
        return _md_title(text) or p.stem, text
    return p.stem, text


# -- shared machinery ------------------------------------------------------------------------
@dataclass(slots=True)
class _Doc:
    knowledge: Knowledge
    text: str
    tag_id: str = ""
    faq: FAQEntry | None = None


def _chunks_for(ws: Workspace, kb: KnowledgeBase, doc: _Doc) -> list[Chunk]:
    kid = doc.knowledge.id
    prefix = f"{kb.id}:{kid}"
    if doc.faq is not None:
        return [
            Chunk(
                id=f"{prefix}#faq",
                knowledge_id=kid,
                knowledge_base_id=kb.id,
                content=doc.text,
                chunk_index=0,
                chunk_type="faq",
                start_at=0,
                end_at=len(doc.text),
                metadata=doc.faq.to_metadata(),
                tag_id=doc.tag_id,
            )
        ]
    return chunk_text(
        doc.text,
        knowledge_id=kid,
        knowledge_base_id=kb.id,
        config=ws.chunking_config(kb),
        id_prefix=prefix,
        tag_id=doc.tag_id,
    )


def _ingest(
    ws: Workspace,
    kb: KnowledgeBase,
    docs: list[_Doc],
    embedder: Embedder | None,
    progress: bool,
    batch_size: int,
    report: IngestReport,
    desc: str,
) -> IngestReport:
    from tqdm.auto import tqdm

    if batch_size <= 0:
        raise IngestError(f"batch_size={batch_size} must be positive")
    store = ws.store
    with ws.kb_lock(kb, embedder):  # other processes too; starts from the newest, repaired index
        vindex = ws.vector_index(kb)
        kindex = ws.keyword_index(kb) if kb.keyword_enabled else None
        pending: list[tuple[str, str, str | None, str]] = []  # chunk_id, entry_id, own text, text to embed
        done_docs: list[Knowledge] = []

        def flush() -> None:
            if not pending or vindex is None or embedder is None:
                pending.clear()
                return
            vecs = _embed(embedder, [p[3] for p in pending], f"knowledge base {kb.name!r}")
            vindex.add([p[0] for p in pending], vecs, entry_ids=[p[1] for p in pending], texts=[p[2] for p in pending])
            report.vectors_added += len(pending)
            pending.clear()

        bar = tqdm(total=len(docs), desc=desc, unit="doc", disable=not progress)
        try:
            for doc in docs:
                k = doc.knowledge
                existing = store.get_document(kb.id, k.id)
                if existing is not None and existing.content_hash == k.content_hash:
                    report.unchanged.append(k.id)
                    bar.update(1)
                    continue
                if existing is not None:
                    # the row goes too; it is rewritten with the new hash once the chunks are indexed
                    report.chunks_removed += _remove_document(ws, kb, k.id)
                    report.updated.append(k.id)
                else:
                    report.added.append(k.id)
                chunks = _chunks_for(ws, kb, doc)
                store.add_chunks(chunks)
                report.chunks_added += len(chunks)
                searchable = [c for c in chunks if c.chunk_type in SEARCHABLE_CHUNK_TYPES]
                if kindex is not None and searchable:
                    kindex.add([c.id for c in searchable], [c.content for c in searchable])
                for c in searchable:
                    for entry_id, own, to_embed in _vector_entries(c):
                        pending.append((c.id, entry_id, own, to_embed))
                if len(pending) >= batch_size:
                    flush()
                done_docs.append(k)
                bar.update(1)
            flush()
        finally:
            bar.close()
        if report.changed:
            if vindex is not None:
                vindex.save(ws.index_dir(kb.id))
            if kindex is not None:
                kindex.save()
            store.add_knowledge(done_docs)
    return report


def delete_document(ws: Workspace, kb: KnowledgeBase, knowledge_id: str) -> int:
    """Delete a document, its chunks and their index entries; returns the chunks removed."""
    with ws.kb_lock(kb):
        if ws.store.get_document(kb.id, knowledge_id) is None:
            raise IngestError(f"knowledge base {kb.name!r} has no document {knowledge_id!r}")
        n = _remove_document(ws, kb, knowledge_id)
        vindex = ws.vector_index(kb)
        if vindex is not None:
            vindex.save(ws.index_dir(kb.id))
        if kb.keyword_enabled:
            ws.keyword_index(kb).save()
        return n


# -- public entry points ---------------------------------------------------------------------
def ingest_folder(
    ws: Workspace,
    kb: KnowledgeBase,
    path: str | Path,
    embedder: Embedder | None,
    progress: bool = True,
    *,
    recursive: bool = True,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> IngestReport:
    """Ingest the supported files under ``path`` (recursively by default)."""
    _check_kb(kb, embedder, want_faq=False)
    t0 = time.perf_counter()
    root = Path(path)
    if not root.exists():
        raise IngestError(f"{root}: folder does not exist")
    if not root.is_dir():
        raise IngestError(f"{root}: not a folder")
    files = sorted(p for p in (root.rglob("*") if recursive else root.glob("*")) if p.is_file())
    report = IngestReport(kb_id=kb.id)
    docs: list[_Doc] = []
    tables: list[tuple[Path, str]] = []
    real_root = root.resolve()
    for f in files:
        rel = f.relative_to(root).as_posix()
        if any(part.startswith(".") for part in f.relative_to(root).parts):
            report.skipped.append((rel, "hidden file"))
            continue
        if not f.resolve().is_relative_to(real_root):  # a symlink (or a linked folder) out of the tree
            report.skipped.append((rel, f"symbolic link to {f.resolve()}, outside the ingested folder"))
            continue
        suffix = f.suffix.lower()
        if suffix in TABLE_FILE_SUFFIXES:
            tables.append((f, rel))
            continue
        if suffix not in SUPPORTED_SUFFIXES:
            report.skipped.append((rel, f"unsupported file type {suffix or '(none)'!r}"))
            continue
        title, text = read_document(f)
        if not text.strip():
            report.skipped.append((rel, "empty after text extraction"))
            continue
        meta = {"path": rel}
        k = Knowledge(
            id=rel,
            knowledge_base_id=kb.id,
            title=title,
            file_name=f.name,
            file_type=SUPPORTED_SUFFIXES[suffix],
            source="file",
            metadata=meta,
            content_hash=_content_hash(title, text, meta),
        )
        docs.append(_Doc(k, text))
    if not docs and not tables:
        detail = f"; skipped: {', '.join(f'{p} ({r})' for p, r in report.skipped[:10])}" if report.skipped else ""
        raise IngestError(f"{root}: no ingestible .txt/.md/.html/.csv/.xlsx/.xls files found{detail}")
    if docs:
        _ingest(ws, kb, docs, embedder, progress, batch_size, report, f"ingest {kb.name}")
    if tables:
        from rag_lab.knowledge.tables import ingest_table

        for f, rel in tables:
            ingest_table(ws, kb, f, embedder, knowledge_id=rel, report=report, batch_size=batch_size)
    report.seconds = time.perf_counter() - t0
    return report


def _get(doc: Any, name: str, default: Any = None) -> Any:
    if isinstance(doc, Mapping):
        return doc.get(name, default)
    return getattr(doc, name, default)


def ingest_documents(
    ws: Workspace,
    kb: KnowledgeBase,
    docs: Iterable[Any],
    embedder: Embedder | None,
    progress: bool = True,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> IngestReport:
    """Ingest dataset documents (``id``, ``title``, ``text``, ``metadata``, optional ``tag_id``)."""
    _check_kb(kb, embedder, want_faq=False)
    t0 = time.perf_counter()
    report = IngestReport(kb_id=kb.id)
    prepared: list[_Doc] = []
    seen: set[str] = set()
    for i, d in enumerate(docs):
        did, text = _get(d, "id"), _get(d, "text")
        if not isinstance(did, str) or not did:
            raise IngestError(f"document #{i}: field 'id' = {did!r} must be a non-empty string")
        if did in seen:
            raise IngestError(f"document #{i}: duplicate id {did!r}")
        seen.add(did)
        if not isinstance(text, str):
            raise IngestError(f"document #{i} (id {did!r}): field 'text' = {text!r} must be a string")
        title = _get(d, "title", "") or ""
        if not isinstance(title, str):
            raise IngestError(f"document #{i} (id {did!r}): field 'title' = {title!r} must be a string")
        meta = _get(d, "metadata", None) or {}
        if not isinstance(meta, Mapping):
            raise IngestError(f"document #{i} (id {did!r}): field 'metadata' = {meta!r} must be a mapping")
        meta = {str(k): v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for k, v in meta.items()}
        tag = _get(d, "tag_id", "") or ""
        if not text.strip():
            report.skipped.append((did, "empty text"))
            continue
        k = Knowledge(
            id=did,
            knowledge_base_id=kb.id,
            title=title,
            file_name="",
            file_type="",
            source="dataset",
            metadata=meta,
            content_hash=_content_hash(title, text, meta, tag),
        )
        prepared.append(_Doc(k, text, tag_id=str(tag)))
    _ingest(ws, kb, prepared, embedder, progress, batch_size, report, f"ingest {kb.name}")
    report.seconds = time.perf_counter() - t0
    return report


def faq_content(entry: FAQEntry) -> str:
    """FAQ chunk text in the §4.8.4 layout: ``Q: question`` then ``Answer:`` and ``- answer`` lines."""
    parts = []
    q = entry.standard_question.strip()
    if q:
        parts.append(f"Q: {q}\n")
    answers = [a.strip() for a in entry.answers if a and a.strip()]
    if answers:
        parts.append("Answer:\n" + "".join(f"- {a}\n" for a in answers))
    return "".join(parts).strip()


def ingest_faq(
    ws: Workspace,
    kb: KnowledgeBase,
    entries: Iterable[Any],
    embedder: Embedder | None,
    progress: bool = True,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> IngestReport:
    """Ingest FAQ entries (one document + one ``faq`` chunk each; id from ``id`` or the question)."""
    _check_kb(kb, embedder, want_faq=True)
    t0 = time.perf_counter()
    report = IngestReport(kb_id=kb.id)
    prepared: list[_Doc] = []
    seen: set[str] = set()
    fields_ = (
        "standard_question",
        "answers",
        "similar_questions",
        "negative_questions",
        "answer_strategy",
        "version",
        "source",
    )
    for i, e in enumerate(entries):
        eid = _get(e, "id")
        if isinstance(e, FAQEntry):
            entry = e
        else:
            try:
                entry = FAQEntry(**{f: _get(e, f) for f in fields_ if _get(e, f) is not None})
            except TypeError as exc:
                raise IngestError(f"FAQ entry #{i}: {exc}") from None
        if not isinstance(entry.standard_question, str) or not entry.standard_question.strip():
            raise IngestError(
                f"FAQ entry #{i}: field 'standard_question' = {entry.standard_question!r} must be non-empty"
            )
        kid = eid or "faq-" + hashlib.sha1(entry.standard_question.strip().encode("utf-8")).hexdigest()[:12]
        if kid in seen:
            raise IngestError(f"FAQ entry #{i}: duplicate id {kid!r}")
        seen.add(kid)
        text = faq_content(entry)
        k = Knowledge(
            id=kid,
            knowledge_base_id=kb.id,
            title=entry.standard_question.strip(),
            source="faq",
            content_hash=_content_hash(entry.standard_question, text, {}, entry.to_metadata()),
        )
        prepared.append(_Doc(k, text, tag_id=str(_get(e, "tag_id", "") or ""), faq=entry))
    _ingest(ws, kb, prepared, embedder, progress, batch_size, report, f"ingest FAQ {kb.name}")
    report.seconds = time.perf_counter() - t0
    return report


__all__ = [
    "IngestReport",
    "IngestError",
    "MixedEmbeddingSpaces",
    "html_to_text",
    "read_document",
    "ingest_folder",
    "ingest_documents",
    "ingest_faq",
    "faq_content",
    "delete_document",
    "SUPPORTED_SUFFIXES",
]
