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

This module builds the documents (the entry points above); reading files is
:mod:`rag_lab.knowledge.reading` and writing chunks and indexes :mod:`rag_lab.knowledge.ingest_write`
(their public names are re-exported here).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_lab.knowledge.ingest_common import (
    DEFAULT_BATCH_SIZE,
    IngestError,
    IngestReport,
    _check_kb,
    _content_hash,
)
from rag_lab.knowledge.ingest_write import _Doc, _ingest, _read_blocks, _streamed_hash, delete_document
from rag_lab.knowledge.models import FAQEntry, Knowledge, KnowledgeBase
from rag_lab.knowledge.reading import SUPPORTED_SUFFIXES, html_to_text, read_document
from rag_lab.searchutil.text import markdown_title
from rag_lab.types.errors import MixedEmbeddingSpaces

if TYPE_CHECKING:
    from rag_lab.knowledge.workspace import Workspace
    from rag_lab.models.base import Embedder


#: CSV / Excel files: ingested as tables by rag_lab.knowledge.tables.ingest_table
TABLE_FILE_SUFFIXES = (".csv", ".xlsx", ".xls")

#: files above this many bytes are skipped (with the reason); ``max_file_bytes=`` to change it
DEFAULT_MAX_FILE_BYTES = 256 * 1024 * 1024
#: .txt / .md files above this many bytes are chunked while they are read (bounded memory)
STREAM_FILE_BYTES = 4 * 1024 * 1024


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
    prepare: bool = True,
) -> IngestReport:
    """Ingest the supported files under ``path`` (recursively by default). ``prepare``: also put
    into the vector cache the texts the embedding re-scorer and the extractive answerer will embed.

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
    # a file reached through several paths (a symlink to a file of the tree) is ingested once,
    # under the path that is not a link (else the first in order)
    owner: dict[Path, Path] = {}
    for f in sorted(files, key=lambda p: (p.is_symlink(), p)):
        owner.setdefault(f.resolve(), f)
    for f in files:
        rel = f.relative_to(root).as_posix()
        if any(part.startswith(".") for part in f.relative_to(root).parts):
            report.skipped.append((rel, "hidden file"))
            continue
        if not f.resolve().is_relative_to(real_root):  # a symlink (or a linked folder) out of the tree
            report.skipped.append((rel, f"symbolic link to {f.resolve()}, outside the ingested folder"))
            continue
        first = owner[f.resolve()]
        if first != f:
            report.skipped.append((rel, f"the same file as {first.relative_to(root).as_posix()} (ingested once)"))
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
        _ingest(ws, kb, docs, embedder, progress, batch_size, report, f"ingest {kb.name}", prepare)
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
            title = markdown_title(head) or f.stem
        digest, has_text = _streamed_hash(f, title, meta)
        if not has_text:
            return None
        return _Doc(knowledge(title, digest), "", stream_path=f, size=size)
    title, text = read_document(f)
    if not text.strip():
        return None
    return _Doc(knowledge(title, _content_hash(title, text, meta)), text, size=len(text.encode("utf-8")))


def _get(doc: object, name: str, default: object = None) -> Any:
    if isinstance(doc, Mapping):
        return doc.get(name, default)
    return getattr(doc, name, default)


def ingest_documents(
    ws: Workspace,
    kb: KnowledgeBase,
    docs: Iterable[object],
    embedder: Embedder | None,
    progress: bool = True,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    prepare: bool = True,
) -> IngestReport:
    """Ingest dataset documents (``id``, ``title``, ``text``, ``metadata``, optional ``tag_id``);
    ``prepare`` as :func:`ingest_folder`."""
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
    _ingest(ws, kb, prepared, embedder, progress, batch_size, report, f"ingest {kb.name}", prepare)
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
    entries: Iterable[object],
    embedder: Embedder | None,
    progress: bool = True,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    prepare: bool = True,
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
    _ingest(ws, kb, prepared, embedder, progress, batch_size, report, f"ingest FAQ {kb.name}", prepare)
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
