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

from rag_lab.knowledge.chunking import chunk_text, iter_spans
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
from rag_lab.searchutil.language import language_warning, sample_text
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
    #: a big plain-text file chunked while it is read (``text`` stays empty)
    stream_path: Path | None = None
    #: UTF-8 bytes of the text (the progress bar counts bytes)
    size: int = 0


#: files above this many bytes are skipped (with the reason); ``max_file_bytes=`` to change it
DEFAULT_MAX_FILE_BYTES = 256 * 1024 * 1024
#: .txt / .md files above this many bytes are chunked while they are read (bounded memory)
STREAM_FILE_BYTES = 4 * 1024 * 1024
#: chunks written, indexed and embedded together inside one document
_CHUNK_BATCH = 256
_READ_BLOCK = 1 << 20


def _read_blocks(path: Path) -> Iterable[str]:
    """The file's text in blocks, UTF-8 (BOM dropped), newlines normalised as read_document does."""
    try:
        with open(path, encoding="utf-8-sig", newline=None) as fh:
            while block := fh.read(_READ_BLOCK):
                yield block
    except UnicodeDecodeError as exc:
        raise IngestError(f"{path}: not valid UTF-8 (byte {exc.start} of a block: {exc.reason})") from None
    except OSError as exc:
        raise IngestError(f"{path}: cannot read file: {exc.strerror or exc}") from None


def _streamed_hash(path: Path, title: str, meta: Mapping[str, Any]) -> tuple[str, bool]:
    """:func:`_content_hash` of a file read block by block (the same digest as for the whole
    text), and whether the text has any non-whitespace."""
    h = hashlib.sha256()
    h.update(title.encode("utf-8") + b"\x00")
    blank = True
    for block in _read_blocks(path):
        h.update(block.encode("utf-8"))
        blank = blank and block.isspace()
    h.update(b"\x00")
    for part in (json.dumps(meta, sort_keys=True, ensure_ascii=False, default=str), json.dumps(None)):
        h.update(part.encode("utf-8") + b"\x00")
    return h.hexdigest(), not blank


def _streamed_chunks(ws: Workspace, kb: KnowledgeBase, doc: _Doc) -> Iterable[Chunk]:
    """Plain-mode chunks of a streamed file, the same as :func:`chunk_text` would make."""
    assert doc.stream_path is not None
    cfg = ws.chunking_config(kb).validate()
    kid = doc.knowledge.id
    prefix = f"{kb.id}:{kid}"
    prev: Chunk | None = None
    for i, (s, e, content) in enumerate(iter_spans(_read_blocks(doc.stream_path), cfg.chunk_size, cfg.chunk_overlap)):
        c = Chunk(
            id=f"{prefix}#c{i}",
            knowledge_id=kid,
            knowledge_base_id=kb.id,
            content=content,
            chunk_index=i,
            chunk_type="text",
            start_at=s,
            end_at=e,
            tag_id=doc.tag_id,
        )
        if prev is not None:
            prev.next_chunk_id, c.pre_chunk_id = c.id, prev.id
            yield prev
        prev = c
    if prev is not None:
        yield prev


