"""Writing documents into a knowledge base: chunking (a big plain-text file chunked while it is
read, in bounded memory), storing chunks, keyword and vector indexing in batches, progress in
bytes, and cleaning up on interruption so a stopped run leaves no half-written document; plus
:func:`delete_document`. The entry points that build the documents are in
:mod:`rag_lab.knowledge.ingestion`."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rag_lab.knowledge.chunking import chunk_text, iter_spans
from rag_lab.knowledge.ingest_common import IngestError, IngestReport, _embed, _remove_document
from rag_lab.knowledge.models import Chunk, FAQEntry, Knowledge, KnowledgeBase
from rag_lab.knowledge.scored_texts import scored_texts
from rag_lab.retrieval.spaces import vector_entries as _vector_entries
from rag_lab.searchutil.language import language_warning, sample_text
from rag_lab.types.search_result import SEARCHABLE_CHUNK_TYPES

if TYPE_CHECKING:
    from rag_lab.knowledge.workspace import Workspace
    from rag_lab.models.base import Embedder


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


def _streamed_hash(path: Path, title: str, meta: Mapping[str, object]) -> tuple[str, bool]:
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


def _mb(n: int) -> str:
    return f"{n / (1 << 20):.1f} MB"


def _ingest(
    ws: Workspace,
    kb: KnowledgeBase,
    docs: list[_Doc],
    embedder: Embedder | None,
    progress: bool,
    batch_size: int,
    report: IngestReport,
    desc: str,
    prepare: bool = True,
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
        awaiting_bytes: list[int] = []  # their sizes: the bar moves when they are stored

        # a caching embedder (the Lab's) also gets the texts the re-scorer and the answerer will
        # embed for these chunks, so the workspace's vector cache holds them before any question
        # (``prepare=False``: a reranker and chat model that do not embed with it, or retrieval only)
        warm = getattr(embedder, "warm", None) if vindex is not None and prepare else None
        to_warm: list[str] = []

        def flush() -> None:
            if pending and vindex is not None and embedder is not None:
                vecs = _embed(embedder, [p[3] for p in pending], f"knowledge base {kb.name!r}")
                vindex.add(
                    [p[0] for p in pending], vecs, entry_ids=[p[1] for p in pending], texts=[p[2] for p in pending]
                )
                report.vectors_added += len(pending)
            if warm is not None and to_warm:
                report.texts_prepared += warm(to_warm)
            pending.clear()
            to_warm.clear()
            done_docs.extend(awaiting)
            awaiting.clear()
            if awaiting_bytes:  # the bar counts what is stored: documents whose vectors are in
                bar.update(sum(awaiting_bytes))
                awaiting_bytes.clear()

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
                shown_at = 0.0
                for chunks in _chunk_batches(ws, kb, doc):
                    store.add_chunks(chunks)
                    report.chunks_added += len(chunks)
                    searchable = [c for c in chunks if c.chunk_type in SEARCHABLE_CHUNK_TYPES]
                    if kindex is not None and searchable:
                        kindex.add([c.id for c in searchable], [c.content for c in searchable])
                    for c in searchable:
                        for entry_id, own, to_embed in _vector_entries(c):
                            pending.append((c.id, entry_id, own, to_embed))
                        if warm is not None:
                            to_warm.extend(scored_texts(c, k))
                    if len(pending) >= batch_size:
                        flush()
                    step = min(
                        size - shown,
                        sum(len(c.content.encode("utf-8")) for c in chunks if c.chunk_type != "parent_text"),
                    )
                    shown += max(0, step)
                    now = time.monotonic()
                    if now - shown_at >= 0.5:  # a large file: say how far its reading got
                        bar.set_postfix_str(f"{k.file_name or k.title or k.id}: {_mb(shown)} of {_mb(size)} read")
                        shown_at = now
                (report.updated if existing is not None else report.added).append(k.id)
                awaiting.append(k)
                awaiting_bytes.append(size)
                current = None
                if not pending:  # every vector of the documents waiting is in: they are stored
                    done_docs.extend(awaiting)
                    awaiting.clear()
                    bar.update(sum(awaiting_bytes))
                    awaiting_bytes.clear()
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