def _chunk_batches(ws: Workspace, kb: KnowledgeBase, doc: _Doc) -> Iterable[list[Chunk]]:
    chunks = _streamed_chunks(ws, kb, doc) if doc.stream_path is not None else iter(_chunks_for(ws, kb, doc))
    batch: list[Chunk] = []
    for c in chunks:
        batch.append(c)
        if len(batch) >= _CHUNK_BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


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

        awaiting: list[Knowledge] = []  # written and keyword-indexed, vectors still pending

        def flush() -> None:
            if pending and vindex is not None and embedder is not None:
                vecs = _embed(embedder, [p[3] for p in pending], f"knowledge base {kb.name!r}")
                vindex.add(
                    [p[0] for p in pending], vecs, entry_ids=[p[1] for p in pending], texts=[p[2] for p in pending]
                )
                report.vectors_added += len(pending)
            pending.clear()
            done_docs.extend(awaiting)
            awaiting.clear()

        sample = sample_text(
            d.text or next(iter(_read_blocks(d.stream_path)), "") if d.stream_path else d.text for d in docs
        )
        warning = language_warning(sample, embedder, f"the text of knowledge base {kb.name!r}") if embedder else ""
        if warning:
            report.warnings.append(warning)
        total = sum(d.size or len(d.text.encode("utf-8")) for d in docs)
        bar = tqdm(total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1024, disable=not progress)
        current: str | None = None  # the document being written: removed again if we stop midway
        try:
            for doc in docs:
                k = doc.knowledge
                size = doc.size or len(doc.text.encode("utf-8"))
                existing = store.get_document(kb.id, k.id)
                if existing is not None and existing.content_hash == k.content_hash:
                    report.unchanged.append(k.id)
                    bar.update(size)
                    continue
                if existing is not None:
                    # the row goes too; it is rewritten with the new hash once the chunks are indexed
                    report.chunks_removed += _remove_document(ws, kb, k.id)
                current = k.id
                shown = 0
                for chunks in _chunk_batches(ws, kb, doc):
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
                    step = min(
                        size - shown,
                        sum(len(c.content.encode("utf-8")) for c in chunks if c.chunk_type != "parent_text"),
                    )
                    bar.update(max(0, step))
                    shown += max(0, step)
                bar.update(size - shown)
                (report.updated if existing is not None else report.added).append(k.id)
                awaiting.append(k)
                current = None
            flush()
        except BaseException:
            # stopped midway (an error, Ctrl-C): half-written documents (and those whose vectors
            # were not embedded yet) leave no rows behind; the documents finished so far are kept
            # (rows, indexes) and found unchanged on the next run
            pending.clear()
            for kid in [k.id for k in awaiting] + ([current] if current is not None else []):
                report.chunks_removed += _remove_document(ws, kb, kid)
                for lst in (report.added, report.updated):
                    if kid in lst:
                        lst.remove(kid)
            awaiting.clear()
            raise
        finally:
            bar.close()
            if done_docs or report.chunks_removed:
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
    strict: bool = False,
    max_file_bytes: int | None = DEFAULT_MAX_FILE_BYTES,
) -> IngestReport:
    """Ingest the supported files under ``path`` (recursively by default).

    A file that cannot be read (permissions, not UTF-8, a broken table) is listed in
    ``report.failed`` with the reason and the others are ingested; ``strict=True`` stops at the
    first such file instead (nothing of the folder is written). Files above ``max_file_bytes``
    are skipped with that reason (``None``: no cap); ``.txt`` / ``.md`` files above
    :data:`STREAM_FILE_BYTES` are chunked while they are read."""
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
        try:
            size = f.stat().st_size
            if max_file_bytes is not None and size > max_file_bytes:
                report.skipped.append(
                    (
                        rel,
                        f"{size / 1e6:.1f} MB is above the size cap of {max_file_bytes / 1e6:.1f} MB (max_file_bytes)",
                    )
                )
                continue
            doc = _file_doc(kb, f, rel, suffix, size)
        except IngestError as exc:
            if strict:
                raise
            report.failed.append((rel, _reason(exc, f)))
            continue
        if doc is None:
            report.skipped.append((rel, "empty after text extraction"))
            continue
        docs.append(doc)
    if not docs and not tables:
        found = report.failed + report.skipped
        detail = f"; {', '.join(f'{p} ({r})' for p, r in found[:10])}" if found else ""
        raise IngestError(f"{root}: no ingestible .txt/.md/.html/.csv/.xlsx/.xls files found{detail}")
    if docs:
        _ingest(ws, kb, docs, embedder, progress, batch_size, report, f"ingest {kb.name}")
    if tables:
        from rag_lab.knowledge.tables import ingest_table

        for f, rel in tables:
            try:
                ingest_table(ws, kb, f, embedder, knowledge_id=rel, report=report, batch_size=batch_size)
            except IngestError as exc:
                if strict:
                    raise
                report.failed.append((rel, _reason(exc, f)))
    report.seconds = time.perf_counter() - t0
    return report


def _reason(exc: Exception, path: Path) -> str:
    """An IngestError's message without the leading path (the report names the file)."""
    msg = str(exc)
    for prefix in (f"{path}: ", f"{path.name}: "):
        if msg.startswith(prefix):
            return msg[len(prefix) :]
    return msg


def _file_doc(kb: KnowledgeBase, f: Path, rel: str, suffix: str, size: int) -> _Doc | None:
    """The document of one file (``None`` when it has no text); big .txt/.md files are not read
    into memory here but streamed at ingest time."""
    kind = SUPPORTED_SUFFIXES[suffix]
    meta = {"path": rel}

    def knowledge(title: str, digest: str) -> Knowledge:
        return Knowledge(
            id=rel,
            knowledge_base_id=kb.id,
            title=title,
            file_name=f.name,
            file_type=kind,
            source="file",
            metadata=meta,
            content_hash=digest,
        )

    if kind in ("txt", "md") and size > STREAM_FILE_BYTES:
        title = f.stem
        if kind == "md":
            head = next(iter(_read_blocks(f)), "")
            title = _md_title(head) or f.stem
        digest, has_text = _streamed_hash(f, title, meta)
        if not has_text:
            return None
        return _Doc(knowledge(title, digest), "", stream_path=f, size=size)
    title, text = read_document(f)
    if not text.strip():
        return None
    return _Doc(knowledge(title, _content_hash(title, text, meta)), text, size=len(text.encode("utf-8")))


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
    "DEFAULT_MAX_FILE_BYTES",
    "STREAM_FILE_BYTES",
]
